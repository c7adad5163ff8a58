#pragma once
// User kernels: a GLSL function body registered under a name, compiled once per device (the
// pipeline goes through the device's pipeline cache), then run like a built-in kernel, e.g. from
// GpuCommandBatch::custom(). Element-wise kernels also fuse into chains of built-in operations.
#include <cstdint>
#include <string_view>

namespace gpubatch {

class Device;

enum class KernelKind : std::uint8_t {
  // The body of `float f(float x, float p)` (inputs = 1) or `float f(float a, float b, float p)`
  // (inputs = 2): element k of the output from element k of each input and the request's scalar
  // p. One invocation per element; output length = input length. Fusable with other
  // element-wise operations.
  elementwise,
  // The body of `void f(FloatsIn a, FloatsIn b, Floats dst, uint n, float p)`: one invocation per
  // request (segment) reads its n input elements (a.v[i], and b.v[i] when inputs = 2) and writes
  // output_length elements (dst.v[i]). For reductions and other whole-vector work on short
  // vectors; it runs serially within a request.
  per_segment,
};

struct KernelOptions {
  std::uint32_t inputs = 1;         // 1 or 2 input vectors of equal length
  std::uint32_t output_length = 0;  // per_segment only: 0 = the input's length
};

// Compiles and registers `glsl_body` under `name` on `device` (and every copy of it). The body
// may use everything in shaders/common.glsl and shaders/math.glsl (stable_sigmoid, ...).
// Throws Error(compile_failed) whose message holds the compiler's diagnostics, with line numbers
// counted from the body's first line ("line 3: 'y' : undeclared identifier"); Error
// (invalid_argument) for a bad name (not [A-Za-z][A-Za-z0-9_]*, at most 64 characters, or a
// built-in operation's name), bad options, or a name already registered with another body.
// Registering the same name, kind, options and body again does nothing. Thread-safe.
void register_kernel(Device& device, std::string_view name, KernelKind kind,
                     std::string_view glsl_body, const KernelOptions& options = {});

// Whether `name` is registered on `device`.
bool has_kernel(const Device& device, std::string_view name);

}  // namespace gpubatch

#pragma once
// User kernels: a GLSL function body registered under a name, compiled once per device (the
// pipeline goes through the device's pipeline cache), then run like a built-in kernel: from
// GpuCommandBatch::custom(), or as a Request (Request::custom(kernel, a, b, p)) through
// Device::run and the batching executor, where requests of one kernel with different lengths
// share one ragged dispatch. Element-wise kernels also fuse into chains of built-in operations
// (GpuCommandBatch, and gpubatch::chain(x)...custom(kernel)).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
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
  // An executor over several devices runs a batch again on another device when the one it ran on
  // is lost (DESIGN.md "Several devices"): right for a pure function of the inputs, which every
  // kernel should be. false: a request of this kernel (alone or in a chain) that was in flight on
  // a lost device fails with device_lost instead.
  bool rerun_on_loss = true;
};

// A registered kernel, as requests refer to it: what validate() and output_bytes() need, with no
// registry at hand. register_kernel() and find_kernel() hand these out; the object behind the
// pointer also carries the compiled SPIR-V, so a kernel registered on one device runs on any
// other (its pipeline is built there on first use). Immutable.
struct CustomKernelInfo {
  virtual ~CustomKernelInfo() = default;
  std::string name;
  KernelKind kind = KernelKind::elementwise;
  std::uint32_t inputs = 1;         // 1 or 2
  std::uint32_t output_length = 0;  // per_segment only: 0 = the input's length
  bool rerun_on_loss = true;        // KernelOptions::rerun_on_loss
  std::string key;                  // identity: name, kind, options and a hash of the body

  // Output floats for an input of `n` floats.
  std::size_t output_floats(std::size_t n) const {
    return kind == KernelKind::per_segment && output_length != 0 ? output_length : n;
  }
};
using KernelHandle = std::shared_ptr<const CustomKernelInfo>;

// Compiles and registers `glsl_body` under `name` on `device` (and every copy of it). The body
// may use everything in shaders/common.glsl and shaders/math.glsl (stable_sigmoid, ...).
// Throws Error(compile_failed) whose message holds the compiler's diagnostics, with line numbers
// counted from the body's first line ("line 3: 'y' : undeclared identifier"); Error
// (invalid_argument) for a bad name (not [A-Za-z][A-Za-z0-9_]*, at most 64 characters, or a
// built-in operation's name), bad options, or a name already registered with another body.
// Registering the same name, kind, options and body again does nothing (and returns the handle
// registered first). Thread-safe. The handle feeds Request::custom() and chain(x).custom().
KernelHandle register_kernel(Device& device, std::string_view name, KernelKind kind,
                             std::string_view glsl_body, const KernelOptions& options = {});

// Whether `name` is registered on `device`.
bool has_kernel(const Device& device, std::string_view name);
// The kernel registered under `name` on `device`, or null.
KernelHandle find_kernel(const Device& device, std::string_view name);

}  // namespace gpubatch

#pragma once
// The runtime GLSL compiler: compute-shader GLSL source -> SPIR-V words (Vulkan 1.2 target), with
// the glslang library. Used for fused element-wise chains and user-registered kernels.
// `#include "common.glsl"` (and every other shaders/*.glsl) resolves to the text embedded into the
// library at build time (cmake/Shaders.cmake, gpubatch_embed_glsl_text), so generated kernels
// share the built-in kernels' push constants, segment table and math.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpubatch::gpu {

// Compiles `source`, named `name` in diagnostics. Throws Error(compile_failed) whose message holds
// the compiler's log: one line per diagnostic, "ERROR: <name>:<line>: <message>" (line numbers
// follow the source's own #line directives). Thread-safe.
std::vector<std::uint32_t> compile_compute_glsl(std::string_view source, std::string_view name);

// The embedded text of shaders/<file> (e.g. "math.glsl"), if the library carries it.
std::optional<std::string_view> embedded_glsl(std::string_view file);

}  // namespace gpubatch::gpu

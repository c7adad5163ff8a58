#include "gpu/custom_kernels.hpp"

#include <cctype>
#include <functional>
#include <sstream>
#include <utility>

#include "gpu/context.hpp"
#include "gpu/device_identity.hpp"
#include "gpu/glsl_compiler.hpp"
#include "gpu/kernels.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch::gpu {
namespace {

constexpr std::string_view kBodySourceName = "custom-kernel-body";

std::string signature(const CustomKernel& k) {
  if (k.kind == KernelKind::per_segment)
    return "void " + k.function_name() + "(FloatsIn a, FloatsIn b, Floats dst, uint n, float p)";
  if (k.inputs == 2) return "float " + k.function_name() + "(float a, float b, float p)";
  return "float " + k.function_name() + "(float x, float p)";
}

std::string hex64(std::uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 15];
  return s;
}

// FNV-1a: stable across runs and standard libraries, so keys (and logs) are too.
std::uint64_t fnv1a(std::string_view text, std::uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void check_name(std::string_view name) {
  auto bad = [&](const std::string& why) {
    throw Error(ErrorCode::invalid_argument, "kernel name '" + std::string(name) + "' " + why);
  };
  if (name.empty() || name.size() > 64) bad("must have 1 to 64 characters");
  if (!std::isalpha(static_cast<unsigned char>(name[0]))) bad("must start with a letter");
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      bad("may hold only letters, digits and '_'");
  if (op_from_string(name)) bad("is a built-in operation");
}

// glslang reports "ERROR: custom-kernel-body:3: 'y' : undeclared identifier"; callers want the
// line of their body: "line 3: 'y' : undeclared identifier".
std::string body_diagnostics(const std::string& what) {
  std::istringstream in(what);
  std::string line, out;
  const std::string tag = std::string(kBodySourceName) + ":";
  while (std::getline(in, line)) {
    if (auto pos = line.find(tag); pos != std::string::npos) {
      std::string rest = line.substr(pos + tag.size());
      const bool warning = line.rfind("WARNING", 0) == 0;
      line = std::string(warning ? "warning: " : "") + "line " + rest;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  if (!out.empty()) out.pop_back();
  return out;
}

}  // namespace

std::shared_ptr<const CustomKernel> CustomKernelRegistry::find(std::string_view name) const {
  std::lock_guard lock(mutex_);
  auto it = kernels_.find(name);
  return it == kernels_.end() ? nullptr : it->second;
}

std::shared_ptr<const CustomKernel> CustomKernelRegistry::add(std::shared_ptr<const CustomKernel> kernel) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = kernels_.emplace(kernel->name, kernel);
  if (!inserted && it->second->key != kernel->key)
    throw Error(ErrorCode::invalid_argument,
                "kernel '" + kernel->name + "' is already registered with another body, kind or options");
  return it->second;
}

std::string custom_kernel_source(const CustomKernel& k) {
  std::string s = "#version 460\n#extension GL_GOOGLE_include_directive : require\n";
  if (k.kind == KernelKind::elementwise) {
    if (k.inputs == 2) s += "#define BINARY\n";
    s += "#include \"elementwise.glsl\"\n#include \"math.glsl\"\n";
  } else {
    s += "#include \"common.glsl\"\n#include \"math.glsl\"\nlayout(local_size_x = WORKGROUP_SIZE) in;\n";
  }
  // The body's lines count from 1 in diagnostics.
  s += signature(k) + " {\n#line 1\n" + k.body + "\n}\n";
  if (k.kind == KernelKind::elementwise) {
    if (k.inputs == 2)
      s += "float apply(float a, float b, float p) { return " + k.function_name() + "(a, b, p); }\n";
    else
      s += "float apply(float x, float p) { return " + k.function_name() + "(x, p); }\n";
  } else {
    // One invocation per segment; the block table is not used.
    s += "void main() {\n"
         "  uint seg = block_index() * WORKGROUP_SIZE + gl_LocalInvocationID.x;\n"
         "  if (block_index() >= pc.block_count || seg >= pc.segment_count) return;\n"
         "  Segment s = SegmentTable(pc.segments).s[seg];\n"
         "  " + k.function_name() + "(FloatsIn(s.a), FloatsIn(s.b), Floats(s.dst), s.len, s.p0);\n"
         "}\n";
  }
  return s;
}

}  // namespace gpubatch::gpu

namespace gpubatch {

KernelHandle register_kernel(Device& device, std::string_view name, KernelKind kind, std::string_view glsl_body,
                             const KernelOptions& options) {
  gpu::check_name(name);
  if (kind != KernelKind::elementwise && kind != KernelKind::per_segment)
    throw Error(ErrorCode::invalid_argument, "kernel '" + std::string(name) + "': unknown kernel kind");
  if (options.inputs != 1 && options.inputs != 2)
    throw Error(ErrorCode::invalid_argument, "kernel '" + std::string(name) + "': inputs must be 1 or 2, not " +
                                                 std::to_string(options.inputs));
  if (kind == KernelKind::elementwise && options.output_length != 0)
    throw Error(ErrorCode::invalid_argument, "kernel '" + std::string(name) +
                                                 "': an element-wise kernel's output has its input's length");
  if (glsl_body.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw Error(ErrorCode::invalid_argument, "kernel '" + std::string(name) + "': empty body");

  const auto identity = device.identity();
  gpu::CustomKernelRegistry* registry = &identity->custom_kernels();
  auto k = std::make_shared<gpu::CustomKernel>();
  k->name = std::string(name);
  k->kind = kind;
  k->inputs = options.inputs;
  k->output_length = options.output_length;
  k->rerun_on_loss = options.rerun_on_loss;
  k->body = std::string(glsl_body);
  k->function = gpu::signature(*k) + " {\n" + k->body + "\n}\n";
  std::uint64_t h = gpu::fnv1a(k->body);
  h = gpu::fnv1a(std::to_string(static_cast<int>(kind)) + "/" + std::to_string(k->inputs) + "/" +
                     std::to_string(k->output_length) + (k->rerun_on_loss ? "" : "/no-rerun"),
                 h);
  k->key = "custom/" + k->name + "/" + gpu::hex64(h);
  if (auto existing = registry->find(name)) {
    if (existing->key == k->key) return existing;  // the same kernel again
    throw Error(ErrorCode::invalid_argument,
                "kernel '" + k->name + "' is already registered with another body, kind or options");
  }
  try {
    k->spirv = gpu::compile_compute_glsl(gpu::custom_kernel_source(*k), gpu::kBodySourceName);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::compile_failed) throw;
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what = what.substr(nl + 1);
    throw Error(ErrorCode::compile_failed,
                "custom kernel '" + k->name + "' does not compile:\n" + gpu::body_diagnostics(what));
  }
  // The driver's build, through the pipeline cache, on the device as it is now.
  identity->context()->kernels().get_or_build(k->key, k->spirv);
  return registry->add(std::move(k));
}

bool has_kernel(const Device& device, std::string_view name) {
  return device.identity()->custom_kernels().find(name) != nullptr;
}

KernelHandle find_kernel(const Device& device, std::string_view name) {
  return device.identity()->custom_kernels().find(name);
}

}  // namespace gpubatch

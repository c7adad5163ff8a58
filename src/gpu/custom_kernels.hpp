#pragma once
// User kernels registered with gpubatch::register_kernel(): the GLSL they were given, the
// standalone kernel built from it, and the per-device registry that holds them.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gpubatch/custom_kernel.hpp"

namespace gpubatch::detail {
class GpuContext;
}

namespace gpubatch::gpu {

struct CustomKernel {
  std::string name;
  KernelKind kind = KernelKind::elementwise;
  std::uint32_t inputs = 1;
  std::uint32_t output_length = 0;  // per_segment: 0 = the input's length
  std::string body;
  std::string function;             // GLSL definition of custom_<name>(...), for fused kernels
  std::string key;                  // Kernels key of the standalone kernel; names it in fusion keys
  std::vector<std::uint32_t> spirv;  // the standalone kernel

  std::string function_name() const { return "custom_" + name; }
  // Output floats for an input of `n` floats.
  std::size_t output_floats(std::size_t n) const {
    return kind == KernelKind::per_segment && output_length != 0 ? output_length : n;
  }
};

class CustomKernelRegistry {
 public:
  std::shared_ptr<const CustomKernel> find(std::string_view name) const;
  // Adds `kernel`; returns the one already registered under its name when that one is the same,
  // throws Error(invalid_argument) when it differs.
  std::shared_ptr<const CustomKernel> add(std::shared_ptr<const CustomKernel> kernel);

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const CustomKernel>, std::less<>> kernels_;
};

// The registry of one device (shared by every copy of the Device and every batch on it).
std::shared_ptr<CustomKernelRegistry> custom_kernels(const std::shared_ptr<detail::GpuContext>& context);

// GLSL source of the standalone kernel for a custom kernel (exposed for tests and the executor).
std::string custom_kernel_source(const CustomKernel& kernel);

}  // namespace gpubatch::gpu

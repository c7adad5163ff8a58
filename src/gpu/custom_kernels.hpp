#pragma once
// User kernels registered with gpubatch::register_kernel(): the GLSL they were given, the
// standalone kernel built from it, and the per-device registry that holds them (one per
// DeviceIdentity: it outlives a re-created VkDevice, and each kernel's pipeline is built again
// from its SPIR-V on the new device on first use).
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gpubatch/custom_kernel.hpp"

namespace gpubatch::gpu {

// The registered kernel: the public description (name, kind, inputs, output_length, key) plus
// what the GPU layer needs. `key` is the Kernels key of the standalone kernel and names it in
// fusion keys.
struct CustomKernel : CustomKernelInfo {
  std::string body;
  std::string function;              // GLSL definition of custom_<name>(...), for fused kernels
  std::vector<std::uint32_t> spirv;  // the standalone kernel

  std::string function_name() const { return "custom_" + name; }
};

// The GPU layer's kernel behind a public handle; null when the handle was not made by
// register_kernel() (a CustomKernelInfo built by hand).
inline std::shared_ptr<const CustomKernel> as_custom_kernel(const std::shared_ptr<const CustomKernelInfo>& info) {
  return std::dynamic_pointer_cast<const CustomKernel>(info);
}

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

// GLSL source of the standalone kernel for a custom kernel (exposed for tests and the executor).
std::string custom_kernel_source(const CustomKernel& kernel);

}  // namespace gpubatch::gpu

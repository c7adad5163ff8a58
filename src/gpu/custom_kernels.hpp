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
#include "plan/custom_kernel.hpp"

namespace gpubatch::gpu {

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

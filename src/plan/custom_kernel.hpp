#pragma once
// A user kernel registered with gpubatch::register_kernel(), as planning needs it: the public
// description plus its GLSL (the body and the custom_<name>() function fused kernels call) and
// the standalone kernel's SPIR-V. No Vulkan: src/gpu builds pipelines from it
// (src/gpu/custom_kernels.hpp holds the per-device registry).
#include <cstdint>
#include <memory>
#include <string>
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

}  // namespace gpubatch::gpu

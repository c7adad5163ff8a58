#pragma once
// Turns a failed VkResult into the gpubatch::Error callers can act on.
#include <vulkan/vulkan.h>

#include <string>

#include "gpubatch/error.hpp"

namespace gpubatch::gpu {

inline ErrorCode error_code_for(VkResult result) {
  switch (result) {
    case VK_ERROR_DEVICE_LOST: return ErrorCode::device_lost;
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTED_POOL: return ErrorCode::out_of_memory;
    // Only an import returns it (Device::import_host): the caller's memory cannot be imported.
    case VK_ERROR_INVALID_EXTERNAL_HANDLE: return ErrorCode::invalid_argument;
    default: return ErrorCode::internal;
  }
}

[[noreturn]] inline void throw_vk(VkResult result, const char* what) {
  throw Error(error_code_for(result), std::string(what) + " failed (VkResult " +
                                          std::to_string(static_cast<int>(result)) + ")");
}

inline void check_vk(VkResult result, const char* what) {
  if (result != VK_SUCCESS) throw_vk(result, what);
}

}  // namespace gpubatch::gpu

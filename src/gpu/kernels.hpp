#pragma once
// Compute pipelines by name, built once and shared. All kernels use one pipeline layout (push
// constants only; data is reached through buffer device addresses), and every pipeline is built
// through one VkPipelineCache that is persisted per device UUID so that a second run of the
// program builds nothing from scratch.
#include <vulkan/vulkan.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <span>
#include <string>

namespace gpubatch::detail {
class GpuContext;
}

namespace gpubatch::gpu {

inline constexpr std::uint32_t kPushConstantBytes = 128;

class Kernels {
 public:
  Kernels(detail::GpuContext& context, const std::string& cache_dir_option);
  ~Kernels();

  VkPipelineLayout layout() const { return layout_; }
  // A built-in kernel from shaders/ (embedded SPIR-V). Throws Error(compile_failed) when the
  // driver cannot build it.
  VkPipeline get(std::string_view name);
  // A kernel whose SPIR-V was produced at run time (fusion, user kernels), keyed by `key`.
  // Thread-safe; builds run one at a time, outside the lookups' lock, and a key is built once
  // (threads that miss on it together wait for the one build).
  VkPipeline get_or_build(const std::string& key, std::span<const std::uint32_t> spirv);
  bool has(const std::string& key);
  // How many pipelines are built (for tests).
  std::size_t size();

  // Where the pipeline cache is kept (empty when disabled).
  const std::filesystem::path& cache_file() const { return cache_file_; }
  // Writes the pipeline cache to disk now (it is also written after each new pipeline).
  void save_cache();

 private:
  VkPipeline build(const std::string& key, std::span<const std::uint32_t> spirv);

  detail::GpuContext& context_;
  bool exclusive_builds_ = true;  // GPUBATCH_BUILD_EXCLUSIVE
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::filesystem::path cache_file_;
  void save_cache_locked();

  std::mutex mutex_;  // guards pipelines_; never held across a build or a file write
  std::map<std::string, VkPipeline, std::less<>> pipelines_;
  std::mutex build_mutex_;  // one build or cache write at a time (get_or_build)
};

// The directory the pipeline cache goes to, from the option, GPUBATCH_CACHE_DIR, XDG_CACHE_HOME
// or HOME; empty when caching is off ("none").
std::filesystem::path pipeline_cache_dir(const std::string& option);

}  // namespace gpubatch::gpu

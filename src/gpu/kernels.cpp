#include "gpu/kernels.hpp"

#include "log.hpp"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "gpu/context.hpp"
#include "gpu/env_switch.hpp"
#include "gpu/fault_injection.hpp"
#include "gpu/vk_check.hpp"

namespace gpubatch::gpu {

extern const std::pair<std::string_view, std::span<const std::uint32_t>> kEmbeddedShaders[];
extern const std::size_t kEmbeddedShaderCount;

namespace {

std::string hex(std::span<const std::uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (auto b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::vector<char> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

std::filesystem::path pipeline_cache_dir(const std::string& option) {
  std::string dir = option;
  if (dir.empty())
    if (const char* env = std::getenv("GPUBATCH_CACHE_DIR")) dir = env;
  if (dir == "none") return {};
  if (!dir.empty()) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::filesystem::path(xdg) / "gpubatch";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "gpubatch";
  return {};
}

// GPUBATCH_BUILD_EXCLUSIVE=off lets pipelines be built while batches are submitted (the old
// behaviour, for side-by-side runs on the hang); anything else but unset or "on" is refused.
static bool exclusive_builds() { return env_switch("GPUBATCH_BUILD_EXCLUSIVE", true, "on", "off"); }

Kernels::Kernels(detail::GpuContext& context, const std::string& cache_dir_option)
    : context_(context), exclusive_builds_(exclusive_builds()) {
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushConstantBytes};
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &range;
  check_vk(vkCreatePipelineLayout(context.device(), &layout_info, nullptr, &layout_),
           "vkCreatePipelineLayout");

  std::vector<char> initial;
  if (auto dir = pipeline_cache_dir(cache_dir_option); !dir.empty()) {
    cache_file_ = dir / ("pipelines-" + hex(context.info().pipeline_cache_uuid) + ".bin");
    initial = read_file(cache_file_);
  }
  VkPipelineCacheCreateInfo cache_info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  cache_info.initialDataSize = initial.size();
  cache_info.pInitialData = initial.empty() ? nullptr : initial.data();
  // A stale or foreign file is ignored by the driver; a failure here means start empty.
  if (vkCreatePipelineCache(context.device(), &cache_info, nullptr, &cache_) != VK_SUCCESS) {
    cache_info.initialDataSize = 0;
    cache_info.pInitialData = nullptr;
    check_vk(vkCreatePipelineCache(context.device(), &cache_info, nullptr, &cache_), "vkCreatePipelineCache");
  }
}

Kernels::~Kernels() {
  VkDevice device = context_.device();
  for (auto& [name, pipeline] : pipelines_) vkDestroyPipeline(device, pipeline, nullptr);
  vkDestroyPipelineCache(device, cache_, nullptr);
  vkDestroyPipelineLayout(device, layout_, nullptr);
}

void Kernels::save_cache() {
  std::lock_guard lock(build_mutex_);
  save_cache_locked();
}

// Under build_mutex_: one writer of the file (and of its temporary) at a time, and no pipeline
// built while the driver serialises the cache.
void Kernels::save_cache_locked() {
  if (cache_file_.empty()) return;
  std::size_t size = 0;
  if (vkGetPipelineCacheData(context_.device(), cache_, &size, nullptr) != VK_SUCCESS) return;
  std::vector<char> data(size);
  if (vkGetPipelineCacheData(context_.device(), cache_, &size, data.data()) != VK_SUCCESS) return;
  std::error_code ec;
  std::filesystem::create_directories(cache_file_.parent_path(), ec);
  // Write then rename, so a reader (another process) never sees half a file.
  auto tmp = cache_file_;
  tmp += ".tmp" + std::to_string(reinterpret_cast<std::uintptr_t>(this));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      log::warn("gpubatch: cannot write pipeline cache {}", tmp.string());
      return;
    }
    out.write(data.data(), static_cast<std::streamsize>(size));
  }
  std::filesystem::rename(tmp, cache_file_, ec);
  if (ec) log::warn("gpubatch: cannot write pipeline cache {}: {}", cache_file_.string(), ec.message());
}

VkPipeline Kernels::build(const std::string& key, std::span<const std::uint32_t> spirv) {
  VkDevice device = context_.device();
  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = spirv.size_bytes();
  module_info.pCode = spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  VkResult r = vkCreateShaderModule(device, &module_info, nullptr, &module);
  if (r != VK_SUCCESS)
    throw Error(ErrorCode::compile_failed, "kernel '" + key + "': vkCreateShaderModule failed (VkResult " + std::to_string(r) + ")");

  VkPipelineCreationFeedback feedback{};
  VkPipelineCreationFeedbackCreateInfo feedback_info{VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO};
  feedback_info.pPipelineCreationFeedback = &feedback;
  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  if (context_.creation_feedback()) info.pNext = &feedback_info;
  info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.layout = layout_;
  VkPipeline pipeline = VK_NULL_HANDLE;
  r = FaultInjector::fire(Fault::pipeline_build)
          ? VK_ERROR_UNKNOWN
          : vkCreateComputePipelines(device, cache_, 1, &info, nullptr, &pipeline);
  vkDestroyShaderModule(device, module, nullptr);
  if (r != VK_SUCCESS)
    throw Error(r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? ErrorCode::out_of_memory : ErrorCode::compile_failed,
                "kernel '" + key + "': vkCreateComputePipelines failed (VkResult " + std::to_string(r) + ")");
  auto& counters = context_.counters();
  counters.pipelines_created.fetch_add(1, std::memory_order_relaxed);
  if (feedback.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT)
    counters.pipeline_cache_hits.fetch_add(1, std::memory_order_relaxed);
  return pipeline;
}

// One build at a time, outside mutex_, with submissions paused. Lookups of built pipelines take
// only mutex_ and never wait for a build: holding one lock across a build (~20 ms on the H200 on
// a cache miss; more for a large kernel) stalled every lookup, on the strand and on the graph's
// threads alike. A thread that misses takes build_mutex_ and looks again: a thread that raced it
// to the same key has built it meanwhile, so a key is built once. The build itself holds the
// queues' submission locks (GpuContext::pause_submissions): on the H100 (NVIDIA 580.159) a batch
// whose pipeline had just been built while other threads submitted sometimes never finished on
// the GPU (14 hangs, all of that kind); with builds and submissions apart, 0 in 1,966 fresh
// devices against 4 in 1,645 without, interleaved (RELIABILITY.md "A copy-engine batch that never
// completes"; GPUBATCH_BUILD_EXCLUSIVE=off for side-by-side runs). The cache file is written
// under build_mutex_ too, so the driver never serialises the cache while a pipeline is built.
VkPipeline Kernels::get_or_build(const std::string& key, std::span<const std::uint32_t> spirv) {
  const auto find = [&]() -> VkPipeline {
    std::lock_guard lock(mutex_);
    const auto it = pipelines_.find(key);
    return it == pipelines_.end() ? VK_NULL_HANDLE : it->second;
  };
  if (VkPipeline built = find()) return built;
  std::lock_guard build_lock(build_mutex_);
  if (VkPipeline built = find()) return built;  // another thread built it while we waited
  VkPipeline built = VK_NULL_HANDLE;
  {
    // No submission meanwhile (see above): a pipeline built while another thread submitted
    // was the common factor of the H100 hangs.
    std::optional<detail::GpuContext::SubmissionPause> pause;
    if (exclusive_builds_) pause.emplace(context_.pause_submissions());
    built = build(key, spirv);
  }
  {
    std::lock_guard lock(mutex_);
    pipelines_.emplace(key, built);
  }
  save_cache_locked();
  return built;
}

std::size_t Kernels::size() {
  std::lock_guard lock(mutex_);
  return pipelines_.size();
}

bool Kernels::has(const std::string& key) {
  std::lock_guard lock(mutex_);
  return pipelines_.count(key) != 0;
}

VkPipeline Kernels::get(std::string_view name) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = pipelines_.find(name); it != pipelines_.end()) return it->second;
  }
  for (std::size_t i = 0; i < kEmbeddedShaderCount; ++i)
    if (kEmbeddedShaders[i].first == name)
      return get_or_build(std::string(name), kEmbeddedShaders[i].second);
  throw Error(ErrorCode::internal, "no built-in kernel named '" + std::string(name) + "'");
}

}  // namespace gpubatch::gpu

#include "gpu/transfer_path.hpp"

#include "gpu/env_switch.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gpu/context.hpp"
#include "gpu/vk_check.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::gpu {
namespace {

// The default line (DESIGN.md "Large requests"): on the H200 the direct path costs the CPU one
// write-combined store per byte (~6 GB/s a thread) and the copy-engine path one cached store
// (~15 GB/s) plus a DMA (52 GB/s) plus one more submission and semaphore hop (~20 us). The two
// meet where B * (1/6 - 1/15 - 1/52) ns/B = 20 us, B ~ 250 KB.
constexpr std::uint64_t kDefaultThreshold = 256 * 1024;
constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

// True when some device-local memory type is not host-visible: the device has memory of its own
// across a bus. lavapipe and integrated GPUs have none (device memory is host memory), and a copy
// there is pure overhead.
bool has_separate_device_memory(const VkPhysicalDeviceMemoryProperties& props) {
  for (std::uint32_t i = 0; i < props.memoryTypeCount; ++i) {
    const auto f = props.memoryTypes[i].propertyFlags;
    if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && !(f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) return true;
  }
  return false;
}


// A byte count from the environment variable `name`: a number, or "never"/"off" (no batch);
// nullopt when unset. Anything else is an invalid_config Error.
std::optional<std::uint64_t> env_bytes(const char* name) {
  const char* env = std::getenv(name);
  if (!env || !*env) return std::nullopt;
  const std::string v = env;
  if (v == "never" || v == "off") return kNever;
  try {
    std::size_t used = 0;
    const unsigned long long bytes = std::stoull(v, &used);
    if (used == v.size()) return bytes;
  } catch (const std::exception&) {
  }
  throw Error(ErrorCode::invalid_config, std::string(name) + "='" + v + "' is neither a byte count nor 'never'");
}

}  // namespace

CopyEngineRule copy_engine_rule(const detail::GpuContext& ctx, const DeviceOptions& options) {
  if (options.copy_engine_bytes) return {*options.copy_engine_bytes, true};
  if (const auto bytes = env_bytes("GPUBATCH_COPY_ENGINE_BYTES")) return {*bytes, true};
  return {has_separate_device_memory(ctx.memory_properties()) ? kDefaultThreshold : kNever, false};
}

SplitRule split_rule(const detail::GpuContext& ctx, const DeviceOptions& options) {
  constexpr std::uint64_t kDefaultSplit = std::uint64_t{8} << 20;
  SplitRule rule;
  if (options.split_bytes) rule.bytes = *options.split_bytes;
  else if (const auto bytes = env_bytes("GPUBATCH_SPLIT_BYTES")) rule.bytes = *bytes;
  else rule.bytes = has_separate_device_memory(ctx.memory_properties()) ? kDefaultSplit : kNever;
  const std::uint64_t chunk = env_bytes("GPUBATCH_SPLIT_CHUNK_BYTES").value_or(std::uint64_t{4} << 20);
  rule.chunk_floats = static_cast<std::size_t>(std::clamp<std::uint64_t>(chunk / sizeof(float), 1024, std::uint64_t{1} << 26));
  return rule;
}

std::uint64_t cached_upload_bytes() { return env_bytes("GPUBATCH_CACHED_UPLOAD_BYTES").value_or(256 * 1024); }

namespace {
// A line up to which something is done: `name` in bytes, "off" (or "never") for none, else `unset`.
std::uint64_t env_line(const char* name, std::uint64_t unset) {
  const auto bytes = env_bytes(name);
  return !bytes ? unset : *bytes == kNever ? 0 : *bytes;
}
}  // namespace

std::uint64_t copy_part_bytes() {
  const std::uint64_t bytes = env_bytes("GPUBATCH_COPY_PART_BYTES").value_or(256 * 1024);
  if (bytes < 4096 || bytes == kNever)
    throw Error(ErrorCode::invalid_config, "GPUBATCH_COPY_PART_BYTES must be a byte count of at least 4096");
  return bytes;
}

std::uint64_t near_upload_bytes() { return env_line("GPUBATCH_NEAR_UPLOAD_BYTES", 64 * 1024); }
std::uint64_t near_lone_bytes() { return env_line("GPUBATCH_NEAR_LONE_BYTES", kNever); }

bool near_big() { return env_switch("GPUBATCH_NEAR_BIG", true, "on", "off"); }

UploadPlace upload_place(std::uint64_t upload_bytes, std::size_t requests, const PathRules& rules, bool has_near) {
  if (upload_bytes >= rules.cached_upload_bytes)
    return has_near && rules.near_big && rules.near_upload_bytes != 0 ? UploadPlace::near : UploadPlace::cached;
  if (!has_near || rules.near_upload_bytes == 0) return UploadPlace::write_combined;
  const std::uint64_t line = requests <= kNearLoneRequests ? std::max(rules.near_upload_bytes, rules.near_lone_bytes)
                                                           : rules.near_upload_bytes;
  return upload_bytes <= line ? UploadPlace::near : UploadPlace::write_combined;
}

std::vector<VkBufferCopy> staged_regions(std::size_t total, std::span<const BufferCopy> holes,
                                         VkDeviceSize src_base, VkDeviceSize dst_base) {
  std::vector<const BufferCopy*> sorted;
  sorted.reserve(holes.size());
  for (const BufferCopy& h : holes) sorted.push_back(&h);
  std::sort(sorted.begin(), sorted.end(),
            [](const BufferCopy* a, const BufferCopy* b) { return a->device_offset < b->device_offset; });
  std::vector<VkBufferCopy> out;
  VkDeviceSize at = 0;
  const auto run_to = [&](VkDeviceSize end) {
    if (end > at) out.push_back({src_base + at, dst_base + at, end - at});
  };
  for (const BufferCopy* h : sorted) {
    run_to(std::min<VkDeviceSize>(h->device_offset, total));
    at = std::max(at, h->device_offset + h->bytes);
  }
  run_to(total);
  return out;
}

bool copy_results_by_kernel() { return env_switch("GPUBATCH_COPY_RESULTS", false, "kernel", "engine"); }

bool upload_wait_on_host() { return env_switch("GPUBATCH_UPLOAD_WAIT", false, "host", "device"); }

bool ew_vector_kernels(bool device_default) { return env_switch("GPUBATCH_EW_VECTOR", device_default, "on", "off"); }

void TransferFrame::destroy(VkDevice device) noexcept {
  if (pool_) vkDestroyCommandPool(device, pool_, nullptr);
  pool_ = VK_NULL_HANDLE;
}

void TransferFrame::prepare(detail::GpuContext& ctx, std::size_t upload_bytes, std::size_t output_bytes) {
  auto& pool = ctx.memory();
  ensure(staging_, pool, MemoryKind::staging, upload_bytes);
  ensure(device_in_, pool, MemoryKind::device_local, upload_bytes);
  ensure(device_out_, pool, MemoryKind::device_local, output_bytes);
  if (pool_) return;
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pool_info.queueFamilyIndex = ctx.transfer_family();
  check_vk(vkCreateCommandPool(ctx.device(), &pool_info, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  check_vk(vkAllocateCommandBuffers(ctx.device(), &alloc, &commands_), "vkAllocateCommandBuffers");
}

std::uint64_t TransferFrame::upload(detail::GpuContext& ctx, std::size_t bytes, std::span<const BufferCopy> extra) {
  staging_.flush();
  check_vk(vkResetCommandPool(ctx.device(), pool_, 0), "vkResetCommandPool");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check_vk(vkBeginCommandBuffer(commands_, &begin), "vkBeginCommandBuffer");
  // The staged tables and inputs, around the ranges host buffers fill (no write overlaps another).
  const auto staged = staged_regions(bytes, extra, staging_.offset(), device_in_.offset());
  if (!staged.empty())
    vkCmdCopyBuffer(commands_, staging_.buffer(), device_in_.buffer(), static_cast<std::uint32_t>(staged.size()),
                    staged.data());
  for (const BufferCopy& c : extra) {
    const VkBufferCopy region{c.host_offset, device_in_.offset() + c.device_offset, c.bytes};
    vkCmdCopyBuffer(commands_, c.buffer, device_in_.buffer(), 1, &region);
  }
  // No barrier: the upload timeline's signal makes these writes available to the waiting queue.
  check_vk(vkEndCommandBuffer(commands_), "vkEndCommandBuffer");
  return ctx.submit_upload(commands_);
}

void TransferFrame::record_download(VkCommandBuffer cmd, const Allocation& readback, std::size_t bytes,
                                    std::span<const BufferCopy> extra) const {
  VkMemoryBarrier to_copy{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  to_copy.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  to_copy.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &to_copy,
                       0, nullptr, 0, nullptr);
  // Results for readback, around those delivered into host buffers.
  const auto staged = staged_regions(bytes, extra, device_out_.offset(), readback.offset());
  if (!staged.empty())
    vkCmdCopyBuffer(cmd, device_out_.buffer(), readback.buffer(), static_cast<std::uint32_t>(staged.size()),
                    staged.data());
  for (const BufferCopy& c : extra) {
    const VkBufferCopy region{device_out_.offset() + c.device_offset, c.host_offset, c.bytes};
    vkCmdCopyBuffer(cmd, device_out_.buffer(), c.buffer, 1, &region);
  }
  VkMemoryBarrier to_host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  to_host.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0,
                       nullptr, 0, nullptr);
}

}  // namespace gpubatch::gpu

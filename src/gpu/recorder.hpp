#pragma once
// The one place that writes compute work into a command buffer, for ragged batches
// (vulkan_batch_device.cpp) and graph executes (graph_record.cpp) alike: begin/end, a dispatch of a
// built-in, fused or custom kernel (bind, push constants, a grid within the device's limit),
// memory barriers and timestamps. It counts the dispatches it records.
#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>

#include "plan/batch_layout.hpp"

namespace gpubatch::detail {
class GpuContext;
}

namespace gpubatch::gpu {

// One dispatch's push constants but the table: where its segments and block table are, its
// scratch, and how many blocks (workgroups) and segments it has.
struct DispatchArgs {
  std::uint64_t segments = 0;
  std::uint64_t blocks = 0;
  std::uint64_t scratch = 0;
  std::uint32_t block_count = 0;
  std::uint32_t segment_count = 0;
  // Blocks one workgroup covers: 1, or 16 for a kernel that does sixteen elements per
  // invocation (op_kernel.glsl's GPUBATCH_VECTOR, EW_WIDE vec4s). The grid is ceil(block_count / blocks_per_workgroup).
  std::uint32_t blocks_per_workgroup = 1;
  // dot_final: the partial sums the first pass wrote into scratch (the bound of its reads).
  std::uint32_t scratch_count = 0;
  bool operator==(const DispatchArgs&) const = default;
};

class CommandRecorder {
 public:
  // Records into `commands` (allocated from `pool`) with `ctx`'s kernel pipeline layout.
  CommandRecorder(detail::GpuContext& ctx, VkCommandPool pool, VkCommandBuffer commands);

  // The table every dispatch pushes (PushConstants::table; zeros until set).
  void set_table(const std::array<float, 16>& table);

  // Resets the pool and begins the command buffer: for one submission (`one_time`), or for as
  // many as its owner makes, one after another (re-submitted without recording again).
  void begin(bool one_time = true);
  void end();

  // n = ceil(block_count / blocks_per_workgroup) workgroups as a grid of
  // grid_x = min(n, maxComputeWorkGroupCount[0]) by ceil(n / grid_x).
  void dispatch(VkPipeline pipeline, const DispatchArgs& args);
  void barrier(VkPipelineStageFlags src_stage, VkAccessFlags src_access, VkPipelineStageFlags dst_stage,
               VkAccessFlags dst_access);
  // Resets queries [0, count) of `pool`, then writes query 0 at the top of the pipe.
  void start_timestamps(VkQueryPool pool, std::uint32_t count);
  void timestamp(VkQueryPool pool, VkPipelineStageFlagBits stage, std::uint32_t query);

  VkCommandBuffer commands() const noexcept { return cmd_; }
  std::uint64_t dispatches() const noexcept { return dispatches_; }

 private:
  VkDevice device_;
  VkCommandPool pool_;
  VkCommandBuffer cmd_;
  VkPipelineLayout layout_;
  std::uint32_t max_x_;
  plan::PushConstants pc_;
  std::uint64_t dispatches_ = 0;
};

}  // namespace gpubatch::gpu

#include "gpu/recorder.hpp"

#include <algorithm>

#include "gpu/context.hpp"
#include "gpu/kernels.hpp"
#include "gpu/vk_check.hpp"
#include "plan/encoding.hpp"

namespace gpubatch::gpu {

CommandRecorder::CommandRecorder(detail::GpuContext& ctx, VkCommandPool pool, VkCommandBuffer commands)
    : device_(ctx.device()),
      pool_(pool),
      cmd_(commands),
      layout_(ctx.kernels().layout()),
      max_x_(ctx.limits().maxComputeWorkGroupCount[0]) {}

void CommandRecorder::set_table(const std::array<float, 16>& table) {
  std::copy(table.begin(), table.end(), pc_.table);
}

void CommandRecorder::begin(bool one_time) {
  check_vk(vkResetCommandPool(device_, pool_, 0), "vkResetCommandPool");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = one_time ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0;
  check_vk(vkBeginCommandBuffer(cmd_, &begin), "vkBeginCommandBuffer");
}

void CommandRecorder::end() { check_vk(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer"); }

void CommandRecorder::dispatch(VkPipeline pipeline, const DispatchArgs& args) {
  pc_.segments = args.segments;
  pc_.blocks = args.blocks;
  pc_.scratch = args.scratch;
  pc_.block_count = args.block_count;
  const std::uint32_t groups = plan::ceil_div(args.block_count, std::max(1u, args.blocks_per_workgroup));
  pc_.grid_x = std::min(groups, max_x_);
  pc_.segment_count = args.segment_count;
  pc_.scratch_count = args.scratch_count;
  vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  vkCmdPushConstants(cmd_, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(pc_), &pc_);
  vkCmdDispatch(cmd_, pc_.grid_x, plan::ceil_div(groups, pc_.grid_x), 1);
  ++dispatches_;
}

void CommandRecorder::barrier(VkPipelineStageFlags src_stage, VkAccessFlags src_access, VkPipelineStageFlags dst_stage,
                              VkAccessFlags dst_access) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = src_access;
  b.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd_, src_stage, dst_stage, 0, 1, &b, 0, nullptr, 0, nullptr);
}

void CommandRecorder::start_timestamps(VkQueryPool pool, std::uint32_t count) {
  vkCmdResetQueryPool(cmd_, pool, 0, count);
  timestamp(pool, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, 0);
}

void CommandRecorder::timestamp(VkQueryPool pool, VkPipelineStageFlagBits stage, std::uint32_t query) {
  vkCmdWriteTimestamp(cmd_, stage, pool, query);
}

}  // namespace gpubatch::gpu

#include "gpubatch/device.hpp"

#include <chrono>
#include <string>

#include "gpubatch/error.hpp"

#include "gpu/context.hpp"
#include "gpu/host_memory.hpp"
#include "gpu/vulkan_batch_device.hpp"

namespace gpubatch {

Device::Device(const DeviceOptions& options)
    : context_(detail::GpuContext::create(options)),
      batch_device_(std::make_shared<gpu::VulkanBatchDevice>(context_, options.max_request_bytes, options)),
      batch_timeout_(options.batch_timeout) {}

Device::~Device() = default;
Device::Device(const Device&) = default;
Device& Device::operator=(const Device&) = default;
Device::Device(Device&&) noexcept = default;
Device& Device::operator=(Device&&) noexcept = default;

std::vector<DeviceInfo> Device::available() { return detail::GpuContext::enumerate(); }

const DeviceInfo& Device::info() const { return context_->info(); }

DeviceCounters Device::counters() const {
  auto& c = context_->counters();
  return {c.submissions.load(), c.dispatches.load(), c.uploads.load(), c.downloads.load(),
          c.bytes_up.load(), c.bytes_down.load(), c.pipelines_created.load(),
          c.pipeline_cache_hits.load(), c.copy_submissions.load()};
}

Result Device::run(const Request& request) {
  validate(request);
  const std::size_t bytes = input_bytes(request) + output_bytes(request);
  if (bytes > batch_device_->max_request_bytes())
    throw Error(ErrorCode::request_too_large,
                std::string(to_string(request.op)) + " request of " + std::to_string(bytes) +
                    " bytes exceeds the device's limit of " +
                    std::to_string(batch_device_->max_request_bytes()) + " bytes; split it");
  const Request* one[] = {&request};
  auto batch = batch_device_->submit(one);
  if (!batch->wait_for(batch_timeout_))
    throw Error(ErrorCode::device_lost, std::string(to_string(request.op)) +
                                            " request: the device did not complete it within " +
                                            std::to_string(batch_timeout_.count()) + " ms (watchdog)");
  Result result;
  batch->take_result(0, result);
  return result;
}

HostBuffer Device::allocate_host(std::size_t floats) const {
  // The context new batches run on (recover() may have replaced the one this Device opened).
  auto vulkan = std::dynamic_pointer_cast<gpu::VulkanBatchDevice>(batch_device_);
  return gpu::allocate_host(vulkan ? vulkan->current_context() : context_, floats);
}

std::shared_ptr<detail::BatchDevice> Device::batch_device() const { return batch_device_; }
std::shared_ptr<detail::GpuContext> Device::context() const { return context_; }

}  // namespace gpubatch

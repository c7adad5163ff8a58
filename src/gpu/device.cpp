#include "gpubatch/device.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gpubatch/error.hpp"

#include "gpu/context.hpp"
#include "gpu/device_identity.hpp"
#include "gpu/host_memory.hpp"
#include "gpu/vulkan_batch_device.hpp"

namespace gpubatch {

namespace {
// DeviceOptions::completion_spin, else GPUBATCH_RUN_SPIN_US, else 200 us: long enough for a small
// request's round trip on a discrete GPU (14-60 us on the H200) and its jitter; a request that takes
// longer has spent at most 200 us of its caller's core (which was waiting anyway) before blocking.
std::chrono::microseconds run_spin(const DeviceOptions& options) {
  constexpr std::chrono::microseconds kDefault{200}, kMax{10000};
  std::chrono::microseconds spin = kDefault;
  std::string where = "DeviceOptions::completion_spin";
  if (options.completion_spin) {
    spin = *options.completion_spin;
  } else if (const char* env = std::getenv("GPUBATCH_RUN_SPIN_US"); env && *env) {
    where = std::string("GPUBATCH_RUN_SPIN_US=") + env;
    long long v = -1;
    const char* end = env + std::strlen(env);
    const auto [ptr, ec] = std::from_chars(env, end, v);
    if (ec != std::errc() || ptr != end)
      throw Error(ErrorCode::invalid_config, where + ": not an integer (microseconds)");
    spin = std::chrono::microseconds(v);
  }
  if (spin < std::chrono::microseconds::zero() || spin > kMax)
    throw Error(ErrorCode::invalid_config,
                where + ": must be in [0, " + std::to_string(kMax.count()) + "] microseconds (got " +
                    std::to_string(spin.count()) + ")");
  return spin;
}
}  // namespace

Device::Device(const DeviceOptions& options)
    : identity_(std::make_shared<detail::DeviceIdentity>(options)),
      batch_device_(std::make_shared<gpu::VulkanBatchDevice>(identity_, options.max_request_bytes)),
      batch_timeout_(options.batch_timeout),
      run_spin_(run_spin(options)) {
  detail::check_poll_pause();
}

Device::~Device() = default;
Device::Device(const Device&) = default;
Device& Device::operator=(const Device&) = default;
Device::Device(Device&&) noexcept = default;
Device& Device::operator=(Device&&) noexcept = default;

std::vector<DeviceInfo> Device::available() { return detail::GpuContext::enumerate(); }

const DeviceInfo& Device::info() const { return identity_->info(); }

DeviceCounters Device::counters() const {
  auto& c = identity_->counters();
  return {c.submissions.load(), c.dispatches.load(), c.uploads.load(), c.downloads.load(),
          c.bytes_up.load(), c.bytes_down.load(), c.pipelines_created.load(),
          c.pipeline_cache_hits.load(), c.copy_submissions.load(), c.batch_recordings.load(),
          c.early_results.load()};
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
  // Poll first (detail::poll_until: pause, then yield), then block for what is left of the
  // watchdog's time.
  const auto now = std::chrono::steady_clock::now();
  const auto limit = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(batch_timeout_);
  const bool polled = run_spin_.count() > 0 && detail::poll_until(*batch, std::min(limit, now + run_spin_));
  if (!polled && !batch->wait_for(std::max(limit - std::chrono::steady_clock::now(),
                                           std::chrono::steady_clock::duration::zero()))) {
    const std::string state = batch->pending_state();
    throw Error(ErrorCode::device_lost, std::string(to_string(request.op)) +
                                            " request: the device did not complete it within " +
                                            std::to_string(batch_timeout_.count()) + " ms (watchdog)" +
                                            (state.empty() ? std::string() : "; " + state));
  }
  Result result;
  batch->take_result(0, result);
  return result;
}

HostBuffer Device::allocate_host(std::size_t floats) const {
  // The device as it is now (a recovery may have replaced the one this Device opened).
  return gpu::allocate_host(identity_->context(), floats);
}

HostBuffer Device::import_host(std::span<float> memory, std::size_t floats) const {
  return gpu::import_host(identity_->context(), memory, floats);
}

namespace {
std::vector<std::shared_ptr<detail::GpuContext>> contexts_of(std::span<const Device> devices) {
  std::vector<std::shared_ptr<detail::GpuContext>> contexts;
  contexts.reserve(devices.size());
  for (const Device& d : devices) contexts.push_back(d.context());
  return contexts;
}
}  // namespace

HostBuffer allocate_host(std::span<const Device> devices, std::size_t floats) {
  return gpu::allocate_shared_host(contexts_of(devices), floats);
}

HostBuffer import_host(std::span<const Device> devices, std::span<float> memory, std::size_t floats) {
  return gpu::import_shared_host(contexts_of(devices), memory, floats);
}

std::size_t Device::host_import_alignment() const { return identity_->context()->host_import_alignment(); }

std::shared_ptr<detail::BatchDevice> Device::batch_device() const { return batch_device_; }
std::shared_ptr<detail::GpuContext> Device::context() const { return identity_->context(); }
std::shared_ptr<detail::DeviceIdentity> Device::identity() const { return identity_; }

}  // namespace gpubatch

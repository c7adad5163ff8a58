#include "gpu/device_identity.hpp"

#include "log.hpp"

#include "gpu/fault_injection.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::detail {

DeviceIdentity::DeviceIdentity(DeviceOptions options)
    : options_(std::move(options)), context_(GpuContext::create(options_, counters_)) {
  infos_.push_back(context_->info());
}

std::shared_ptr<GpuContext> DeviceIdentity::context() const {
  std::lock_guard lock(mutex_);
  return context_;
}

const DeviceInfo& DeviceIdentity::info() const {
  std::lock_guard lock(mutex_);
  return infos_.back();  // std::deque::push_back never moves the elements already there
}

bool DeviceIdentity::recover(const std::shared_ptr<GpuContext>& seen) {
  std::lock_guard serial(recover_mutex_);
  if (context() != seen) return true;  // re-created by another caller meanwhile
  bool lost = gpu::FaultInjector::fire(gpu::Fault::device_lost_check);
  if (!lost) {
    try {
      seen->completed_value();  // vkGetSemaphoreCounterValue
    } catch (const Error& e) {
      lost = e.code() == ErrorCode::device_lost;
    }
  }
  if (!lost) return false;  // an injected or transient fault: the device still works
  log::warn("gpubatch: device {} is lost; opening it again", seen->info().name);
  auto fresh = GpuContext::create(options_, counters_);
  {
    std::lock_guard lock(mutex_);
    infos_.push_back(fresh->info());
    context_ = std::move(fresh);
  }
  const std::uint64_t generation = generation_.fetch_add(1, std::memory_order_acq_rel) + 1;
  log::info("gpubatch: device {} re-created ({} times so far)", seen->info().name, generation - 1);
  return true;
}

}  // namespace gpubatch::detail

// VulkanBatchDevice's resident mode: which ResidentRing requests go to, and a new one after a
// loss (DESIGN.md "Resident mode").
#include "log.hpp"

#include "gpu/resident_ring.hpp"
#include "gpu/vulkan_batch_device.hpp"

namespace gpubatch::gpu {

bool VulkanBatchDevice::start_resident(const detail::ResidentSettings& settings) {
  std::lock_guard lock(resident_mutex_);
  if (resident_on_) return true;
  if (resident_losses_ >= kResidentLosses) return false;
  resident_settings_ = settings;
  resident_on_ = true;
  return open_resident_locked();
}

// Under resident_mutex_. False (and resident mode off, said once in the log) when the device
// cannot host a ring.
bool VulkanBatchDevice::open_resident_locked() {
  ResidentOptions options;
  options.idle = resident_settings_.idle;
  options.watchdog = resident_settings_.watchdog;
  try {
    ring_ = ResidentRing::create(current_context(), identity_->options(), options);
    return true;
  } catch (const std::exception& e) {
    log::warn("gpubatch: resident mode is unavailable, requests take the batched path: {}", e.what());
    ring_.reset();
    resident_on_ = false;
    resident_losses_ = kResidentLosses;  // do not try again
    return false;
  }
}

std::unique_ptr<detail::InFlightBatch> VulkanBatchDevice::try_submit_resident(const Request& request) {
  if (!ResidentRing::serves(request, ResidentOptions{}.slot_bytes)) return nullptr;
  std::shared_ptr<ResidentRing> ring;
  {
    std::lock_guard lock(resident_mutex_);
    if (!resident_on_) return nullptr;
    if (ring_ && ring_->lost()) {
      // Its requests fail (their batches hold it until then). A new ring gets fresh memory; the
      // old kernel may still be stuck on its queue, so after a few losses resident mode stops.
      ring_.reset();
      if (++resident_losses_ >= kResidentLosses) {
        resident_on_ = false;
        log::error("gpubatch: the resident ring was lost {} times; resident mode is off, "
                      "requests take the batched path", resident_losses_);
        return nullptr;
      }
      if (!open_resident_locked()) return nullptr;
    }
    ring = ring_;
  }
  if (!ring) return nullptr;
  return ring->try_submit(request);
}

std::shared_ptr<ResidentRing> VulkanBatchDevice::resident_ring() const {
  std::lock_guard lock(resident_mutex_);
  return ring_;
}

}  // namespace gpubatch::gpu

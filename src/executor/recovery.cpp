// Device-lost recovery: after a batch fails with device_lost (submit, wait, or the batch_timeout
// watchdog), the executor asks its device to recover. The device decides whether the underlying
// device really is lost and re-creates it if so; later batches then run on the new one.
#include "log.hpp"

#include "executor/executor_core.hpp"

namespace gpubatch::detail {

void ExecutorCore::recover_if_device_lost(const std::exception_ptr& error) noexcept {
  try {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::device_lost) return;
    } catch (...) {
      return;
    }
    device_->recover();
  } catch (const std::exception& e) {
    log::error("gpubatch executor: recovering {} after a lost device failed: {}",
                  device_->name(), e.what());
  } catch (...) {
    log::error("gpubatch executor: recovering after a lost device failed");
  }
}

}  // namespace gpubatch::detail

// BatchedGpuHandle::run: a batched request whose caller waits by polling its own result.
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <thread>

#include "executor/executor_core.hpp"

namespace gpubatch {
namespace {

// Written once by the completion handler (on an executor thread, or at once when the call is
// refused), then published by `state`; read by the caller after it saw `state` set.
struct SyncWaiter {
  std::atomic<std::uint32_t> state{0};
  Result value;
  std::exception_ptr error;

  void finish() noexcept {
    state.store(1, std::memory_order_release);
    state.notify_one();
  }
  // Polls (pause, then yield) for `spin`, then sleeps on the atomic until it is set.
  void wait(std::chrono::microseconds spin) noexcept {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto pause_until = start + std::chrono::microseconds(5), until = start + spin;
    while (state.load(std::memory_order_acquire) == 0) {
      const auto now = Clock::now();
      if (now >= until) {
        state.wait(0, std::memory_order_acquire);
        continue;
      }
      if (now < pause_until) {
        for (int i = 0; i < 8; ++i) detail::cpu_relax();
      } else {
        std::this_thread::yield();
      }
    }
  }
};

}  // namespace

Result BatchedGpuHandle::run(Request request, const SubmitOptions& options) const {
  // Shared with the handler: the caller may see `state` set and return while the handler is
  // still inside notify_one(), which must not touch a dead stack frame.
  auto waiter = std::make_shared<SyncWaiter>();
  // The handler has no executor of its own, so it runs where the request resolves: it only
  // stores the outcome and wakes this thread (every accepted request resolves exactly once).
  {
    detail::CallerWaitsScope waits;  // an idle strand: this thread submits (post_if_idle)
    call<Result>(std::move(request), options, [waiter](std::exception_ptr e, Result r) {
      waiter->value = std::move(r);
      waiter->error = std::move(e);
      waiter->finish();
    });
  }
  // A lone batch this call submitted itself was completed inside the call (detail::enqueue), with
  // no completion thread woken: then the result is in already.
  waiter->wait(core_ ? core_->caller_spin() : std::chrono::microseconds(0));
  if (waiter->error) std::rethrow_exception(waiter->error);
  return std::move(waiter->value);
}

}  // namespace gpubatch

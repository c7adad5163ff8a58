#pragma once
// Prompt deadlines (DESIGN.md "Deadlines"): a request with a deadline keeps its completion in an
// ExpiryCell, which one party takes: the strand (to submit it, or to fail it itself) or the
// deadline watch (to fail it with deadline_exceeded at its deadline). The watch is a thread of
// its own with a heap of cells by deadline, so a request expires on time even while the strand is
// busy (submitting a large batch: on the H200 a strand packing 1,000,000-float requests let
// deadline errors arrive 65 ms late at p99) or the device is saturated.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpubatch/detail/completion.hpp"

namespace gpubatch::detail {

struct ExpiryCell {
  // The strand takes the cell (to submit the request or resolve it itself); true also when it
  // took it before. False: the watch expired it and resolved the completion.
  bool take() noexcept {
    std::uint8_t expected = kPending;
    return state.compare_exchange_strong(expected, kTaken, std::memory_order_acq_rel) ||
           expected == kTaken;
  }
  // The watch: true when it now owns the completion (the strand had not taken it).
  bool expire() noexcept {
    std::uint8_t expected = kPending;
    return state.compare_exchange_strong(expected, kExpired, std::memory_order_acq_rel);
  }
  bool expired() const noexcept { return state.load(std::memory_order_acquire) == kExpired; }
  bool pending() const noexcept { return state.load(std::memory_order_acquire) == kPending; }

  static constexpr std::uint8_t kPending = 0, kTaken = 1, kExpired = 2;
  std::atomic<std::uint8_t> state{kPending};
  std::chrono::steady_clock::time_point deadline;
  Completion completion;
  std::string what;  // "relu request (256 floats)", for the error message
};

class DeadlineWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // Called on the watch's thread for each cell whose deadline has come (the callee expires it).
  explicit DeadlineWatch(std::function<void(ExpiryCell&)> on_due) : on_due_(std::move(on_due)) {}
  ~DeadlineWatch() { stop(); }
  DeadlineWatch(const DeadlineWatch&) = delete;
  DeadlineWatch& operator=(const DeadlineWatch&) = delete;

  // Any thread. Starts the thread on first use (an executor whose requests have no deadlines
  // has none). Throws std::system_error when no thread can be started (the caller then relies on
  // the strand's own sweeps).
  void add(std::shared_ptr<ExpiryCell> cell) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return;  // shutdown: the strand resolves what is left
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    drop_taken_if_many();
    const bool earliest = heap_.empty() || cell->deadline < heap_.front()->deadline;
    heap_.push_back(std::move(cell));
    std::push_heap(heap_.begin(), heap_.end(), later);
    if (earliest) cv_.notify_one();
  }

  // Asks the thread to end (cells not yet due are dropped: their requests are the strand's to
  // resolve). May be called under the caller's locks; join() waits for the thread.
  void request_stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_one();
  }
  void join() {
    std::lock_guard<std::mutex> lock(join_mutex_);
    if (!thread_.joinable()) return;
    if (thread_.get_id() == std::this_thread::get_id()) thread_.detach();
    else thread_.join();
  }
  void stop() {
    request_stop();
    join();
  }

  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return heap_.size();
  }

 private:
  static bool later(const std::shared_ptr<ExpiryCell>& a, const std::shared_ptr<ExpiryCell>& b) {
    return a->deadline > b->deadline;
  }

  void loop() {
    std::vector<std::shared_ptr<ExpiryCell>> due;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      if (heap_.empty()) {
        cv_.wait(lock);
        continue;
      }
      const auto now = Clock::now();
      if (heap_.front()->deadline > now) {
        cv_.wait_until(lock, heap_.front()->deadline);
        continue;
      }
      while (!heap_.empty() && heap_.front()->deadline <= now) {
        std::pop_heap(heap_.begin(), heap_.end(), later);
        if (heap_.back()->pending()) due.push_back(std::move(heap_.back()));
        heap_.pop_back();
      }
      lock.unlock();
      for (auto& cell : due) on_due_(*cell);
      due.clear();
      lock.lock();
    }
  }

  // Cells the strand took stay in the heap until their deadline; sweep them out once the heap has
  // grown by half since the last sweep (amortised O(1) per addition; bounds the heap at about
  // twice the requests still waiting, whatever their deadlines).
  void drop_taken_if_many() {
    if (++since_sweep_ < std::max<std::size_t>(1024, heap_.size() / 2)) return;
    since_sweep_ = 0;
    std::erase_if(heap_, [](const std::shared_ptr<ExpiryCell>& c) { return !c->pending(); });
    std::make_heap(heap_.begin(), heap_.end(), later);
  }

  std::function<void(ExpiryCell&)> on_due_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<ExpiryCell>> heap_;
  std::size_t since_sweep_ = 0;
  bool stopping_ = false;
  std::mutex join_mutex_;
  std::thread thread_;  // started under mutex_, joined under join_mutex_ after request_stop()
};

}  // namespace gpubatch::detail

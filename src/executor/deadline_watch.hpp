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
  // `on_due` runs on the watch's thread for each cell whose deadline has come (the callee expires
  // it); `on_start` first, once, on that thread (the executor marks the thread as its own).
  explicit DeadlineWatch(std::function<void(ExpiryCell&)> on_due, std::function<void()> on_start = {})
      : state_(std::make_shared<State>()) {
    state_->on_due = std::move(on_due);
    state_->on_start = std::move(on_start);
  }
  ~DeadlineWatch() { stop(); }
  DeadlineWatch(const DeadlineWatch&) = delete;
  DeadlineWatch& operator=(const DeadlineWatch&) = delete;

  // Any thread. Starts the thread on first use (an executor whose requests have no deadlines
  // has none). Throws std::system_error when no thread can be started (the caller then relies on
  // the strand's own sweeps).
  void add(std::shared_ptr<ExpiryCell> cell) {
    State& st = *state_;
    std::unique_lock<std::mutex> lock(st.mutex);
    if (st.stopping.load(std::memory_order_relaxed)) return;  // shutdown: the strand resolves the rest
    if (!st.started) {
      thread_ = std::thread([state = state_] { loop(*state); });  // the thread keeps its state
      st.started = true;
    }
    st.drop_taken_if_many();
    const bool earliest = st.heap.empty() || cell->deadline < st.heap.front()->deadline;
    st.heap.push_back(std::move(cell));
    std::push_heap(st.heap.begin(), st.heap.end(), later);
    if (earliest) st.cv.notify_one();
  }

  // Asks the thread to end (cells not yet due are dropped: their requests are the strand's to
  // resolve); no callback starts after it. May be called under the caller's locks.
  void request_stop() {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->stopping.store(true, std::memory_order_relaxed);
    }
    state_->cv.notify_one();
  }
  // Waits for the thread, after request_stop(). On the watch's own thread (the owner destroyed
  // from a callback) it detaches instead: the thread holds its state and stops at once.
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
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->heap.size();
  }

 private:
  static bool later(const std::shared_ptr<ExpiryCell>& a, const std::shared_ptr<ExpiryCell>& b) {
    return a->deadline > b->deadline;
  }

  struct State {
    std::function<void(ExpiryCell&)> on_due;
    std::function<void()> on_start;
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<std::shared_ptr<ExpiryCell>> heap;  // by deadline, earliest first
    std::size_t since_sweep = 0;
    bool started = false;
    std::atomic<bool> stopping{false};

    // Cells the strand took stay in the heap until their deadline; sweep them out once the heap
    // has grown by half since the last sweep (amortised O(1) per addition; bounds the heap at
    // about twice the requests still waiting, whatever their deadlines).
    void drop_taken_if_many() {
      if (++since_sweep < std::max<std::size_t>(1024, heap.size() / 2)) return;
      since_sweep = 0;
      std::erase_if(heap, [](const std::shared_ptr<ExpiryCell>& c) { return !c->pending(); });
      std::make_heap(heap.begin(), heap.end(), later);
    }
  };

  static void loop(State& st) {
    if (st.on_start) st.on_start();
    std::vector<std::shared_ptr<ExpiryCell>> due;
    std::unique_lock<std::mutex> lock(st.mutex);
    while (!st.stopping.load(std::memory_order_relaxed)) {
      if (st.heap.empty()) {
        st.cv.wait(lock);
        continue;
      }
      const auto now = Clock::now();
      if (st.heap.front()->deadline > now) {
        st.cv.wait_until(lock, st.heap.front()->deadline);
        continue;
      }
      while (!st.heap.empty() && st.heap.front()->deadline <= now) {
        std::pop_heap(st.heap.begin(), st.heap.end(), later);
        if (st.heap.back()->pending()) due.push_back(std::move(st.heap.back()));
        st.heap.pop_back();
      }
      lock.unlock();
      for (auto& cell : due) {
        // A callback may end the owner (its last reference dropped by a handler): no more calls.
        if (st.stopping.load(std::memory_order_acquire)) break;
        st.on_due(*cell);
      }
      due.clear();
      lock.lock();
    }
  }

  std::shared_ptr<State> state_;
  std::mutex join_mutex_;
  std::thread thread_;  // started under state_->mutex, joined under join_mutex_ after request_stop()
};

}  // namespace gpubatch::detail

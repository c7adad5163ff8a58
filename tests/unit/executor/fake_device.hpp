#pragma once
// A BatchDevice for executor tests: runs every request with the CPU reference at submit time and
// completes the batch after an optional delay. It records what it saw (batch sizes, ops, a marker
// per request, how often batches were polled and how often waited for with a timeout) and injects
// faults: throw on submit, throw on wait, pause (no batch completes until resume()), hold (the
// batches with a marked request do not complete until release()).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpubatch/batch_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/ops.hpp"
#include "gpubatch/reference.hpp"

namespace gpubatch::testing {

class FakeDevice : public detail::BatchDevice {
 public:
  struct Options {
    std::chrono::microseconds delay{0};  // completion this long after submit
    std::chrono::nanoseconds delay_per_kib{0};  // and this much more per KiB of input + output
    bool host_cpu = false;  // runs_on_host_cpu(): the executor polls only a lone caller's batch
    std::size_t max_request_bytes = std::size_t{1} << 30;
    bool record_markers = true;  // remember a[0] of each request (NaN when a is empty)
    // Out of memory on submit: a batch of more than this many requests, or one holding a request
    // whose a[0] is oom_marker, fails with out_of_memory (nothing runs).
    std::size_t oom_above_requests = std::numeric_limits<std::size_t>::max();
    std::optional<float> oom_marker;
    std::chrono::nanoseconds gpu_time{-1};  // what each batch's device_time() says (-1: unknown)
    // take_result(i, out, parallel) runs this many parts on `parallel`, each sleeping
    // result_part_sleep (0: takes results alone), and notes the threads that ran them.
    std::size_t result_parts = 0;
    std::chrono::microseconds result_part_sleep{0};
    // split_bytes(): requests of this many bytes and more are offered to submit_split (0: none),
    // which runs them as a batch of one (a split; counted) or, with split_refuses, throws
    // out_of_memory as a device without pinned memory free would.
    std::size_t split_bytes = 0;
    bool split_refuses = false;
  };

  FakeDevice() : FakeDevice(Options{}) {}
  explicit FakeDevice(Options options) : state_(std::make_shared<State>()), options_(options) {
    state_->delay = options.delay;
  }

  std::string name() const override { return "fake device"; }
  bool runs_on_host_cpu() const override { return options_.host_cpu; }
  std::size_t max_request_bytes() const override { return options_.max_request_bytes; }

  std::unique_ptr<detail::InFlightBatch> submit(
      std::span<const Request* const> requests) override {
    std::vector<Result> results(requests.size());
    std::vector<std::optional<std::string>> errors(requests.size());
    std::uint64_t up = 0, down = 0;
    std::vector<Op> ops;
    ops.reserve(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const Request& r = *requests[i];
      up += input_bytes(r);
      down += output_bytes(r);
      ops.push_back(r.op);
      try {
        if (fail_marker_ && !r.a.empty() && r.a[0] == *fail_marker_)
          throw Error(ErrorCode::internal, "fake device: injected fault for one request");
        results[i] = reference::run(r);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
    {  // hold_submits(): the caller (the executor's strand) stays in submit() until released
      std::unique_lock<std::mutex> lock(state_->m);
      ++state_->submits_entered;
      state_->submit_threads.push_back(std::this_thread::get_id());
      state_->cv.notify_all();
      state_->cv.wait(lock, [&] { return !state_->hold_submits; });
    }
    bool oom = requests.size() > options_.oom_above_requests;
    for (const Request* r : requests)
      if (options_.oom_marker && !r->a.empty() && r->a[0] == *options_.oom_marker) oom = true;
    std::unique_lock<std::mutex> lock(state_->m);
    if (oom) {
      ++state_->oom_faults;
      throw Error(ErrorCode::out_of_memory, "fake device: injected out of memory on submit");
    }
    if (state_->fail_submit > 0) {
      --state_->fail_submit;
      ++state_->submit_faults;
      throw Error(state_->fail_submit_code, "fake device: injected fault on submit");
    }
    state_->batch_sizes.push_back(requests.size());
    state_->batch_ops.push_back(ops);
    if (options_.record_markers) {
      for (const Request* r : requests)
        state_->markers.push_back(r->a.empty() ? std::numeric_limits<float>::quiet_NaN() : r->a[0]);
    }
    state_->requests_seen += requests.size();
    state_->totals.uploads += 1;
    state_->totals.downloads += 1;
    state_->totals.bytes_up += up;
    state_->totals.bytes_down += down;
    std::sort(ops.begin(), ops.end());
    state_->totals.dispatches +=
        static_cast<std::uint64_t>(std::unique(ops.begin(), ops.end()) - ops.begin());
    state_->totals.submissions += 1;
    ++state_->inflight;
    state_->max_inflight = std::max(state_->max_inflight, state_->inflight);
    std::optional<ErrorCode> wait_fault;
    if (state_->fail_wait > 0) {
      --state_->fail_wait;
      wait_fault = state_->fail_wait_code;
    }
    const auto ready = std::chrono::steady_clock::now() + state_->delay +
                       options_.delay_per_kib * static_cast<std::int64_t>((up + down) / 1024);
    state_->cv.notify_all();
    auto batch = std::make_unique<Batch>(state_, std::move(results), std::move(errors), ready, wait_fault);
    for (const Request* r : requests)
      if (!r->a.empty()) batch->markers_.push_back(r->a[0]);
    batch->gpu_time_ = options_.gpu_time;
    batch->result_parts_ = options_.result_parts;
    batch->result_part_sleep_ = options_.result_part_sleep;
    return batch;
  }

  std::size_t split_bytes() const override { return options_.split_bytes; }
  std::unique_ptr<detail::InFlightBatch> submit_split(Request& request, detail::ParallelRunner&) override {
    if (options_.split_refuses) throw Error(ErrorCode::out_of_memory, "fake device: no pinned memory for chunks");
    const Request* one[] = {&request};
    auto batch = submit(one);
    std::lock_guard<std::mutex> lock(state_->m);
    ++state_->splits;
    return batch;
  }
  int splits() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->splits;
  }

  detail::TransferTotals transfers() const override {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->totals;
  }

  void recover() override {
    std::lock_guard<std::mutex> lock(state_->m);
    ++state_->recoveries;
  }
  int recoveries() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->recoveries;
  }
  int oom_faults() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->oom_faults;
  }

  // ---- control ----
  void hold_submits() {
    std::lock_guard<std::mutex> lock(state_->m);
    state_->hold_submits = true;
  }
  void release_submits() {
    std::lock_guard<std::mutex> lock(state_->m);
    state_->hold_submits = false;
    state_->cv.notify_all();
  }
  // Waits until n submit() calls have begun (held ones included).
  bool wait_for_submits_entered(std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(30)) const {
    std::unique_lock<std::mutex> lock(state_->m);
    return state_->cv.wait_for(lock, timeout, [&] { return state_->submits_entered >= n; });
  }
  void pause() {
    std::lock_guard<std::mutex> lock(state_->m);
    state_->paused = true;
  }
  void resume() {
    {
      std::lock_guard<std::mutex> lock(state_->m);
      state_->paused = false;
    }
    state_->cv.notify_all();
  }
  // A batch holding a request whose a[0] is `marker` does not complete until release(marker)
  // (other batches complete as usual): one in-flight batch held while the others move.
  void hold(float marker) {
    std::lock_guard<std::mutex> lock(state_->m);
    state_->held.push_back(marker);
  }
  void release(float marker) {
    {
      std::lock_guard<std::mutex> lock(state_->m);
      std::erase(state_->held, marker);
    }
    state_->cv.notify_all();
  }
  void set_delay(std::chrono::microseconds d) {
    std::lock_guard<std::mutex> lock(state_->m);
    state_->delay = d;
  }
  void fail_next_submit(ErrorCode code = ErrorCode::device_lost, int count = 1) {
    std::lock_guard<std::mutex> lock(state_->m);
    state_->fail_submit = count;
    state_->fail_submit_code = code;
  }
  void fail_next_wait(ErrorCode code = ErrorCode::device_lost, int count = 1) {
    std::lock_guard<std::mutex> lock(state_->m);
    state_->fail_wait = count;
    state_->fail_wait_code = code;
  }

  // take_result() throws for requests whose a[0] equals `marker` (set before use).
  void fail_results_with_marker(float marker) { fail_marker_ = marker; }

  // ---- observation ----
  std::vector<std::size_t> batch_sizes() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->batch_sizes;
  }
  std::vector<std::vector<Op>> batch_ops() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->batch_ops;
  }
  std::vector<float> markers() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->markers;
  }
  std::size_t batches() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->batch_sizes.size();
  }
  std::size_t requests_seen() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->requests_seen;
  }
  std::size_t inflight() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->inflight;
  }
  std::size_t max_inflight() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->max_inflight;
  }
  // poll() calls, and wait_for() calls with a positive timeout (blocking waits), on every batch.
  std::uint64_t polls() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->polls;
  }
  std::uint64_t blocking_waits() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->blocking_waits;
  }
  int submit_faults() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->submit_faults;
  }
  // For each take_result that ran parts (Options::result_parts): the runner's width, and how
  // many threads ran its parts.
  std::vector<std::size_t> result_widths() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->result_widths;
  }
  std::vector<std::size_t> result_threads() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->result_threads;
  }
  // Waits until at least n batches were submitted; false on timeout.
  bool wait_for_batches(std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(30)) const {
    std::unique_lock<std::mutex> lock(state_->m);
    return state_->cv.wait_for(lock, timeout, [&] { return state_->batch_sizes.size() >= n; });
  }
  // The thread that made each submit() call so far, in order.
  std::vector<std::thread::id> submit_threads() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->submit_threads;
  }
  // Waits until n batches are in flight (submitted, not yet released by the executor).
  bool wait_for_inflight(std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(30)) const {
    std::unique_lock<std::mutex> lock(state_->m);
    return state_->cv.wait_for(lock, timeout, [&] { return state_->inflight >= n; });
  }

 private:
  struct State {
    mutable std::mutex m;
    std::condition_variable cv;
    bool paused = false;
    std::vector<float> held;  // hold(): batches with a request of such a marker do not complete
    bool hold_submits = false;
    std::size_t submits_entered = 0;
    std::vector<std::thread::id> submit_threads;  // the thread of each submit() call, in order
    std::chrono::microseconds delay{0};
    int fail_submit = 0;
    ErrorCode fail_submit_code = ErrorCode::device_lost;
    int fail_wait = 0;
    ErrorCode fail_wait_code = ErrorCode::device_lost;
    int submit_faults = 0;
    int splits = 0;  // submit_split() calls that gave a batch
    int oom_faults = 0;
    int recoveries = 0;
    std::vector<std::size_t> batch_sizes;
    std::vector<std::vector<Op>> batch_ops;
    std::vector<float> markers;
    std::size_t requests_seen = 0;
    std::size_t inflight = 0;
    std::size_t max_inflight = 0;
    std::vector<std::size_t> result_widths, result_threads;  // per take_result with parts
    std::uint64_t polls = 0;
    std::uint64_t blocking_waits = 0;
    detail::TransferTotals totals;
  };

  class Batch : public detail::InFlightBatch {
   public:
    Batch(std::shared_ptr<State> state, std::vector<Result> results,
          std::vector<std::optional<std::string>> errors,
          std::chrono::steady_clock::time_point ready, std::optional<ErrorCode> wait_fault)
        : state_(std::move(state)),
          results_(std::move(results)),
          errors_(std::move(errors)),
          ready_(ready),
          wait_fault_(wait_fault) {}
    ~Batch() override {
      {
        std::lock_guard<std::mutex> lock(state_->m);
        --state_->inflight;
      }
      state_->cv.notify_all();
    }

    bool wait_for(std::chrono::nanoseconds timeout) override {
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      std::unique_lock<std::mutex> lock(state_->m);
      if (timeout > std::chrono::nanoseconds::zero()) ++state_->blocking_waits;
      for (;;) {
        const auto now = std::chrono::steady_clock::now();
        if (!state_->paused && !held() && now >= ready_) break;
        if (now >= deadline) return false;
        state_->cv.wait_until(lock, state_->paused || held() ? deadline : std::min(deadline, ready_));
      }
      if (wait_fault_) throw Error(*wait_fault_, "fake device: injected fault on wait");
      return true;
    }

    bool poll() override {
      {
        std::lock_guard<std::mutex> lock(state_->m);
        ++state_->polls;
        if (state_->paused || held() || std::chrono::steady_clock::now() < ready_) return false;
      }
      if (wait_fault_) throw Error(*wait_fault_, "fake device: injected fault on wait");
      return true;
    }

    void take_result(std::size_t index, Result& out) override {
      if (errors_.at(index)) throw Error(ErrorCode::internal, *errors_[index]);
      out = std::move(results_.at(index));
    }

    void take_result(std::size_t index, Result& out, detail::ParallelRunner& parallel) override {
      if (result_parts_ != 0) {
        std::mutex m;
        std::vector<std::thread::id> threads;
        const std::function<void(std::size_t)> work = [&](std::size_t) {
          std::this_thread::sleep_for(result_part_sleep_);
          std::lock_guard<std::mutex> lock(m);
          if (std::find(threads.begin(), threads.end(), std::this_thread::get_id()) == threads.end())
            threads.push_back(std::this_thread::get_id());
        };
        parallel.run(result_parts_, work);
        std::lock_guard<std::mutex> lock(state_->m);
        state_->result_widths.push_back(parallel.width());
        state_->result_threads.push_back(threads.size());
      }
      take_result(index, out);
    }

    std::chrono::nanoseconds device_time() const override { return gpu_time_; }
    std::chrono::nanoseconds gpu_time_{-1};
    std::size_t result_parts_ = 0;
    std::chrono::microseconds result_part_sleep_{0};
    std::vector<float> markers_;  // a[0] of its requests, for hold()

   private:
    // Held by hold() (under state_->m).
    bool held() const {
      for (float m : markers_)
        if (std::find(state_->held.begin(), state_->held.end(), m) != state_->held.end()) return true;
      return false;
    }
    std::shared_ptr<State> state_;
    std::vector<Result> results_;
    std::vector<std::optional<std::string>> errors_;
    std::chrono::steady_clock::time_point ready_;
    std::optional<ErrorCode> wait_fault_;
  };

  std::shared_ptr<State> state_;
  Options options_;
  std::optional<float> fail_marker_;
};

// A device whose batch completes `delay` plus `per_kib` a KiB of input and output after its submit
// (the latency target's tests: slow on purpose, so a loaded machine's scheduling noise stays small).
inline std::shared_ptr<FakeDevice> slow_fake_device(std::chrono::microseconds delay, std::chrono::nanoseconds per_kib) {
  FakeDevice::Options o;
  o.delay = delay;
  o.delay_per_kib = per_kib;
  return std::make_shared<FakeDevice>(o);
}

}  // namespace gpubatch::testing

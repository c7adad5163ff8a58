#pragma once
// A few threads that run the parts of a job beside the thread that hands it over: the deadline
// watch's rounds of due requests (DESIGN.md "Scheduling"). Started at the first job; idle, they
// sleep on a condition variable (no CPU). The calling thread takes parts too, so a job never
// waits for a part nobody has claimed, and without threads (none wanted, none could be started,
// or stopped) the caller runs every part itself.
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace gpubatch::detail {

class HelperPool {
 public:
  // `on_start` runs first on each helper thread (the executor marks the thread as its own).
  explicit HelperPool(std::size_t threads, std::function<void()> on_start = {})
      : wanted_(threads), on_start_(std::move(on_start)) {}
  ~HelperPool() { stop(); }
  HelperPool(const HelperPool&) = delete;
  HelperPool& operator=(const HelperPool&) = delete;

  // Runs work(0) ... work(parts - 1), each once, on this thread and the helpers; returns when
  // every part has run. One job at a time: a job handed over while another runs is run alone.
  void run(std::size_t parts, const std::function<void(std::size_t)>& work) {
    Job job{&work, parts};
    bool shared = false;
    if (parts > 1 && wanted_ > 0) {
      std::lock_guard lock(mutex_);
      if (!stop_ && job_ == nullptr && started_locked()) {
        job_ = &job;
        ++generation_;
        shared = true;
      }
    }
    if (shared) cv_.notify_all();
    job.claim_all();
    if (!shared) return;
    std::unique_lock lock(mutex_);
    job_ = nullptr;  // no helper joins it from here; those that did finish their parts
    done_cv_.wait(lock, [&] { return job.active == 0; });
  }

  // Ends the helpers (joined; one that is the calling thread is detached). Idempotent; later jobs
  // run on the caller alone.
  void stop() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      threads.swap(threads_);
    }
    cv_.notify_all();
    for (auto& t : threads) {
      if (t.get_id() == std::this_thread::get_id()) t.detach();
      else t.join();
    }
  }

  std::size_t threads() const {
    std::lock_guard lock(mutex_);
    return threads_.size();
  }

 private:
  struct Job {
    const std::function<void(std::size_t)>* work;
    std::size_t parts;
    std::atomic<std::size_t> next{0};
    std::size_t active = 0;  // helpers inside it (guarded by mutex_)
    void claim_all() {
      for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < parts;) (*work)(i);
    }
  };

  // Under mutex_: the helpers are running (started at the first job); false when none could be.
  bool started_locked() {
    if (!threads_.empty()) return true;
    try {
      for (std::size_t i = 0; i < wanted_; ++i) threads_.emplace_back([this] { loop(); });
    } catch (...) {
    }
    return !threads_.empty();
  }

  void loop() {
    if (on_start_) on_start_();
    std::unique_lock lock(mutex_);
    std::uint64_t seen = 0;
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || (job_ != nullptr && generation_ != seen); });
      if (stop_) return;
      seen = generation_;
      Job* job = job_;
      ++job->active;
      lock.unlock();
      job->claim_all();
      lock.lock();
      if (--job->active == 0) done_cv_.notify_all();
    }
  }

  const std::size_t wanted_;
  const std::function<void()> on_start_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;       // helpers: a job, or stop
  std::condition_variable done_cv_;  // the job's owner: its helpers are out
  Job* job_ = nullptr;               // guarded
  std::uint64_t generation_ = 0;     // guarded: jobs handed over
  bool stop_ = false;                // guarded
  std::vector<std::thread> threads_;  // guarded
};

}  // namespace gpubatch::detail

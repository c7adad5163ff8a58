#pragma once
// The load generators' sender threads are made, and their heaps warmed, before the clock starts.
//
// Why: made after it, 16 senders each made a malloc arena and grew it in small steps at once, every
// step an mmap or mprotect under the process's memory-map lock. perf on the H200 (BENCHMARKS.md,
// twenty-second session, call 10: an open loop at 2 M/s from 16 senders) found the senders 51 % in
// osq_lock and 5 % in rwsem_spin_on_owner over the run's first 15 ms, each nearly a core busy, the
// strand starved and faulting under the same lock: a backlog that took the run's first 35 ms to
// drain, and at 2 M/s in a 1 s run that was the p99. A server's threads have their heaps long
// before its load comes; a generator's should too.
#include <atomic>
#include <cstddef>
#include <latch>
#include <memory>
#include <vector>

namespace gpubatch::bench {

// Grows this thread's malloc arena to about `bytes` in 1 KiB pieces (the size of a 256-float
// request), touching each, then frees them. glibc keeps an arena's heap read-write once made so
// (it gives pages back with madvise, not mprotect), so growing again up to that size later takes
// no write lock on the memory map.
inline void warm_thread_heap(std::size_t bytes) {
  std::vector<std::unique_ptr<char[]>> pieces;
  pieces.reserve(bytes / 1024);
  for (std::size_t i = 0; i < bytes / 1024; ++i) {
    pieces.emplace_back(new char[1024]);
    pieces.back()[0] = static_cast<char>(i);
  }
}

// Room for `n` samples with its pages already faulted in (reserve() alone leaves each page to the
// first push_back into it, while the clock runs).
template <typename T>
void reserve_touched(std::vector<T>& v, std::size_t n) {
  v.resize(n);
  v.clear();
}

// Senders arrive (their sample arrays reserved first) and wait; the main thread waits for all of
// them, reads the clock, then opens the gate.
class StartGate {
 public:
  explicit StartGate(std::ptrdiff_t senders) : ready_(senders) {}
  static constexpr std::size_t kWarmHeapBytes = std::size_t{8} << 20;
  // On a sender's thread: warms its heap, counts it ready, waits for the gate to open.
  void arrive_and_wait() {
    warm_thread_heap(kWarmHeapBytes);
    ready_.count_down();
    open_.wait();
  }
  void wait_ready() { ready_.wait(); }
  void open() { open_.count_down(); }

 private:
  std::latch ready_;
  std::latch open_{1};
};

}  // namespace gpubatch::bench

#pragma once
// CPU copies of a GpuCommandBatch's span data into staging (upload()) and out of readback
// (read(), read_into()), spread over a few threads when they are large: one thread's memcpy into
// write-combined memory runs at ~6 GB/s on the H200, so a 4 MB upload alone costs ~0.7 ms.
// Copies below kParallelBytes stay on the calling thread (a wake-up costs more than they do);
// the threads start on the first large copy and live as long as the owner. split_copy() is the
// splitting alone, over any ParallelRunner: a batch's large results are copied out of readback
// that way over the executor's completion threads (VulkanInFlight::take_result).
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "gpubatch/batch_device.hpp"

namespace gpubatch::gpu {

inline constexpr std::size_t kParallelCopyBytes = std::size_t{1} << 20;  // 1 MiB
inline constexpr std::size_t kMinCopyPartBytes = std::size_t{256} << 10;  // per thread, at least

// memcpy(dst, src, bytes): from kParallelCopyBytes in equal parts (whole cache lines but the
// last, each at least kMinCopyPartBytes) that `parallel`'s threads copy at once; below it, or
// with one thread, on the calling thread. True when it was split.
bool split_copy(void* dst, const void* src, std::size_t bytes, detail::ParallelRunner& parallel);

class ParallelCopy final : public detail::ParallelRunner {
 public:
  static constexpr std::size_t kParallelBytes = kParallelCopyBytes;
  static constexpr std::size_t kMinPartBytes = kMinCopyPartBytes;

  // `threads`: at most this many threads copy at once, the caller's included (0: up to 4, one
  // per hardware thread).
  explicit ParallelCopy(std::size_t threads = 0);
  ~ParallelCopy() override;
  ParallelCopy(const ParallelCopy&) = delete;
  ParallelCopy& operator=(const ParallelCopy&) = delete;

  // memcpy(dst, src, bytes), in equal parts on several threads when it is large. Used by one
  // thread at a time.
  void copy(void* dst, const void* src, std::size_t bytes);
  std::size_t width() const noexcept override { return width_; }
  // ParallelRunner: parts go to whichever thread takes them first, the caller's included.
  void run(std::size_t parts, const std::function<void(std::size_t)>& work) override;
  // Copies that were split (for tests).
  std::uint64_t parallel_copies() const noexcept { return parallel_copies_; }

 private:
  void start();
  void worker();

  std::size_t width_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t)>* work_ = nullptr;  // the job, under mutex_
  std::size_t parts_ = 0;
  std::uint64_t generation_ = 0;
  std::atomic<std::size_t> next_{0};
  std::size_t finished_ = 0, active_ = 0;  // under mutex_
  bool stop_ = false;
  std::uint64_t parallel_copies_ = 0;
};

}  // namespace gpubatch::gpu

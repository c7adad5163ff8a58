#include "gpu/parallel_copy.hpp"

#include <algorithm>
#include <cstring>

namespace gpubatch::gpu {

ParallelCopy::ParallelCopy(std::size_t threads)
    : width_(threads ? threads : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 4)) {}

ParallelCopy::~ParallelCopy() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

bool split_copy(void* dst, const void* src, std::size_t bytes, detail::ParallelRunner& parallel) {
  if (bytes == 0) return false;  // dst or src may be null then
  const std::size_t parts = std::min(parallel.width(), bytes / kMinCopyPartBytes);
  if (bytes < kParallelCopyBytes || parts < 2) {
    std::memcpy(dst, src, bytes);
    return false;
  }
  // Equal parts, each a whole number of cache lines but the last: the parts' size rounded up,
  // so that they cover every byte (rounding bytes / parts down first lost the tail whenever it
  // came out a whole number of cache lines with a remainder: 4 bytes of 2,800,004).
  const std::size_t part = ((bytes + parts - 1) / parts + 63) & ~std::size_t{63};
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  const std::function<void(std::size_t)> work = [&](std::size_t i) {
    const std::size_t begin = std::min(bytes, i * part), end = std::min(bytes, begin + part);
    std::memcpy(d + begin, s + begin, end - begin);
  };
  parallel.run(parts, work);
  return true;
}

void ParallelCopy::copy(void* dst, const void* src, std::size_t bytes) {
  if (split_copy(dst, src, bytes, *this)) ++parallel_copies_;
}

void ParallelCopy::start() {
  if (!threads_.empty()) return;
  try {
    for (std::size_t i = 1; i < width_; ++i) threads_.emplace_back([this] { worker(); });
  } catch (const std::system_error&) {  // no more threads: the ones there (or the caller) do it
  }
}

// Parts go to whichever thread takes them first, the caller included; returns when every part
// is done and no worker still looks at this job.
void ParallelCopy::run(std::size_t parts, const std::function<void(std::size_t)>& work) {
  start();
  {
    std::lock_guard lock(mutex_);
    work_ = &work;
    parts_ = parts;
    finished_ = 0;
    next_.store(0, std::memory_order_relaxed);
    ++generation_;
  }
  wake_.notify_all();
  std::size_t mine = 0;
  for (std::size_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < parts;) {
    work(i);
    ++mine;
  }
  std::unique_lock lock(mutex_);
  finished_ += mine;
  done_.wait(lock, [&] { return finished_ == parts && active_ == 0; });
  work_ = nullptr;
}

void ParallelCopy::worker() {
  std::uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && work_); });
    if (stop_) return;
    seen = generation_;
    const auto* work = work_;
    const std::size_t parts = parts_;
    ++active_;
    lock.unlock();
    std::size_t mine = 0;
    for (std::size_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < parts;) {
      (*work)(i);
      ++mine;
    }
    lock.lock();
    finished_ += mine;
    --active_;
    if (finished_ == parts && active_ == 0) done_.notify_one();
  }
}

}  // namespace gpubatch::gpu

// Level 0's queue in shards (GPUBATCH_QUEUE_SHARDS): which shard a calling thread pushes into,
// and the sums over a level's queues that the strand, the lanes and the statistics read. With
// one shard (the default) every sum is queue_'s own figure.
#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "executor/executor_core.hpp"

namespace gpubatch::detail {

namespace {
// Threads are numbered in the order they first push (into any executor), so that a crowd's
// callers spread evenly over the shards and each keeps to one: its requests stay in order, and
// the tail it claims positions on stays in its core's cache while no other thread shares it.
std::atomic<std::size_t> g_next_thread_number{0};
std::size_t thread_number() noexcept {
  thread_local const std::size_t number = g_next_thread_number.fetch_add(1, std::memory_order_relaxed);
  return number;
}
}  // namespace

std::size_t queue_shards() noexcept {
  const char* v = std::getenv("GPUBATCH_QUEUE_SHARDS");
  if (v == nullptr || *v == 0) return 1;
  const long n = std::strtol(v, nullptr, 10);
  return static_cast<std::size_t>(std::clamp(n, 1L, static_cast<long>(kMaxQueueShards)));
}

BlockingMpscQueue<Pending>& ExecutorCore::push_queue(std::size_t level, std::size_t& shard) noexcept {
  shard = 0;
  if (level != 0) return level_queue(level);
  const auto& shards = queues_of(0);
  if (shards.size() == 1) return queue_;
  shard = thread_number() % shards.size();
  return *shards[shard];
}

std::uint64_t ExecutorCore::level_pushed(std::size_t level) const noexcept {
  std::uint64_t n = 0;
  for (const auto* q : queues_of(level)) n += q->pushed_approx();
  return n;
}

std::uint64_t ExecutorCore::level_popped(std::size_t level) const noexcept {
  std::uint64_t n = 0;
  for (const auto* q : queues_of(level)) n += q->popped_approx();
  return n;
}

std::size_t ExecutorCore::level_size(std::size_t level) const noexcept {
  std::size_t n = 0;
  for (const auto* q : queues_of(level)) n += q->size_approx();
  return n;
}

bool ExecutorCore::level_drained(std::size_t level) const noexcept {
  return std::all_of(queues_of(level).begin(), queues_of(level).end(), [](const auto* q) { return q->drained(); });
}

}  // namespace gpubatch::detail

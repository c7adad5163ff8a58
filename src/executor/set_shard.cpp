// A core per member of a device set, and which of them serves a calling thread (set_shard.hpp).
#include "executor/set_shard.hpp"

#include <array>

#include "executor/executor_core.hpp"

namespace gpubatch::detail {

std::unique_ptr<InFlightBatch> SetShard::submit(std::span<const Request* const> requests) {
  return submit_to_set(set_, requests, inline_runner(), own_);
}

std::unique_ptr<InFlightBatch> SetShard::submit(std::span<const Request* const> requests,
                                                ParallelRunner& parallel) {
  return submit_to_set(set_, requests, parallel, own_);
}

std::string shard_trace_path(const std::string& path, std::size_t k) {
  if (k == 0) return path;
  const std::size_t slash = path.find_last_of('/');
  const std::size_t dot = path.find_last_of('.');
  const std::string tag = ".shard" + std::to_string(k);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + tag;
  return path.substr(0, dot) + tag + path.substr(dot);
}

std::shared_ptr<ExecutorCore> make_executor(std::shared_ptr<BatchDevice> device, BatchConfig config) {
  auto set = std::dynamic_pointer_cast<DeviceSet>(device);
  // Resident mode keeps one core: its persistent kernel runs on member 0 only, and every calling
  // thread should find it (with a core per member, the threads of the other shards would not).
  if (!set || set->size() < 2 || !config.shard_per_device || config.resident) {
    auto core = std::make_shared<ExecutorCore>(std::move(device), std::move(config));
    start_trace_from_environment(*core);
    core->start();
    return core;
  }
  auto lead = std::make_shared<ExecutorCore>(std::make_shared<SetShard>(set, 0), config);
  auto group = std::make_shared<ShardGroup>();
  for (std::size_t k = 1; k < set->size(); ++k)
    group->others.push_back(std::make_shared<ExecutorCore>(std::make_shared<SetShard>(set, k), config));
  lead->lead_shards(group);
  start_trace_from_environment(*lead, 0);
  for (std::size_t k = 1; k < set->size(); ++k) start_trace_from_environment(*group->others[k - 1], k);
  lead->start();
  for (const auto& shard : group->others) shard->start();
  return lead;
}

namespace {

// A thread's shard in the groups it has called into lately: a few entries, replaced in turn (a
// group's address reused by a later group only hands a thread some shard of that group).
struct Assignment {
  const ShardGroup* group = nullptr;
  std::size_t shard = 0;
};
thread_local std::array<Assignment, 4> tl_assignments;
thread_local std::size_t tl_replace = 0;

std::size_t shard_of_this_thread(ShardGroup& group) noexcept {
  for (const Assignment& a : tl_assignments)
    if (a.group == &group) return a.shard % group.size();
  const std::size_t shard = group.next.fetch_add(1, std::memory_order_relaxed) % group.size();
  tl_assignments[tl_replace++ % tl_assignments.size()] = {&group, shard};
  return shard;
}

}  // namespace

// Called by every handle's call (include/gpubatch/executor.hpp). A thread keeps to one shard:
// its requests meet one queue (their order and the lone caller's inline pass as on one core), and
// threads spread over the shards in the order they first call.
const std::shared_ptr<ExecutorCore>& route(const std::shared_ptr<ExecutorCore>& core) noexcept {
  ShardGroup* group = core ? core->shard_group() : nullptr;
  if (group == nullptr) return core;
  const std::size_t shard = shard_of_this_thread(*group);
  return shard == 0 ? core : group->others[shard - 1];
}

}  // namespace gpubatch::detail

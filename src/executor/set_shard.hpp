#pragma once
// One executor core per member of a device set (DESIGN.md "Several devices", "A strand per
// member"). A set behind one core carried no more 256-float requests than one device (two H100s,
// 32 callers: 2.98 and 3.61 M requests/s against 4.05-4.32 on one device), while two processes,
// one per device, carried 6.8-7.4 M together (BENCHMARKS.md, 2026-11-28): one core's queue,
// strand and completion threads are the limit, not the GPUs. So a set gets a core per member, each
// with its own queues, strand, completion threads and lanes, all submitting to the one shared
// DeviceSet (SetShard): placement, re-runs on a lost member, shared HostBuffers and the spread of
// a lone large request stay the set's. A calling thread keeps to one shard (route()).
#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "executor/device_set.hpp"
#include "gpubatch/config.hpp"

namespace gpubatch::detail {

class ExecutorCore;

// Member `own`'s view of a shared DeviceSet: everything is the set's (its core awaits as many
// batches at once as the set has members, and takes the lanes as a set's core does), but the
// batches submitted through it prefer `own` when members are equally busy (DeviceSet::place), and
// it keeps one device's worth of in-flight slots (max_inflight_batches per shard, so the shards
// together keep what one core for the set kept).
class SetShard final : public BatchDevice {
 public:
  SetShard(std::shared_ptr<DeviceSet> set, std::size_t own) : set_(std::move(set)), own_(own) {}

  std::string name() const override { return set_->name(); }
  std::size_t max_request_bytes() const override { return set_->max_request_bytes(); }
  std::unique_ptr<InFlightBatch> submit(std::span<const Request* const> requests) override;
  std::unique_ptr<InFlightBatch> submit(std::span<const Request* const> requests,
                                        ParallelRunner& parallel) override;
  TransferTotals transfers() const override { return set_->transfers(); }
  bool can_run(const Request& request) const override { return set_->can_run(request); }
  std::size_t inflight_multiplier() const override { return set_->inflight_multiplier(); }
  std::size_t slot_multiplier() const override { return 1; }
  bool runs_on_host_cpu() const override { return set_->runs_on_host_cpu(); }
  std::size_t watchdog_periods() const override { return set_->watchdog_periods(); }
  std::vector<DeviceStats> device_stats() const override { return set_->device_stats(); }
  void recover() override { set_->recover(); }
  bool start_resident(const ResidentSettings& settings) override { return set_->start_resident(settings); }
  std::unique_ptr<InFlightBatch> try_submit_resident(const Request& request) override {
    return set_->try_submit_resident(request);
  }

  std::size_t own() const noexcept { return own_; }

 private:
  std::shared_ptr<DeviceSet> set_;
  std::size_t own_;
};

// The shards of one executor. Shard 0 is the executor's own core, which holds this group; the
// others are held here (no cycle: they hold nothing of the group).
struct ShardGroup {
  std::vector<std::shared_ptr<ExecutorCore>> others;  // shards 1 .. n-1
  std::atomic<std::size_t> next{0};                   // the shard the next new calling thread takes
  std::size_t size() const noexcept { return others.size() + 1; }
};

// The executor core for `device` and `config`, started: with a DeviceSet of two or more members
// and config.shard_per_device (and not config.resident), shard 0 of a group of one core per
// member; otherwise one core.
// GPUBATCH_TRACE traces shard k > 0 into the file name with ".shard<k>" before its extension.
std::shared_ptr<ExecutorCore> make_executor(std::shared_ptr<BatchDevice> device, BatchConfig config);

// The trace file of shard `k` for `path` (k = 0: `path` itself).
std::string shard_trace_path(const std::string& path, std::size_t k);

}  // namespace gpubatch::detail

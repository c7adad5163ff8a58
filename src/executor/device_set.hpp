#pragma once
// Several devices behind one executor (DESIGN.md "Several devices"). A DeviceSet is itself a
// BatchDevice: an executor core's strand forms batches as for one device (a core per member by
// default, each through a SetShard, set_shard.hpp), and the set places each batch on the live
// member with the least outstanding work in bytes (input + output bytes of its batches submitted
// and not yet finished; ties: fewest such batches, then a shard's own member or round robin). Placement
// happens per batch at submit time, so an idle member takes the next batch while a busy one works
// through its own: no batch waits on a busy device while another idles.
//
// A member lost (device_lost on submit, on wait, or its attempt outlived batch_timeout) leaves
// placement; the batch it held is submitted once more, whole, on another live member (every
// built-in op and custom kernel is a pure function of its inputs), and recover() is called on the
// lost member, which rejoins placement when that succeeds. Results are only ever taken from the
// attempt that finished. Requests that read or write a HostBuffer of one device run on it
// (BatchDevice::can_run) and are not re-run elsewhere, nor are those of a kernel registered with
// KernelOptions::rerun_on_loss = false; a HostBuffer every member shares (gpubatch::allocate_host
// over the set's devices) is placed and re-run like a vector, and a lone large request from such
// buffers runs in ranges over the idle members (device_set_batch.cpp, SetBatch::spread). Only when
// no member is left does a batch fail with device_lost. This file knows nothing of Vulkan:
// members are BatchDevices.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "gpubatch/batch_device.hpp"

namespace gpubatch::detail {

class DeviceSet final : public BatchDevice, public std::enable_shared_from_this<DeviceSet> {
 public:
  // `members`: at least one, none null (Error(invalid_argument) otherwise). `attempt_timeout`: how
  // long one member may take over a batch before it counts as lost (the executor's batch_timeout).
  DeviceSet(std::vector<std::shared_ptr<BatchDevice>> members, std::chrono::milliseconds attempt_timeout);

  std::string name() const override;
  // The smallest of the members': a request must fit wherever it may be placed or re-run.
  std::size_t max_request_bytes() const override;
  std::unique_ptr<InFlightBatch> submit(std::span<const Request* const> requests) override;
  std::unique_ptr<InFlightBatch> submit(std::span<const Request* const> requests,
                                        ParallelRunner& parallel) override;
  TransferTotals transfers() const override;  // the members' sum
  bool can_run(const Request& request) const override;
  std::size_t inflight_multiplier() const override { return members_.size(); }
  bool runs_on_host_cpu() const override;
  // Two attempts of batch_timeout each, and one more as the margin between them.
  std::size_t watchdog_periods() const override { return 3; }
  std::vector<DeviceStats> device_stats() const override;
  // Tries recover() on every member out of placement (the executor calls it after a batch failed
  // with device_lost: every member was lost). Never throws.
  void recover() override;
  // Resident mode runs on member 0 only (DESIGN.md "Several devices").
  bool start_resident(const ResidentSettings& settings) override;
  std::unique_ptr<InFlightBatch> try_submit_resident(const Request& request) override;

  std::size_t size() const noexcept { return members_.size(); }
  // A member that failed this many recoveries in a row is dropped for good.
  static constexpr int kMaxFailedRecoveries = 3;

  // ---- used by the set's in-flight batches (device_set.cpp) ----
  static constexpr std::size_t kNone = ~std::size_t{0};
  // The live member to place `bytes` on (its outstanding work reserved), or kNone. `avoid` (a
  // member that just lost this batch) is taken only when no other member is live. `prefer` (a
  // shard's own member, set_shard.hpp) wins a tie; without one, ties go round robin.
  std::size_t place(std::size_t bytes, std::size_t avoid = kNone, std::size_t prefer = kNone);
  // Reserves `bytes` on member `m` if it is live (a HostBuffer's owner); false otherwise.
  bool reserve(std::size_t m, std::size_t bytes);
  // A batch reserved on `m` finished or failed: its outstanding work goes.
  void release(std::size_t m, std::size_t bytes) noexcept;
  // A batch was submitted to `m` (`rerun`: for a lost member).
  void note_submitted(std::size_t m, std::size_t requests, std::size_t bytes, bool rerun) noexcept;
  // `m` was found lost: out of placement. True for the caller that took it out (who recovers it).
  bool mark_lost(std::size_t m) noexcept;
  void note_failover(std::size_t m) noexcept;
  // recover() on `m`; it rejoins placement when that returns. Never throws.
  void recover_member(std::size_t m) noexcept;
  BatchDevice& member(std::size_t m) const noexcept { return *members_[m]; }
  // Live members with no batch in hand (a lone large request from HostBuffers is spread over them).
  std::size_t idle_members() const;
  // The input + output bytes from which such a request is spread (0: never). GPUBATCH_SET_SPREAD_BYTES.
  std::size_t spread_bytes() const noexcept { return spread_bytes_; }
  // Every member's can_run() accepts `request` (its HostBuffers, if any, are shared by all).
  bool runs_anywhere(const Request& request) const noexcept;
  // The member whose can_run() accepts `request` (a HostBuffer's owner), or kNone.
  std::size_t owner_of(const Request& request) const noexcept;
  std::chrono::milliseconds attempt_timeout() const noexcept { return attempt_timeout_; }
  std::string member_name(std::size_t m) const;

 private:
  struct State {  // per member, guarded by mutex_
    std::uint64_t inflight_batches = 0, inflight_bytes = 0;
    std::uint64_t batches = 0, requests = 0, bytes = 0;
    std::uint64_t losses = 0, failovers = 0, reruns = 0, recoveries = 0;
    int failed_recoveries = 0;  // in a row
    bool live = true;
    bool dropped = false;
    bool recovering = false;
  };
  const std::vector<std::shared_ptr<BatchDevice>> members_;
  const std::chrono::milliseconds attempt_timeout_;
  const std::size_t spread_bytes_;
  mutable std::mutex mutex_;
  std::vector<State> state_;  // guarded
  std::size_t next_ = 0;      // guarded: where the round robin among equals starts
};

// The set's in-flight batch: the requests placed on members (one part, or one per HostBuffer
// owner plus one for the rest), each re-run once elsewhere when its member is lost
// (src/executor/device_set_batch.cpp). Throws as BatchDevice::submit does.
// `prefer`: the member that wins a tie in placement (a shard's own; DeviceSet::place).
std::unique_ptr<InFlightBatch> submit_to_set(std::shared_ptr<DeviceSet> set,
                                             std::span<const Request* const> requests,
                                             ParallelRunner& parallel, std::size_t prefer = DeviceSet::kNone);

}  // namespace gpubatch::detail

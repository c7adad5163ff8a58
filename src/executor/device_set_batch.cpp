// A device set's in-flight batch: its requests split into parts (normally one: the whole batch;
// requests that use a HostBuffer go to the member that allocated it), each part placed on a
// member and, when that member is lost, submitted once more, whole, on another live member. The
// executor sees one InFlightBatch; take_result reads the part's finished attempt only, so no
// request's result can come from two runs.
#include <algorithm>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "log.hpp"

#include "executor/device_set.hpp"
#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/host_buffer.hpp"
#include "gpubatch/op_table.hpp"

namespace gpubatch::detail {

namespace {

using Clock = std::chrono::steady_clock;

bool is_device_lost(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return x.code() == ErrorCode::device_lost;
  } catch (...) {
    return false;
  }
}

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return std::string(x.message());
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

// False for a request of a kernel registered with KernelOptions::rerun_on_loss = false (alone or
// as a step of a chain), and for one whose result lands in a HostBuffer it also reads: a lost
// attempt may have written part of it, so a re-run would read its own partial results.
bool may_rerun(const Request& r) {
  if (r.host_result && (r.host_result == r.host_a || r.host_result == r.host_b)) return false;
  if (r.op == Op::custom) return !r.kernel || r.kernel->rerun_on_loss;
  if (r.op != Op::chain || !r.chain) return true;
  for (const ChainStep& step : r.chain->steps())
    if (step.kernel && !step.kernel->rerun_on_loss) return false;
  return true;
}

std::exception_ptr lost(const std::string& message) {
  return std::make_exception_ptr(Error(ErrorCode::device_lost, message));
}

struct Part {
  std::vector<const Request*> requests;  // the same requests (what members are given)
  std::size_t bytes = 0;                 // their input + output bytes
  std::size_t owner = DeviceSet::kNone;  // HostBuffer requests: the only member they may run on
  bool may_rerun = true;                 // false: a kernel of it opted out, or a result into its input
  std::size_t member = DeviceSet::kNone; // where the current attempt runs
  bool reserved = false;                 // `bytes` counted as outstanding on `member`
  bool rerun = false;                    // the current attempt is the re-run
  bool done = false;
  std::unique_ptr<InFlightBatch> inflight;
  Clock::time_point started{};
  std::exception_ptr error;  // failed as a whole: each of its requests fails with this
};

class SetBatch final : public InFlightBatch {
 public:
  SetBatch(std::shared_ptr<DeviceSet> set, std::span<const Request* const> requests, std::size_t prefer)
      : set_(std::move(set)), prefer_(prefer) {
    split(requests);
  }
  ~SetBatch() override {
    for (Part& p : parts_) unreserve(p);
  }

  // Places and submits every part. Throws (nothing runs then) when the batch is one part and it
  // cannot be submitted anywhere; a part of several that cannot fails on its own.
  void start(ParallelRunner& parallel) {
    for (Part& p : parts_) launch(p, parallel);
    if (!parts_.empty() && std::all_of(parts_.begin(), parts_.end(), [](const Part& p) { return p.error != nullptr; }))
      std::rethrow_exception(parts_.front().error);
  }

  bool wait_for(std::chrono::nanoseconds timeout) override { return advance(timeout, false); }
  bool poll() override { return advance(std::chrono::nanoseconds(0), true); }

  void take_result(std::size_t index, Result& out) override { take_result(index, out, inline_runner()); }
  void take_result(std::size_t index, Result& out, ParallelRunner& parallel) override {
    if (!pieces_.empty()) {  // one request in ranges: its results are in its buffer once every range is
      for (Part& piece : parts_) {
        if (piece.error) std::rethrow_exception(piece.error);
        piece.inflight->take_result(0, out, parallel);
      }
      out.values.clear();
      return;
    }
    Part& p = parts_.size() == 1 ? parts_.front() : parts_[part_of_.at(index)];
    if (p.error) std::rethrow_exception(p.error);
    p.inflight->take_result(parts_.size() == 1 ? index : local_of_[index], out, parallel);
  }

  std::chrono::nanoseconds device_time() const override {
    if (parts_.size() != 1 || !parts_.front().inflight) return std::chrono::nanoseconds(-1);
    return parts_.front().inflight->device_time();
  }

 private:
  void split(std::span<const Request* const> requests);
  bool spread(const Request& r);
  // `avoid`: the member that lost the part (a re-run goes elsewhere when any other is live).
  void launch(Part& p, ParallelRunner& parallel, std::size_t avoid = DeviceSet::kNone);
  bool try_member(Part& p, std::size_t m, ParallelRunner& parallel, std::vector<std::size_t>& lost_now);
  bool advance(std::chrono::nanoseconds timeout, bool polling);
  bool settle(Part& p, Clock::time_point until, bool polling);
  void on_lost(Part& p, std::exception_ptr error);
  void unreserve(Part& p) noexcept {
    if (!p.reserved) return;
    set_->release(p.member, p.bytes);
    p.reserved = false;
  }

  std::shared_ptr<DeviceSet> set_;
  const std::size_t prefer_;  // wins ties in placement (a shard's own member), or kNone
  std::vector<Part> parts_;
  std::vector<std::uint32_t> part_of_, local_of_;  // by request index, with several parts
  std::vector<Request> pieces_;  // a lone request's ranges (spread), one part each; reserved up front
};

// A request that can be cut into ranges of its HostBuffers: an element-wise op of the table (relu
// ... clamp; add ... lerp with b in a HostBuffer too), its input and result all in HostBuffers of
// one length.
bool spreadable(const Request& r) {
  if (!r.host_a || !r.host_result || !r.b.empty() || !r.inputs.empty()) return false;
  if (static_cast<std::size_t>(r.op) >= kOpCount) return false;
  const OpInfo& info = op_info(r.op);
  if (info.kind != OpKind::ew || (info.arity == 2) != static_cast<bool>(r.host_b)) return false;
  const std::size_t n = r.host_a->floats;
  return r.host_result->floats == n && (!r.host_b || r.host_b->floats == n);
}

// A lone large request from HostBuffers on a set whose members are idle runs in ranges, one per
// idle member, so that every device's bus carries part of it (a HostBuffer every member shares:
// gpubatch::allocate_host over the set's devices). Each range is a part of its own: placed,
// re-run on a loss and counted per member as any part is. GPUBATCH_SET_SPREAD_BYTES (input +
// output bytes, or never) sets the line, 4 MiB by default (a 524,288-float relu).
bool SetBatch::spread(const Request& r) {
  const std::size_t line = set_->spread_bytes();
  if (line == 0 || input_bytes(r) + output_bytes(r) < line || !spreadable(r) || !set_->runs_anywhere(r)) return false;
  const std::size_t k = set_->idle_members();
  if (k < 2) return false;
  constexpr std::size_t kAlign = 1024;  // floats: every range starts 4 KiB into the buffers
  const std::size_t n = r.host_a->floats;
  const std::size_t per = (n / k + kAlign - 1) / kAlign * kAlign;
  if (per == 0 || per >= n) return false;
  const auto range = [](const std::shared_ptr<detail::HostMemory>& m, std::size_t first, std::size_t count) {
    return m ? std::make_shared<detail::HostMemoryView>(m, first, count) : std::shared_ptr<detail::HostMemory>();
  };
  pieces_.reserve(k);  // parts point into it
  for (std::size_t first = 0; first < n; first += per) {
    const std::size_t count = std::min(per, n - first);
    Request& piece = pieces_.emplace_back(r);
    piece.host_a = range(r.host_a, first, count);
    piece.host_b = range(r.host_b, first, count);
    piece.host_result = range(r.host_result, first, count);
    Part& p = parts_.emplace_back();
    p.requests.push_back(&piece);
    p.bytes = input_bytes(piece) + output_bytes(piece);
    p.may_rerun = may_rerun(r);  // the whole request's buffers: a range of its own input aliases as it does
  }
  return true;
}

// One part for the requests any member may run (HostBuffers every member has imported too:
// gpubatch::allocate_host over the set's devices); one per HostBuffer owner, and apart the
// requests of kernels that opted out of re-runs. The common batch (no HostBuffer) is one part
// and costs one pass over its requests.
void SetBatch::split(std::span<const Request* const> requests) {
  if (requests.size() == 1 && spread(*requests.front())) return;
  const auto uses_host = [&](const Request* r) { return uses_host_buffers(*r) && !set_->runs_anywhere(*r); };
  const auto plain = [&](const Request* r) { return !uses_host(r) && may_rerun(*r); };
  if (std::all_of(requests.begin(), requests.end(), plain)) {
    Part& p = parts_.emplace_back();
    p.requests.assign(requests.begin(), requests.end());
    for (const Request* r : requests) p.bytes += input_bytes(*r) + output_bytes(*r);
    return;
  }
  part_of_.resize(requests.size());
  local_of_.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request& r = *requests[i];
    // A HostBuffer no member owns runs on member 0, which reports it (invalid_argument) as it
    // would alone.
    std::size_t own = DeviceSet::kNone;
    if (uses_host(&r) && (own = set_->owner_of(r)) == DeviceSet::kNone) own = 0;
    const bool rerun = may_rerun(r);
    std::size_t k = 0;
    while (k < parts_.size() && (parts_[k].owner != own || parts_[k].may_rerun != rerun)) ++k;
    if (k == parts_.size()) {
      Part& added = parts_.emplace_back();
      added.owner = own;
      added.may_rerun = rerun;
    }
    Part& p = parts_[k];
    part_of_[i] = static_cast<std::uint32_t>(k);
    local_of_[i] = static_cast<std::uint32_t>(p.requests.size());
    p.requests.push_back(&r);
    p.bytes += input_bytes(r) + output_bytes(r);
  }
}

// Submits `p` to its owner, or to the live member with the least outstanding work, trying the
// next one when a member turns out lost on submit (nothing ran there). Members lost here are
// recovered after the part is placed, so that the batch does not wait for a recovery.
void SetBatch::launch(Part& p, ParallelRunner& parallel, std::size_t avoid) {
  std::vector<std::size_t> lost_now;
  for (std::size_t tries = 0; tries <= 2 * set_->size() && !p.error; ++tries) {
    std::size_t m = p.owner;
    if (m != DeviceSet::kNone) {
      if (!set_->reserve(m, p.bytes)) {
        p.error = lost(std::to_string(p.requests.size()) + " requests use HostBuffers of " +
                       set_->member_name(m) + ", which is lost; they cannot run on another device");
        break;
      }
    } else if ((m = set_->place(p.bytes, avoid, prefer_)) == DeviceSet::kNone) {
      if (!lost_now.empty()) {  // every member failed on this submit: recover them, try again
        for (std::size_t l : lost_now) set_->recover_member(l);
        lost_now.clear();
        continue;
      }
      p.error = lost("every device of the set is lost (" + set_->name() + ")");
      break;
    }
    p.member = m;
    p.reserved = true;
    if (try_member(p, m, parallel, lost_now)) break;
  }
  if (!p.inflight && !p.error) p.error = lost("every device of the set was lost on submit (" + set_->name() + ")");
  for (std::size_t m : lost_now) set_->recover_member(m);
}

// True when `m` took the part (or the part failed for good); false: try another member.
bool SetBatch::try_member(Part& p, std::size_t m, ParallelRunner& parallel,
                          std::vector<std::size_t>& lost_now) {
  try {
    p.inflight = set_->member(m).submit(p.requests, parallel);
    if (!p.inflight) throw Error(ErrorCode::internal, set_->member_name(m) + " returned no batch");
    p.started = Clock::now();
    set_->note_submitted(m, p.requests.size(), p.bytes, p.rerun);
    return true;
  } catch (...) {
    std::exception_ptr e = std::current_exception();
    unreserve(p);
    if (!is_device_lost(e)) {
      // Out of memory and the like: the executor splits a batch of one part (out_of_memory);
      // a part of several fails alone.
      if (parts_.size() == 1) throw;
      p.error = e;
      return true;
    }
    log::warn("gpubatch device set: {} lost on submit: {}", set_->member_name(m), message_of(e));
    if (set_->mark_lost(m)) lost_now.push_back(m);
    if (p.owner != DeviceSet::kNone) {
      p.error = lost(set_->member_name(m) + ", which owns the requests' HostBuffers, was lost: " +
                     message_of(e));
      return true;
    }
    return false;
  }
}

bool SetBatch::advance(std::chrono::nanoseconds timeout, bool polling) {
  const auto until = Clock::now() + timeout;
  for (Part& p : parts_)
    if (!settle(p, until, polling)) return false;
  // Every part finished or failed. All failed: the batch failed as a whole.
  if (!parts_.empty() && std::all_of(parts_.begin(), parts_.end(), [](const Part& p) { return p.error != nullptr; }))
    std::rethrow_exception(parts_.front().error);
  return true;
}

// True once `p` has finished or failed for good; false when `until` came first.
bool SetBatch::settle(Part& p, Clock::time_point until, bool polling) {
  while (!p.done && !p.error) {
    const auto limit = p.started + std::chrono::duration_cast<Clock::duration>(set_->attempt_timeout());
    bool finished = false;
    try {
      if (polling) {
        finished = p.inflight->poll();
      } else {
        const auto wait = std::max<Clock::duration>(Clock::duration::zero(), std::min(until, limit) - Clock::now());
        finished = p.inflight->wait_for(wait);
      }
    } catch (...) {
      std::exception_ptr e = std::current_exception();
      if (is_device_lost(e)) {
        on_lost(p, std::move(e));
      } else {
        unreserve(p);
        p.error = std::move(e);
      }
      continue;
    }
    if (finished) {
      p.done = true;
      unreserve(p);
      break;
    }
    const auto now = Clock::now();
    if (now >= limit) {
      on_lost(p, lost(set_->member_name(p.member) + ": a batch of " + std::to_string(p.requests.size()) +
                      " requests did not complete within " +
                      std::to_string(set_->attempt_timeout().count()) + " ms"));
      continue;
    }
    if (now >= until) return false;
  }
  return true;
}

// The part's member was lost while it ran the part: re-run the part once on another live member
// (HostBuffer parts and re-runs are not re-run), then recover the lost member.
void SetBatch::on_lost(Part& p, std::exception_ptr error) {
  const std::size_t m = p.member;
  unreserve(p);
  const bool mine = set_->mark_lost(m);
  log::warn("gpubatch device set: {} lost with a batch of {} requests in flight: {}",
               set_->member_name(m), p.requests.size(), message_of(error));
  // The lost attempt is never read again; a Vulkan batch that did not finish keeps its memory
  // out of circulation until its device is destroyed.
  p.inflight.reset();
  if (p.owner != DeviceSet::kNone || p.rerun || !p.may_rerun) {
    p.error = p.rerun ? lost("the batch was lost on two devices; last on " + set_->member_name(m) + ": " +
                             message_of(error))
              : p.owner != DeviceSet::kNone
                  ? lost(set_->member_name(m) + ", which owns the requests' HostBuffers, was lost: " +
                         message_of(error))
                  : lost(set_->member_name(m) + " was lost and the requests may not run again (a kernel that "
                         "opted out, KernelOptions::rerun_on_loss = false, or a result delivered into its own "
                         "input's HostBuffer): " + message_of(error));
  } else {
    set_->note_failover(m);
    p.rerun = true;
    try {
      launch(p, inline_runner(), m);  // a completion thread: no strand helpers here
    } catch (...) {
      p.error = std::current_exception();
    }
  }
  if (mine) set_->recover_member(m);
}

}  // namespace

std::unique_ptr<InFlightBatch> submit_to_set(std::shared_ptr<DeviceSet> set,
                                             std::span<const Request* const> requests,
                                             ParallelRunner& parallel, std::size_t prefer) {
  auto batch = std::make_unique<SetBatch>(std::move(set), requests, prefer);
  batch->start(parallel);
  return batch;
}

}  // namespace gpubatch::detail

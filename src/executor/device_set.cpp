// DeviceSet: members, placement by outstanding bytes, loss and recovery bookkeeping. The batches
// themselves (parts, re-runs) are in device_set_batch.cpp.
#include "executor/device_set.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <exception>
#include <tuple>
#include <utility>

#include "log.hpp"

#include "gpubatch/error.hpp"

namespace gpubatch::detail {

namespace {
// GPUBATCH_SET_SPREAD_BYTES: bytes (input + output), or "never"; 4 MiB when unset. A value that
// is not a number is an invalid_config error naming the variable. The line: a lone caller's
// request of 4 MiB (524,288-float relu) took 80-82 us spread over two H100s against 98-101 whole,
// and 8 MiB 150-175 against 206-242 (BENCHMARKS.md, eighth session of 2026-11-27, call 11).
std::size_t spread_bytes_from_env() {
  constexpr std::size_t kDefault = std::size_t{4} << 20;
  const char* v = std::getenv("GPUBATCH_SET_SPREAD_BYTES");
  if (v == nullptr || *v == 0) return kDefault;
  if (std::string_view(v) == "never") return 0;
  std::size_t bytes = 0;
  const char* end = v + std::strlen(v);
  const auto [ptr, ec] = std::from_chars(v, end, bytes);
  if (ec != std::errc() || ptr != end || bytes == 0)
    throw Error(ErrorCode::invalid_config, std::string("GPUBATCH_SET_SPREAD_BYTES=") + v +
                                               ": must be a positive number of bytes or \"never\"");
  return bytes;
}

std::vector<std::shared_ptr<BatchDevice>> checked(std::vector<std::shared_ptr<BatchDevice>> members) {
  if (members.empty()) throw Error(ErrorCode::invalid_argument, "device set: no devices");
  for (const auto& m : members)
    if (!m) throw Error(ErrorCode::invalid_argument, "device set: a device is null");
  return members;
}
}  // namespace

DeviceSet::DeviceSet(std::vector<std::shared_ptr<BatchDevice>> members,
                     std::chrono::milliseconds attempt_timeout)
    : members_(checked(std::move(members))),
      attempt_timeout_(attempt_timeout),
      spread_bytes_(spread_bytes_from_env()),
      state_(members_.size()) {}

std::string DeviceSet::name() const {
  std::string s = "device set [";
  for (std::size_t i = 0; i < members_.size(); ++i)
    s += (i ? ", " : "") + std::to_string(i) + ": " + members_[i]->name();
  return s + "]";
}

std::string DeviceSet::member_name(std::size_t m) const {
  return "device " + std::to_string(m) + " (" + members_[m]->name() + ")";
}

std::size_t DeviceSet::max_request_bytes() const {
  std::size_t least = members_.front()->max_request_bytes();
  for (const auto& m : members_) least = std::min(least, m->max_request_bytes());
  return least;
}

std::unique_ptr<InFlightBatch> DeviceSet::submit(std::span<const Request* const> requests) {
  return submit_to_set(shared_from_this(), requests, inline_runner());
}

std::unique_ptr<InFlightBatch> DeviceSet::submit(std::span<const Request* const> requests,
                                                 ParallelRunner& parallel) {
  return submit_to_set(shared_from_this(), requests, parallel);
}

TransferTotals DeviceSet::transfers() const {
  TransferTotals sum;
  for (const auto& m : members_) {
    const TransferTotals t = m->transfers();
    sum.uploads += t.uploads;
    sum.downloads += t.downloads;
    sum.bytes_up += t.bytes_up;
    sum.bytes_down += t.bytes_down;
    sum.dispatches += t.dispatches;
    sum.submissions += t.submissions;
  }
  return sum;
}

bool DeviceSet::can_run(const Request& request) const {
  if (!uses_host_buffers(request)) return true;
  return owner_of(request) != kNone;
}

std::size_t DeviceSet::owner_of(const Request& request) const noexcept {
  for (std::size_t m = 0; m < members_.size(); ++m) {
    try {
      if (members_[m]->can_run(request)) return m;
    } catch (...) {
    }
  }
  return kNone;
}

std::size_t DeviceSet::idle_members() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<std::size_t>(
      std::count_if(state_.begin(), state_.end(), [](const State& s) { return s.live && s.inflight_batches == 0; }));
}

bool DeviceSet::runs_anywhere(const Request& request) const noexcept {
  for (const auto& m : members_) {
    try {
      if (!m->can_run(request)) return false;
    } catch (...) {
      return false;
    }
  }
  return true;
}

// Least outstanding bytes, then fewest outstanding batches, then the first at or after next_ (a
// round robin among equals, so that an idle set spreads lone requests over its members).
std::size_t DeviceSet::place(std::size_t bytes, std::size_t avoid, std::size_t prefer) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::size_t n = state_.size();
  const std::size_t first = prefer < n ? prefer : next_;  // the first of equals wins
  std::size_t best = kNone;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t m = (first + k) % n;
    const State& s = state_[m];
    if (!s.live || m == avoid) continue;
    if (best == kNone || std::tie(s.inflight_bytes, s.inflight_batches) <
                             std::tie(state_[best].inflight_bytes, state_[best].inflight_batches))
      best = m;
  }
  if (best == kNone && avoid != kNone && avoid < n && state_[avoid].live) best = avoid;  // the only one
  if (best == kNone) return kNone;
  state_[best].inflight_bytes += bytes;
  ++state_[best].inflight_batches;
  if (prefer >= n) next_ = (best + 1) % n;
  return best;
}

bool DeviceSet::reserve(std::size_t m, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!state_[m].live) return false;
  state_[m].inflight_bytes += bytes;
  ++state_[m].inflight_batches;
  return true;
}

void DeviceSet::release(std::size_t m, std::size_t bytes) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  State& s = state_[m];
  s.inflight_bytes -= std::min<std::uint64_t>(s.inflight_bytes, bytes);
  if (s.inflight_batches) --s.inflight_batches;
}

void DeviceSet::note_submitted(std::size_t m, std::size_t requests, std::size_t bytes, bool rerun) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  State& s = state_[m];
  ++s.batches;
  s.requests += requests;
  s.bytes += bytes;
  if (rerun) ++s.reruns;
}

void DeviceSet::note_failover(std::size_t m) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  ++state_[m].failovers;
}

bool DeviceSet::mark_lost(std::size_t m) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  State& s = state_[m];
  if (!s.live || s.recovering) return false;
  s.live = false;
  s.recovering = true;
  ++s.losses;
  return true;
}

void DeviceSet::recover_member(std::size_t m) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    State& s = state_[m];
    if (s.dropped || s.live) return;
    s.recovering = true;  // also when set's recover() retries one whose recovery failed
  }
  bool ok = false;
  try {
    members_[m]->recover();
    ok = true;
  } catch (const std::exception& e) {
    log::error("gpubatch device set: recovering {} failed: {}", member_name(m), e.what());
  } catch (...) {
    log::error("gpubatch device set: recovering {} failed", member_name(m));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  State& s = state_[m];
  s.recovering = false;
  if (ok) {
    s.live = true;
    s.failed_recoveries = 0;
    ++s.recoveries;
    log::warn("gpubatch device set: {} was lost and is back in placement", member_name(m));
  } else if (++s.failed_recoveries >= kMaxFailedRecoveries) {
    s.dropped = true;
    log::error("gpubatch device set: {} dropped after {} failed recoveries", member_name(m),
                  s.failed_recoveries);
  }
}

// Members out of placement get another recovery; live ones the plain recover() (cheap when
// nothing is lost), which is what a lost resident kernel on member 0 needs (the set never saw
// that loss: resident requests do not go through it).
void DeviceSet::recover() {
  for (std::size_t m = 0; m < members_.size(); ++m) {
    bool live = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (state_[m].dropped || state_[m].recovering) continue;
      live = state_[m].live;
    }
    if (!live) {
      recover_member(m);
      continue;
    }
    try {
      members_[m]->recover();
    } catch (const std::exception& e) {
      log::error("gpubatch device set: recovering {} failed: {}", member_name(m), e.what());
    } catch (...) {
    }
  }
}

std::vector<DeviceStats> DeviceSet::device_stats() const {
  std::vector<DeviceStats> out(members_.size());
  for (std::size_t m = 0; m < members_.size(); ++m) {
    DeviceStats& d = out[m];
    d.name = members_[m]->name();
    try {
      const TransferTotals t = members_[m]->transfers();
      d.transfers = {t.uploads, t.downloads, t.bytes_up, t.bytes_down, t.dispatches, t.submissions};
    } catch (...) {
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::size_t m = 0; m < members_.size(); ++m) {
    const State& s = state_[m];
    DeviceStats& d = out[m];
    d.batches = s.batches;
    d.requests = s.requests;
    d.bytes = s.bytes;
    d.inflight_batches = s.inflight_batches;
    d.inflight_bytes = s.inflight_bytes;
    d.losses = s.losses;
    d.failovers = s.failovers;
    d.reruns = s.reruns;
    d.recoveries = s.recoveries;
    d.live = s.live;
  }
  return out;
}

bool DeviceSet::start_resident(const ResidentSettings& settings) {
  return members_.front()->start_resident(settings);
}

std::unique_ptr<InFlightBatch> DeviceSet::try_submit_resident(const Request& request) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!state_.front().live) return nullptr;  // batched instead, on the live members
  }
  return members_.front()->try_submit_resident(request);
}

// Any member on the host's cores (lavapipe opened twice, in tests): polling would compete with it.
bool DeviceSet::runs_on_host_cpu() const {
  for (const auto& m : members_)
    if (m->runs_on_host_cpu()) return true;
  return false;
}

}  // namespace gpubatch::detail

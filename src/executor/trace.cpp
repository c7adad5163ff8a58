#include "executor/trace.hpp"

#include "log.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "gpubatch/error.hpp"

namespace gpubatch::detail {
namespace {

// Thread lanes of the one process the trace shows.
constexpr int kStrandTid = 1;
constexpr int kAsyncTid = 2;
constexpr int kRunsTid = 3;
constexpr int kWatchTid = 4;

std::string metadata(int tid, const char* name) {
  return std::string(R"({"ph":"M","name":"thread_name","pid":1,"tid":)") + std::to_string(tid) +
         R"(,"args":{"name":")" + name + R"("}})";
}

}  // namespace

void TraceRecorder::start(const std::filesystem::path& path, std::uint32_t sample_every) {
  {
    std::ofstream probe(path, std::ios::trunc);  // fail now, not at the end of a long run
    if (!probe)
      throw Error(ErrorCode::invalid_config, "trace: cannot create '" + path.string() + "'");
  }
  std::lock_guard lock(mutex_);
  path_ = path;
  origin_ = Clock::now();
  chunks_.clear();
  count_ = 0;
  dropped_batches_ = 0;
  sample_every_.store(sample_every == 0 ? 1 : sample_every, std::memory_order_relaxed);
  on_.store(true, std::memory_order_relaxed);
}

bool TraceRecorder::stop() {
  std::vector<std::string> chunks;
  std::filesystem::path path;
  std::uint64_t dropped;
  {
    std::lock_guard lock(mutex_);
    if (!on_.exchange(false, std::memory_order_relaxed)) return false;
    chunks.swap(chunks_);
    path = path_;
    dropped = dropped_batches_;
    count_ = 0;
  }
  std::ofstream out(path, std::ios::trunc);
  out << R"({"displayTimeUnit":"ns","otherData":{"producer":"gpubatch","dropped_batches":)" << dropped
      << R"(},"traceEvents":[)" << metadata(kStrandTid, "strand: formation and submit") << ','
      << metadata(kAsyncTid, "batches and requests (async)") << ',' << metadata(kRunsTid, "strand runs")
      << ',' << metadata(kWatchTid, "deadline watch: expiry rounds");
  for (const std::string& c : chunks) out << c;  // each event brings its own leading comma
  out << "]}\n";
  out.flush();
  if (!out) {
    log::warn("gpubatch: could not write the trace to {}", path.string());
    return false;
  }
  return true;
}

std::string& TraceRecorder::room_for(std::size_t bytes) {
  if (chunks_.empty() || chunks_.back().size() + bytes > chunks_.back().capacity()) {
    chunks_.emplace_back().reserve(std::max(kChunkBytes, bytes));
  }
  return chunks_.back();
}

double TraceRecorder::us(Clock::time_point t) const noexcept {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void TraceRecorder::async_span(const char* name, std::uint64_t id, Clock::time_point begin,
                               Clock::time_point end, const std::string& args) {
  char buf[256];
  for (const char ph : {'b', 'e'}) {
    std::snprintf(buf, sizeof buf,
                  R"(,{"ph":"%c","cat":"%s","name":"%s","id":%llu,"pid":1,"tid":%d,"ts":%.3f)", ph,
                  name, name, static_cast<unsigned long long>(id), kAsyncTid, us(ph == 'b' ? begin : end));
    const std::string tail = ph == 'b' && !args.empty() ? R"(,"args":{)" + args + "}}" : std::string("}");
    room_for(std::strlen(buf) + tail.size()).append(buf).append(tail);
  }
  count_ += 2;
}

void TraceRecorder::batch(const BatchSpan& s) {
  std::lock_guard lock(mutex_);
  if (!on_.load(std::memory_order_relaxed)) return;
  if (count_ + 8 > kMaxEvents) {
    ++dropped_batches_;
    return;
  }
  char args[192];
  int n = std::snprintf(args, sizeof args, R"("batch":%llu,"requests":%zu,"upper":%zu,"reason":"%s","failed":%s)",
                        static_cast<unsigned long long>(s.id), s.requests, s.upper, s.reason,
                        s.failed ? "true" : "false");
  if (s.gpu_us >= 0 && n > 0 && static_cast<std::size_t>(n) < sizeof args)
    std::snprintf(args + n, sizeof args - n, R"(,"gpu_us":%.3f)", s.gpu_us);
  char buf[320];
  std::snprintf(buf, sizeof buf, R"(,{"ph":"X","name":"submit","pid":1,"tid":%d,"ts":%.3f,"dur":%.3f,"args":{%s}})",
                kStrandTid, us(s.submit_begin), us(s.submit_end) - us(s.submit_begin), args);
  room_for(std::strlen(buf)).append(buf);
  ++count_;
  async_span("formation", s.id, s.oldest_arrival, s.submit_begin, args);
  async_span("device", s.id, s.submit_end, s.device_done, args);
  async_span("completion", s.id, s.device_done, s.resolved, args);
}

void TraceRecorder::queue_wait(std::uint64_t batch_id, Clock::time_point arrival, Clock::time_point submitted) {
  std::lock_guard lock(mutex_);
  if (!on_.load(std::memory_order_relaxed) || count_ + 2 > kMaxEvents) return;
  async_span("queue wait", ++next_request_id_ << 20 | (batch_id & 0xfffff), arrival, submitted,
             R"("batch":)" + std::to_string(batch_id));
}

void TraceRecorder::strand_run(const StrandRun& r) {
  std::lock_guard lock(mutex_);
  if (!on_.load(std::memory_order_relaxed) || count_ + 16 > kMaxEvents) return;  // room kept for batches
  char buf[320];
  std::snprintf(buf, sizeof buf,
                R"(,{"ph":"X","name":"strand run","pid":1,"tid":%d,"ts":%.3f,"dur":%.3f,"args":{"thread":"%s",)"
                R"("pulled":%llu,"batches":%llu,"forming":%zu,"blocked_on_slot":%s}})",
                kRunsTid, us(r.begin), us(r.end) - us(r.begin), r.io_thread ? "io" : "caller",
                static_cast<unsigned long long>(r.pulled), static_cast<unsigned long long>(r.batches), r.forming,
                r.blocked_on_slot ? "true" : "false");
  room_for(std::strlen(buf)).append(buf);
  ++count_;
}

void TraceRecorder::expiry_round(const ExpiryRound& r) {
  std::lock_guard lock(mutex_);
  if (!on_.load(std::memory_order_relaxed) || count_ + 16 > kMaxEvents) return;  // room kept for batches
  char buf[256];
  std::snprintf(buf, sizeof buf,
                R"(,{"ph":"X","name":"expiry round","pid":1,"tid":%d,"ts":%.3f,"dur":%.3f,"args":{"expired":%zu,)"
                R"("late_us":%.3f}})",
                kWatchTid, us(r.woke), us(r.end) - us(r.woke), r.count, us(r.woke) - us(r.first_due));
  room_for(std::strlen(buf)).append(buf);
  ++count_;
}

void TraceRecorder::counter(const char* name, Clock::time_point t, double value) {
  std::lock_guard lock(mutex_);
  if (!on_.load(std::memory_order_relaxed) || count_ + 16 > kMaxEvents) return;  // room kept for batches
  char buf[200];
  std::snprintf(buf, sizeof buf, R"(,{"ph":"C","name":"%s","pid":1,"ts":%.3f,"args":{"value":%.17g}})", name, us(t),
                value);
  room_for(std::strlen(buf)).append(buf);
  ++count_;
}

}  // namespace gpubatch::detail

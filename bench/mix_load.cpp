// gpubatch-mix: an open-loop load of mixed requests, for scheduling (issue 14; DESIGN.md
// "Priorities", "Latency target"). Threads send relu requests on a fixed schedule at --rate in
// total; a fraction --high of them at priority 1 from threads of their own (the rest at 0), each
// request independently large (--large) and with a
// deadline (--deadline-us, for --deadline-fraction of them). Reported per class (high/low,
// small/large): latency from the scheduled send time (no coordinated omission) at p50/p99/max,
// and per level that latency in two: the sender's lag to its call (`send_lag_us`) and the call
// to the handler (`from_call_us`), and every request's time inside the call itself (`call_us`);
// for deadline_exceeded errors how long after the deadline they arrived (`late_us`); with
// --block-for-us, how long after block_timeout a queue_full arrived at its handler
// (`queue_full_late_us`) and its call returned (`queue_full_return_late_us`). Every result is checked
// against the CPU reference; `verified` is true only when all were, `lost` counts requests whose
// completion never came.
//
//   gpubatch-mix --rate 200000 --threads 16 --high 0.1 --json
//   gpubatch-mix --rate 50000 --large 0.1 --large-size 1000000 --deadline-us 2000 --json
#include <CLI/CLI.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <deque>
#include <exception>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>

#include "host_noise.hpp"
#include "start_gate.hpp"
#include "thread_cpu.hpp"
#include "gpubatch/config.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"

using namespace gpubatch;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string preset, config_file, device;
  int threads = 16;
  std::uint64_t requests = 100000;
  double rate = 100000;
  std::uint32_t size = 256, large_size = 1000000;
  double high = 0, large = 0, deadline_fraction = 1;
  std::int64_t deadline_us = 0, block_for_us = 0, target_p99_us = 0;
  int pace_us = 50;  // a sender ahead of its schedule sleeps at least this long (host_noise.hpp)
  std::size_t queue_capacity = 0;
  bool host_probe = false;  // a thread that measures how late it wakes ("host" in the JSON)
  bool early_system_pool = false;  // Asio's system executor used once before the clock starts
  bool read_errors_later = false;  // the handler keeps the exception; its sender reads it
  bool rethrow_in_handler = false;  // the handler rethrows the exception to read its code
  long warm = -1;  // small requests sent before the clock starts (-1: a full batch per slot)
  bool json = false;
};

// Inputs shared by every thread (a request copies one, as a caller's own data would be) and
// their CPU reference results.
struct Pool {
  static constexpr int kEach = 4;
  std::vector<std::vector<float>> small, large, small_ref, large_ref;
  Pool(const Options& o) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> d(-3.0f, 3.0f);
    auto make = [&](std::uint32_t n, auto& in, auto& ref) {
      for (int i = 0; i < kEach; ++i) {
        std::vector<float> v(n);
        for (float& x : v) x = d(rng);
        ref.push_back(reference::run(Request::relu(v)).values);
        in.push_back(std::move(v));
      }
    };
    make(o.size, small, small_ref);
    if (o.large > 0) make(o.large_size, large, large_ref);
  }
  // Bit for bit first (relu is exact on every device seen; libc's vectorised memcmp, not a loop
  // of float comparisons: a large result is 4 MB); otherwise the reference's own check with its
  // bounds.
  bool check(bool is_large, int i, const std::vector<float>& got) const {
    const auto& ref = is_large ? large_ref[i] : small_ref[i];
    if (got.size() == ref.size() && (ref.empty() || std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)) == 0))
      return true;
    Result r;
    r.values = got;
    return !reference::check(Request::relu(is_large ? large[i] : small[i]), r);
  }
};

// One request as its sender and its completion handler see it.
struct Slot {
  Clock::time_point scheduled, called, returned, deadline = Clock::time_point::max(), finished;
  bool high = false, is_large = false;
  int input = 0;
  int quarter = 0;  // which quarter of its sender's schedule it was sent in
  std::vector<float> values;
  std::optional<ErrorCode> code;
  std::string what;
  std::exception_ptr error;  // --read-errors-later: kept by the handler, read by the sender
  std::atomic<bool> done{false};
};

struct Samples {
  std::vector<double> latency_us[2][2];  // [high][large], successful requests
  // The same requests' latency split in two, by [high]: the sender's lag (the call made after the
  // scheduled send: a sender behind its schedule, or descheduled) and the call to the handler.
  std::vector<double> lag_us[2], from_call_us[2];
  // Every request's time inside the library's call (its own thread's share of the cost, waits
  // for room in the queue included), by [high], failed requests too.
  std::vector<double> call_us[2];
  // queue_full_late_us: from block_timeout after the call to its handler; queue_full_return_us:
  // to the call's return, where the caller's thread gave up waiting (the handler is posted, never
  // run inside the call, so it waits for a thread of its executor on top).
  std::vector<double> deadline_late_us, queue_full_late_us, queue_full_return_us;
  // deadline_late_us by where the request failed, read from its message: 0 in the call (its
  // deadline came while it waited for room in the queue), 1 the deadline watch, 2 the strand,
  // 3 refused at the call by deadline admission (negative: before its deadline); the strand's own
  // split by what its message says of the watch: 4 it did not hold the request yet, 5 it was behind;
  // 6 passed already when the call looked at the clock (the caller's thread descheduled between
  // the generator's clock read and the library's).
  static constexpr int kPaths = 7;
  std::vector<double> late_by_path[kPaths];
  std::string sample_by_path[kPaths];  // the first message of each path, for whoever reads the JSON
  // Successful requests' latency by the quarter of the run they were sent in: a tail from a
  // transient at the start (the first quarter alone) and a standing queue (every quarter) read
  // differently.
  std::vector<double> by_quarter_us[4];
  std::uint64_t ok = 0, deadline_errors = 0, queue_full = 0, other_errors = 0, mismatches = 0, lost = 0;
  std::uint64_t finished_after_deadline = 0;  // ran (submitted before its deadline), resolved late
  // Of deadline_errors, those of the high class, and of those the ones refused at the call
  // (deadline admission): a higher level must not be refused for level 0's backlog.
  std::uint64_t deadline_errors_high = 0, refused_high = 0;
  std::string first_error;
  // The last errors read, by identity, with what they said (read_error): the library fails
  // requests that expire or are refused together with one shared exception, so a sender rethrows
  // once per exception, not once per request. A rethrow takes the unwinder's lock: 16 senders
  // rethrowing every error of a saturated deadline load spent their time there and fell seconds
  // behind their schedule on the H200 (twenty-fourth session).
  struct Read {
    std::exception_ptr error;
    std::optional<ErrorCode> code;
    std::string what;
  };
  std::array<Read, 4> read;
  std::size_t next_read = 0;
  // The sender's own CPU from the gate's opening to its end (summed when merged), for
  // cpu_s_by_thread: its thread has exited by the time the run's CPU is split.
  double cpu_start_s = 0, cpu_s = 0;
  void merge(Samples& o) {
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 2; ++l)
        latency_us[h][l].insert(latency_us[h][l].end(), o.latency_us[h][l].begin(), o.latency_us[h][l].end());
    for (int h = 0; h < 2; ++h) {
      lag_us[h].insert(lag_us[h].end(), o.lag_us[h].begin(), o.lag_us[h].end());
      from_call_us[h].insert(from_call_us[h].end(), o.from_call_us[h].begin(), o.from_call_us[h].end());
      call_us[h].insert(call_us[h].end(), o.call_us[h].begin(), o.call_us[h].end());
    }
    deadline_late_us.insert(deadline_late_us.end(), o.deadline_late_us.begin(), o.deadline_late_us.end());
    queue_full_late_us.insert(queue_full_late_us.end(), o.queue_full_late_us.begin(), o.queue_full_late_us.end());
    queue_full_return_us.insert(queue_full_return_us.end(), o.queue_full_return_us.begin(), o.queue_full_return_us.end());
    for (int i = 0; i < kPaths; ++i) {
      late_by_path[i].insert(late_by_path[i].end(), o.late_by_path[i].begin(), o.late_by_path[i].end());
      if (sample_by_path[i].empty()) sample_by_path[i] = o.sample_by_path[i];
    }
    ok += o.ok, deadline_errors += o.deadline_errors, queue_full += o.queue_full;
    other_errors += o.other_errors, mismatches += o.mismatches, lost += o.lost;
    finished_after_deadline += o.finished_after_deadline;
    deadline_errors_high += o.deadline_errors_high, refused_high += o.refused_high;
    if (first_error.empty()) first_error = o.first_error;
    cpu_s += o.cpu_s;
    for (int q = 0; q < 4; ++q) by_quarter_us[q].insert(by_quarter_us[q].end(), o.by_quarter_us[q].begin(), o.by_quarter_us[q].end());
  }
};

// `s` as the inside of a JSON string: quotes and backslashes escaped, control characters dropped.
std::string json_text(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (static_cast<unsigned char>(c) < 0x20) continue;
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// Reads the code and message of a failed request's exception (a rethrow).
void classify(Slot& s, const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    s.code = x.code();
    s.what = x.what();
  } catch (const std::exception& x) {
    s.code = ErrorCode::internal;
    s.what = x.what();
  }
}

// The message (and the code, if not read yet) of the failed request in `s`, rethrown only when
// its exception is not one of the last few read.
void read_error(Slot& s, Samples& out) {
  for (const auto& r : out.read) {
    if (r.error == s.error) {
      s.code = r.code;
      s.what = r.what;
      return;
    }
  }
  classify(s, s.error);
  out.read[out.next_read++ % out.read.size()] = {s.error, s.code, s.what};
}

void record(const Options& o, const Pool& pool, Slot& s, Samples& out) {
  out.call_us[s.high].push_back(us(s.returned - s.called));
  if (s.error) read_error(s, out);
  if (!s.code) {
    if (!pool.check(s.is_large, s.input, s.values)) {
      if (out.mismatches++ == 0) out.first_error = "result differs from the CPU reference";
      return;
    }
    ++out.ok;
    out.latency_us[s.high][s.is_large].push_back(us(s.finished - s.scheduled));
    out.by_quarter_us[s.quarter].push_back(out.latency_us[s.high][s.is_large].back());
    out.lag_us[s.high].push_back(us(s.called - s.scheduled));
    out.from_call_us[s.high].push_back(us(s.finished - s.called));
    if (s.finished > s.deadline) ++out.finished_after_deadline;
  } else if (*s.code == ErrorCode::deadline_exceeded) {
    ++out.deadline_errors;
    out.deadline_late_us.push_back(us(s.finished - s.deadline));
    const int path = s.what.find("room in the queue") != std::string::npos                ? 0
                     : s.what.find("before it was submitted") != std::string::npos           ? 1
                     : s.what.find("refused at submission") != std::string::npos             ? 3
                     : s.what.find("the deadline watch did not hold it") != std::string::npos ? 4
                     : s.what.find("the deadline watch was behind") != std::string::npos      ? 5
                     : s.what.find("had passed when it was submitted") != std::string::npos   ? 6
                                                                                             : 2;
    out.late_by_path[path].push_back(out.deadline_late_us.back());
    out.deadline_errors_high += s.high;
    out.refused_high += s.high && path == 3;
    if (out.sample_by_path[path].empty()) out.sample_by_path[path] = s.what;
  } else if (*s.code == ErrorCode::queue_full) {
    ++out.queue_full;
    const auto gave_up_due = s.called + std::chrono::microseconds(o.block_for_us);
    out.queue_full_late_us.push_back(us(s.finished - gave_up_due));
    out.queue_full_return_us.push_back(us(s.returned - gave_up_due));
  } else {
    if (out.other_errors++ == 0 && out.first_error.empty()) out.first_error = s.what;
  }
}

// How a completion handler reads a failed request's error: 0 by default, with
// gpubatch::error_code_of; 1 (--read-errors-later) not at all, the sender does; 2
// (--rethrow-in-handler) by a rethrow.
int error_mode(const Options& o) { return o.read_errors_later ? 1 : o.rethrow_in_handler ? 2 : 0; }

// The completion handler of the request in `s`: the time first, then its result or its error.
auto completion(std::shared_ptr<Slot> s, int mode) {
  return [s = std::move(s), mode](std::exception_ptr e, std::vector<float> v) {
    s->finished = Clock::now();
    if (e) {
      // By default as a user would with gpubatch::error_code_of: the code read at once (no
      // rethrow for an exception read before on this thread), the message by the sender later.
      if (mode == 1) s->error = std::move(e);
      else if (mode == 2) classify(*s, e);
      else s->code = error_code_of(e), s->error = std::move(e);
    } else {
      s->values = std::move(v);
    }
    s->done.store(true, std::memory_order_release);
  };
}

// One sending thread: `count` requests at `rate` per second, all at priority `level`.
class Sender {
 public:
  // `gpu` must outlive run().
  Sender(const Options& o, const Pool& pool, const BatchedGpuHandle& gpu, unsigned seed, Samples& out)
      : o_(o), pool_(pool), gpu_(gpu), rng_(seed), out_(out) {}

  void run(std::uint64_t count, double rate, bool high, bench::StartGate& gate) {
    reserve_samples(count, high);
    gate.arrive_and_wait();
    out_.cpu_start_s = bench::own_thread_cpu_s();
    const auto interval = std::chrono::duration<double>(1.0 / rate);
    auto next = Clock::now();
    const auto begin = next;
    const double quarter_s = double(count) / rate / 4.0;
    for (std::uint64_t sent = 0; sent < count;) {
      reap();
      if (Clock::now() < next) {
        bench::sleep_to_next_send(next, std::chrono::microseconds(o_.pace_us));
        continue;
      }
      const auto scheduled = next;
      const int quarter = std::min(3, static_cast<int>(std::chrono::duration<double>(next - begin).count() / quarter_s));
      next = std::chrono::time_point_cast<Clock::duration>(next + interval);
      ++sent;
      send(scheduled, quarter, high);
    }
    drain();
  }

 private:
  // Room for every sample up front: a vector that doubles while the clock runs reallocates on 16
  // threads in the same instant (their sends keep pace), and the H100 traces showed the whole
  // process stalling then (DESIGN.md "Where the p99 under load came from"). Then the heap, and the
  // start with the others (bench/start_gate.hpp).
  void reserve_samples(std::uint64_t count, bool high) {
    bench::reserve_touched(out_.latency_us[high][0], count);
    out_.latency_us[high][1].reserve(static_cast<std::size_t>(double(count) * o_.large * 2) + 64);
    for (auto& q : out_.by_quarter_us) q.reserve(count / 4 + 64);  // nothing grows while the clock runs
    if (o_.deadline_us > 0) out_.deadline_late_us.reserve(static_cast<std::size_t>(double(count) * o_.deadline_fraction) + 64);
    if (o_.block_for_us > 0) {
      out_.queue_full_late_us.reserve(count);
      out_.queue_full_return_us.reserve(count);
    }
    bench::reserve_touched(out_.lag_us[high], count);
    bench::reserve_touched(out_.from_call_us[high], count);
    bench::reserve_touched(out_.call_us[high], count);
  }

  // One request scheduled at `scheduled`: its size and input drawn, then the call.
  void send(Clock::time_point scheduled, int quarter, bool high) {
    auto s = std::make_shared<Slot>();
    s->scheduled = scheduled;
    s->quarter = quarter;
    s->high = high;
    s->is_large = u_(rng_) < o_.large;
    s->input = pick_(rng_);
    SubmitOptions opt;
    opt.priority = s->high ? 1 : 0;
    // The input is copied before the clock is read and moved into the call, so that a deadline
    // counts from the library's call, not from the sender's own copy: a 1,000,000-float copy into
    // fresh memory took the whole 2 ms deadline now and then on the H200, and the library, finding
    // the deadline already passed, refused it at the call (path 6), 1.2 ms late at p50
    // (BENCHMARKS.md, 2026-11-29).
    std::vector<float> x = s->is_large ? pool_.large[s->input] : pool_.small[s->input];
    s->called = Clock::now();
    if (o_.deadline_us > 0 && u_(rng_) < o_.deadline_fraction)
      s->deadline = opt.deadline = s->called + std::chrono::microseconds(o_.deadline_us);
    pending_.push_back(s);
    gpu_.relu(std::move(x), opt, completion(s, error_mode(o_)));
    s->returned = Clock::now();
  }

  // Records the requests completed so far, in the order they were sent.
  void reap() {
    while (!pending_.empty() && pending_.front()->done.load(std::memory_order_acquire)) {
      record(o_, pool_, *pending_.front(), out_);
      pending_.pop_front();
    }
  }

  // After the last send: the rest, waited for up to 120 s; those whose completion never came are lost.
  void drain() {
    const auto give_up = Clock::now() + std::chrono::seconds(120);
    while (!pending_.empty() && Clock::now() < give_up) {
      reap();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    out_.lost += pending_.size();
  }

  const Options& o_;
  const Pool& pool_;
  const BatchedGpuHandle& gpu_;
  std::mt19937 rng_;
  std::uniform_real_distribution<double> u_{0.0, 1.0};
  std::uniform_int_distribution<int> pick_{0, Pool::kEach - 1};
  Samples& out_;
  std::deque<std::shared_ptr<Slot>> pending_;
};

// A sending thread's body (see Sender).
void sender(const Options& o, const Pool& pool, const BatchedGpuHandle& gpu, unsigned seed,
            std::uint64_t count, double rate, bool high, Samples& out, bench::StartGate& gate) {
  bench::precise_timer_slack();
  Sender(o, pool, gpu, seed, out).run(count, rate, high, gate);
  out.cpu_s = bench::own_thread_cpu_s() - out.cpu_start_s;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const std::size_t k = std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

std::string dist(const std::vector<double>& v) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "{\"count\": %zu, \"p50\": %.1f, \"p99\": %.1f, \"max\": %.1f}", v.size(),
                percentile(v, 0.5), percentile(v, 0.99), v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()));
  return buf;
}

BatchConfig make_config(const Options& o) {
  BatchConfig c = !o.config_file.empty() ? BatchConfig::from_file(o.config_file)
                  : o.preset.empty()     ? BatchConfig{}
                                         : BatchConfig::preset(o.preset);
  c.apply_environment();
  if (o.high > 0) c.priority_levels = std::max<std::size_t>(c.priority_levels, 2);
  if (o.block_for_us > 0) {
    c.overflow = OverflowPolicy::block_for;
    c.block_timeout = std::chrono::microseconds(o.block_for_us);
  }
  if (o.queue_capacity) c.queue_capacity = o.queue_capacity;
  if (o.target_p99_us) c.target_p99 = std::chrono::microseconds(o.target_p99_us);
  c.validate();
  return c;
}

// The command line (--help lists the options in this order).
void add_options(CLI::App& app, Options& o) {
  app.add_option("--preset", o.preset, "a preset (default: BatchConfig's default, adaptive)");
  app.add_option("--config", o.config_file, "TOML config file (overrides --preset)");
  app.add_option("--threads", o.threads, "sending threads")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--requests", o.requests, "requests in total")->check(CLI::Range(1ull, 1ull << 40))->capture_default_str();
  app.add_option("--rate", o.rate, "requests/s offered in total")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--pace-us", o.pace_us, "a sender ahead of its schedule sleeps at least this long, then sends all come due (0: until each next send, the behaviour before 2026-11-29's twenty-second session)")
      ->check(CLI::Range(0, 200))
      ->capture_default_str();
  app.add_option("--size", o.size, "floats per small request")->check(CLI::Range(1u, 1u << 26))->capture_default_str();
  app.add_option("--large-size", o.large_size, "floats per large request")->check(CLI::Range(1u, 1u << 26))->capture_default_str();
  app.add_option("--large", o.large, "fraction of large requests")->check(CLI::Range(0.0, 1.0));
  app.add_option("--high", o.high, "fraction of requests at priority 1 (sent by that fraction of the threads, at least one)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--deadline-us", o.deadline_us, "deadline after the call (0: none)")->check(CLI::Range(0, 60000000));
  app.add_option("--deadline-fraction", o.deadline_fraction, "fraction of requests with the deadline")->check(CLI::Range(0.0, 1.0));
  app.add_option("--block-for-us", o.block_for_us, "overflow = block_for with this block_timeout")->check(CLI::Range(0, 60000000));
  app.add_option("--queue-capacity", o.queue_capacity, "queue capacity (0: the configuration's)");
  app.add_option("--target-p99-us", o.target_p99_us, "BatchConfig::target_p99 (0: off)")->check(CLI::Range(0, 60000000));
  app.add_flag("--read-errors-later", o.read_errors_later,
               "a failed request's handler keeps its exception and the sending thread reads its code "
               "(by default the handler reads the code with gpubatch::error_code_of, on the thread that resolves it)");
  app.add_flag("--rethrow-in-handler", o.rethrow_in_handler,
               "a failed request's handler rethrows its exception to read the code and message (before "
               "2026-11-28 the default; now the handler reads the code with gpubatch::error_code_of)");
  app.add_flag("--early-system-pool", o.early_system_pool,
               "run a function on Asio's system executor before the clock starts (its pool of two threads a "
               "core is made at its first use: by the library, at the first error it posts to a handler)");
  app.add_flag("--host-probe", o.host_probe,
               "a thread of this process sleeps 100 us at a time over the run: how late it woke goes into \"host\" (steal is always there)");
  app.add_option("--warm", o.warm, "small requests sent before the clock starts (default: a full batch per in-flight slot)")
      ->check(CLI::Range(0l, 1l << 24));
  app.add_option("--device", o.device, "device index or name substring");
  app.add_flag("--json", o.json, "one JSON object on stdout");
}

// Warm up as gpubatch-load does: kernels built, and staging grown to a full batch in every
// slot, so the timed run measures the steady state. With only 256 requests (before the third
// session of 2026-11-27) the first batch of 256 KiB or more in the timed run made a 64 MiB
// pinned block inside its submit (16-22 ms on the H100): the 20 ms maximum of nearly every run.
void warm_up(const Options& o, Device& device, const BatchConfig& config, const Pool& pool) {
  BatchExecutor warm(device, config);
  // At most a full queue: a burst beyond it would meet `reject` or `block_for` (--block-for-us).
  const std::size_t burst = o.warm >= 0 ? static_cast<std::size_t>(o.warm)
                                        : std::min(config.max_batch_size * config.max_inflight_batches,
                                                   config.queue_capacity_of(0));
  std::vector<std::future<std::vector<float>>> f;
  for (std::size_t i = 0; i < burst; ++i) f.push_back(warm.handle().relu(pool.small[0]));
  if (o.large > 0)
    for (int i = 0; i < 4; ++i) f.push_back(warm.handle().relu(pool.large[0]));
  for (auto& x : f) x.get();
}

// --early-system-pool: a function run on Asio's system executor, which makes its pool.
void start_system_pool() {
  std::promise<void> ran;
  boost::asio::post(boost::asio::system_executor(), [&ran] { ran.set_value(); });
  ran.get_future().wait();
}

// A sending thread's part of the load.
struct Share {
  int t;  // the thread's index, and its Samples'
  std::uint64_t count;
  double rate;
  bool high;
};
struct SenderPlan {
  int senders = 0;  // sending threads planned (those with nothing to send are not started)
  std::vector<Share> shares;
};

// High-priority traffic comes from threads of its own (as interactive callers would): a
// sender blocked on a full level-0 queue must not hold back the high requests behind it.
SenderPlan plan_senders(const Options& o) {
  const int high_threads = o.high > 0 ? std::max(1, static_cast<int>(o.threads * o.high + 0.5)) : 0;
  const int low_threads = std::max(1, o.threads - high_threads);
  const auto high_total = static_cast<std::uint64_t>(double(o.requests) * o.high + 0.5);
  SenderPlan plan;
  plan.senders = high_threads + low_threads;
  for (int t = 0; t < high_threads + low_threads; ++t) {
    const bool high = t < high_threads;
    const int n = high ? high_threads : low_threads;
    const int i = high ? t : t - high_threads;
    const std::uint64_t total = high ? high_total : o.requests - high_total;
    const std::uint64_t count = total / n + (std::uint64_t(i) < total % n ? 1 : 0);
    const double rate = o.rate * (high ? o.high : 1.0 - o.high) / n;
    if (count > 0 && rate > 0) plan.shares.push_back({t, count, rate, high});
  }
  return plan;
}

// What the clock saw.
struct Timed {
  double seconds = 0;
  bench::HostNoise noise;
  double cpu_seconds = 0;                  // the process's, the host probe's own left out
  bench::ExecutorThreadsCpu executor_cpu;  // the executor's threads' share of it
};

// The timed run: every share sent by a thread of its own, from the gate's opening to the last
// sender's end; each thread's samples in per[its share's t].
Timed run_senders(const Options& o, const Pool& pool, const BatchExecutor& executor,
                  const std::vector<Share>& shares, std::vector<Samples>& per) {
  std::vector<std::thread> threads;
  bench::StartGate gate(static_cast<std::ptrdiff_t>(shares.size()));
  for (const Share& sh : shares)
    threads.emplace_back([&, sh] { sender(o, pool, executor.handle(), 100 + sh.t, sh.count, sh.rate, sh.high, per[sh.t], gate); });
  // The senders are made and ready (bench/start_gate.hpp): the clock starts now.
  gate.wait_ready();
  bench::HostNoiseProbe host(o.host_probe);
  const double cpu_start = bench::process_cpu_s();
  const auto executor_start = bench::ExecutorThreadsCpu::now();
  const auto start = Clock::now();
  gate.open();
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const bench::HostNoise noise = host.stop();
  const double cpu_seconds = bench::process_cpu_s() - cpu_start - noise.probe_cpu_s;
  return {seconds, noise, cpu_seconds, bench::ExecutorThreadsCpu::now() - executor_start};
}

// Successful requests' latencies by class: by priority, and by size.
struct Classes {
  std::vector<double> high, low, small, large;
};

Classes classes_of(const Samples& all) {
  Classes c;
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 2; ++l) {
      auto& v = all.latency_us[h][l];
      (h ? c.high : c.low).insert((h ? c.high : c.low).end(), v.begin(), v.end());
      (l ? c.large : c.small).insert((l ? c.large : c.small).end(), v.begin(), v.end());
    }
  return c;
}

// The first message of each deadline path, as the items of a JSON list.
std::string deadline_samples_json(const Samples& all) {
  std::string list;
  for (int i = 0; i < Samples::kPaths; ++i) list += std::string(i ? ", " : "") + "\"" + json_text(all.sample_by_path[i]) + "\"";
  return list;
}

// --json: the run as one JSON object (without the newline).
std::string json_report(const Options& o, const Device& device, const Timed& timed, const Stats& stats,
                        const Samples& all, const Classes& c, bool verified) {
  const double seconds = timed.seconds;
  std::ostringstream js;
  js << "{\"tool\": \"gpubatch-mix\", \"device\": \"" << device.info().name << "\", \"threads\": " << o.threads
     << ", \"requests\": " << o.requests << ", \"offered_rate\": " << o.rate << ", \"pace_us\": " << o.pace_us << ", \"early_system_pool\": " << (o.early_system_pool ? "true" : "false") << ", \"high\": " << o.high
     << ", \"large\": " << o.large << ", \"large_size\": " << o.large_size << ", \"size\": " << o.size
     << ", \"deadline_us\": " << o.deadline_us << ", \"block_for_us\": " << o.block_for_us
     << ", \"target_p99_us\": " << o.target_p99_us << ", \"seconds\": " << seconds
     << ", \"completed_per_s\": " << double(all.ok) / seconds << ", \"ok\": " << all.ok
     << ", \"latency_us\": {\"all\": " << dist([&] { auto v = c.high; v.insert(v.end(), c.low.begin(), c.low.end()); return v; }())
     << ", \"high\": " << dist(c.high) << ", \"low\": " << dist(c.low) << ", \"small\": " << dist(c.small)
     << ", \"large\": " << dist(c.large) << "}, \"latency_by_quarter_us\": [" << dist(all.by_quarter_us[0]) << ", "
     << dist(all.by_quarter_us[1]) << ", " << dist(all.by_quarter_us[2]) << ", " << dist(all.by_quarter_us[3])
     << "], \"send_lag_us\": {\"high\": " << dist(all.lag_us[1])
     << ", \"low\": " << dist(all.lag_us[0]) << "}, \"from_call_us\": {\"high\": " << dist(all.from_call_us[1])
     << ", \"low\": " << dist(all.from_call_us[0]) << "}, \"call_us\": {\"high\": " << dist(all.call_us[1])
     << ", \"low\": " << dist(all.call_us[0]) << "}, \"deadline_exceeded\": " << all.deadline_errors
     << ", \"deadline_exceeded_high\": " << all.deadline_errors_high << ", \"refused_high\": " << all.refused_high
     << ", \"deadline_late_us\": " << dist(all.deadline_late_us)
     << ", \"deadline_late_by_path_us\": {\"call\": " << dist(all.late_by_path[0])
     << ", \"watch\": " << dist(all.late_by_path[1]) << ", \"strand\": " << dist(all.late_by_path[2])
     << ", \"admission\": " << dist(all.late_by_path[3]) << ", \"strand_unwatched\": " << dist(all.late_by_path[4])
     << ", \"strand_watch_behind\": " << dist(all.late_by_path[5])
     << ", \"at_call\": " << dist(all.late_by_path[6]) << "}, \"deadline_sample_by_path\": ["
     << deadline_samples_json(all)
     << "], \"shed\": " << stats.shed
     << ", \"finished_after_deadline\": " << all.finished_after_deadline << ", \"queue_full\": " << all.queue_full
     << ", \"queue_full_late_us\": " << dist(all.queue_full_late_us)
     << ", \"queue_full_return_late_us\": " << dist(all.queue_full_return_us) << ", \"other_errors\": " << all.other_errors
     << ", \"mean_batch_size\": " << stats.mean_batch_size << ", \"batches\": " << stats.batches << ", \"express_batches\": " << stats.express_batches
     << ", \"target_batch_bytes\": " << stats.target_batch_bytes << ", \"executor_e2e_p99_us\": {";
  // The executor's own view (acceptance to resolution, per level): the gap to latency_us is
  // the time a request spent before the call returned (a blocked push, a late sender).
  for (std::size_t l = 0; l < stats.end_to_end_by_priority.size(); ++l)
    js << (l ? ", " : "") << "\"" << l << "\": " << double(stats.end_to_end_by_priority[l].summary.p99.count()) / 1000.0;
  js << "}, \"cpu_us_per_request\": " << timed.cpu_seconds * 1e6 / double(std::max<std::uint64_t>(1, o.requests))
     << ", \"cpu_s_by_thread\": " << bench::cpu_split_json(timed.cpu_seconds, all.cpu_s, timed.executor_cpu)
     << ", \"lost\": " << all.lost
     << ", \"verified\": " << (verified ? "true" : "false") << ", \"host\": " << timed.noise.json() << "}";
  return js.str();
}

// Without --json: the run in a few lines for a person to read.
void print_summary(const Options& o, const Timed& timed, const Samples& all, const Classes& c, bool verified) {
  std::printf("%.0f ok/s (offered %.0f), p50/p99 us: high %.0f/%.0f low %.0f/%.0f small %.0f/%.0f large %.0f/%.0f\n",
              double(all.ok) / timed.seconds, o.rate, percentile(c.high, .5), percentile(c.high, .99), percentile(c.low, .5),
              percentile(c.low, .99), percentile(c.small, .5), percentile(c.small, .99), percentile(c.large, .5),
              percentile(c.large, .99));
  std::printf("host %s\n", timed.noise.json().c_str());
  std::printf("deadline_exceeded %llu (late p50 %.0f p99 %.0f max %.0f us), queue_full %llu (late p99 %.0f us), "
              "verified %s, lost %llu\n",
              (unsigned long long)all.deadline_errors, percentile(all.deadline_late_us, .5),
              percentile(all.deadline_late_us, .99),
              all.deadline_late_us.empty() ? 0.0 : *std::max_element(all.deadline_late_us.begin(), all.deadline_late_us.end()),
              (unsigned long long)all.queue_full, percentile(all.queue_full_late_us, .99), verified ? "yes" : "NO",
              (unsigned long long)all.lost);
  if (all.deadline_errors)
    std::printf("  by path, count late p99 us: call %zu %.0f, watch %zu %.0f, strand %zu %.0f, admission %zu %.0f, "
                "strand (not yet watched) %zu %.0f, strand (watch behind) %zu %.0f\n",
                all.late_by_path[0].size(), percentile(all.late_by_path[0], .99), all.late_by_path[1].size(),
                percentile(all.late_by_path[1], .99), all.late_by_path[2].size(), percentile(all.late_by_path[2], .99),
                all.late_by_path[3].size(), percentile(all.late_by_path[3], .99), all.late_by_path[4].size(),
                percentile(all.late_by_path[4], .99), all.late_by_path[5].size(), percentile(all.late_by_path[5], .99));
}

// The whole run after the command line: set up, warm up, the timed run, the report. The exit
// code: 0 when every result was verified.
int run(const Options& o) {
  DeviceOptions device_options;
  device_options.selector = o.device;
  Device device(device_options);
  const BatchConfig config = make_config(o);
  const Pool pool(o);
  warm_up(o, device, config, pool);
  if (o.early_system_pool) start_system_pool();
  BatchExecutor executor(device, config);
  const SenderPlan plan = plan_senders(o);
  std::vector<Samples> per(plan.senders);
  const Timed timed = run_senders(o, pool, executor, plan.shares, per);
  const Stats stats = executor.stats();
  Samples all;
  for (auto& s : per) all.merge(s);
  const Classes classes = classes_of(all);
  const bool verified = all.mismatches == 0 && all.lost == 0 && all.other_errors == 0;
  if (o.json)
    std::cout << json_report(o, device, timed, stats, all, classes, verified) << "\n";
  else
    print_summary(o, timed, all, classes, verified);
  if (!all.first_error.empty() && !verified) std::cerr << "first error: " << all.first_error << "\n";
  return verified ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"gpubatch-mix: open-loop mixed load (priorities, deadlines, large requests)"};
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "gpubatch-mix: " << e.what() << "\n";
    return 2;
  }
}

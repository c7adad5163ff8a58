// gpubatch-load: drives an executor (or the synchronous path) with many threads and reports
// throughput, latency percentiles and what the executor did. Every result is checked against
// the CPU reference; `verified` is true only when all of them were, `lost` counts futures that
// never resolved. Flags and JSON fields are the contract in docs/DESIGN.md.
#include <sched.h>

#include <CLI/CLI.hpp>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpubatch/config.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"
#include "gpu/fault_injection.hpp"
#include "host_noise.hpp"
#include "start_gate.hpp"
#include "thread_cpu.hpp"

using namespace gpubatch;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string preset;  // empty: BatchConfig's defaults (a user's), which are the adaptive preset
  std::string config_file;
  int threads = 2;
  std::uint64_t requests = 20000;
  std::string op = "relu";
  std::uint32_t size = 256;
  int inflight = 64;
  int think_us = 0;  // closed loop: a caller's pause after each result before its next request
  int pace_us = 50;   // open loop: a sender ahead of its schedule sleeps at least this long (host_noise.hpp)
  double rate = 0;  // requests/s offered in total; 0: closed loop
  bool unbatched = false;
  bool sync = false;  // handle.run(): each thread waits for its result by polling it
  bool handlers = false;  // closed loop through completion handlers instead of std::futures
  int handler_spin_us = 0;  // --handlers: how long a caller polls its slot before it sleeps
  bool resident = false;  // resident mode on top of the preset or file
  bool host_buffers = false;  // inputs and results in Device::allocate_host memory (no CPU copy)
  bool import = false;        // --host-buffers in the process's own memory, Device::import_host
  int idle_ms = 0;  // after the run: this long with nothing to do, its CPU cost measured
  int lose_device_ms = 0;  // this far into the timed run, a device's next wait reports device_lost
  std::string device;
  std::string devices;  // a device set: "0,1", "0,0", "all" (open_devices)
  bool json = false;
  bool host_probe = false;  // a thread that measures how late it wakes ("host" in the JSON)
  bool progress = true;
};

// Requests of one kind, built once from random inputs: a pool of distinct requests per
// thread (each thread has its own Workload). Each submission copies one, as a caller's own data
// would be. Every result is checked against the CPU reference; a result bit-identical to one
// that already passed for the same request passes by comparison (the check is a pure function
// of request and result), which keeps the generator's own cost far below the executor's.
// The table's ops but custom (user GLSL has no CPU reference to verify against), for --help.
std::string verifiable_ops() {
  std::string names;
  for (const OpInfo& info : kOpTable)
    if (info.name != "custom") names += (names.empty() ? "" : " ") + std::string(info.name);
  return names;
}

// Bit for bit, as "bit-identical" above means (a NaN result that passed passes again; -0 and +0
// differ), with libc's vectorised memcmp instead of a loop of float comparisons: this tool's
// check took 12.8 % of the crowd's samples on the H200 (BENCHMARKS.md, twelfth session, call 1).
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

class Workload {
 public:
  Workload(const Options& o, unsigned seed, std::span<const Device> devices = {}) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-3.0f, 3.0f);
    std::uniform_int_distribution<int> byte(0, 255);
    const std::uint32_t size = o.size;
    const std::size_t floats = o.op == "matmul" ? std::size_t{size} * size : size;
    // Only the inputs the op reads, and fewer distinct requests when they are large: building 32
    // pools of 1,048,576 floats and of 16 MiB of states for every thread, one thread after the
    // other, took the load generator about a minute before the timed run began.
    const bool states = o.op == "gradients" || o.op == "interpolate";
    const std::size_t bytes = states ? std::size_t{size} * kLayersPerState : floats * sizeof(float);
    pool_ = static_cast<int>(std::clamp<std::size_t>((std::size_t{64} << 20) / std::max<std::size_t>(bytes, 1), 2, kMaxPool));
    passed_.resize(static_cast<std::size_t>(pool_));
    std::vector<std::vector<float>> floats_pool(pool_);
    std::vector<std::vector<std::uint8_t>> states_pool(pool_);
    for (int i = 0; i < pool_; ++i) {
      if (states) {
        states_pool[i].resize(std::size_t{size} * kLayersPerState);
        for (auto& b : states_pool[i]) b = static_cast<std::uint8_t>(byte(rng));
      } else {
        floats_pool[i].resize(floats);
        for (auto& x : floats_pool[i]) x = d(rng);
      }
    }
    for (int i = 0; i < pool_; ++i) {
      const auto& a = floats_pool[i];
      const auto& b = floats_pool[(i + 1) % pool_];
      const auto& sa = states_pool[i];
      const auto& sb = states_pool[(i + 1) % pool_];
      const float t = static_cast<float>(i * 7 % 101) / 100.0f;
      requests_.push_back(build(o.op, size, a, b, sa, sb, t, i % 2 ? InterpolationMode::slerp : InterpolationMode::lerp));
    }
    if (o.host_buffers && !devices.empty()) move_into_host_buffers(devices, o.import);
  }

  int pool() const { return pool_; }
  // The i-th request to send (a copy).
  Request make(std::uint64_t i) const { return requests_[i % pool_]; }
  // Checks the i-th request's result; a message when it is wrong. Only the owning thread calls.
  std::optional<std::string> check(std::uint64_t i, const Result& in) const {
    const Request& r = requests_[i % pool_];
    std::optional<Result>& passed = passed_[i % pool_];
    // --host-buffers: the result is in the request's host buffer. Compared in place with the
    // result that passed the reference before (a copy of 4 MiB per request was most of this
    // tool's own cost at large sizes, where host memory bandwidth is what everything shares).
    if (r.host_result && passed && passed->states.empty() && passed->values.size() == r.host_result->floats &&
        std::memcmp(passed->values.data(), r.host_result->data, r.host_result->floats * sizeof(float)) == 0)
      return std::nullopt;
    Result delivered;
    if (r.host_result) delivered.values.assign(r.host_result->data, r.host_result->data + r.host_result->floats);
    const Result& got = r.host_result ? delivered : in;
    if (passed && same_bits(passed->values, got.values) && same_bits(passed->states, got.states)) return std::nullopt;
    auto mismatch = reference::check(r.host_result ? without_result_buffer(r) : r, got);
    if (!mismatch) passed = got;
    return mismatch;
  }

 private:
  static Request build(const std::string& op_name, std::uint32_t size, const std::vector<float>& a,
                       const std::vector<float>& b, const std::vector<std::uint8_t>& sa,
                       const std::vector<std::uint8_t>& sb, float t, InterpolationMode mode) {
    if (op_name == "gradients") return Request::gradients(sa);
    if (op_name == "interpolate") return Request::interpolate(sa, sb, t, mode);
    if (op_name == "matmul") return Request::matmul(a, b, size, size, size);
    // DESIGN.md's chain: relu -> scale(2) -> add(y), one fused kernel; a batch of them is one
    // ragged dispatch.
    if (op_name == "chain") return chain(a).relu().scale(2.0f).add(b);
    // Any other op of the table (element-wise ops, dot): its inputs and its sample scalars.
    const Op op = *op_from_string(op_name);
    const OpInfo& info = op_info(op);
    Request r = Request::unary(op, a, info.sample_scalar[0], info.sample_scalar[1]);
    if (info.arity == 2) r.b = b;
    return r;
  }

  // --host-buffers: each pool request reads x (and b, for ops of two inputs: add ... lerp, dot,
  // matmul's B) from HostBuffers and writes its result into another (requests sharing a pool slot share them: at most pool_ in flight per thread are
  // distinct; more write the same values again).
  // With `import`, the buffers are this process's own aligned memory, imported into every device
  // (gpubatch::import_host); otherwise each is one allocation every device uses
  // (gpubatch::allocate_host). A device set places their requests on any member.
  void move_into_host_buffers(std::span<const Device> devices, bool import) {
    for (Request& r : requests_) {
      if (r.op == Op::gradients || r.op == Op::interpolate) continue;
      const auto buffer = [&](std::size_t floats) {
        return import ? imported(devices, floats) : gpubatch::allocate_host(devices, floats);
      };
      HostBuffer x = buffer(r.a.size()), out = buffer(output_bytes(r) / sizeof(float));
      std::copy(r.a.begin(), r.a.end(), x.begin());
      r.a.clear();
      r.host_a = x.memory();
      if (!r.b.empty()) {
        HostBuffer y = buffer(r.b.size());
        std::copy(r.b.begin(), r.b.end(), y.begin());
        r.b.clear();
        r.host_b = y.memory();
      }
      r.deliver_to(out);
    }
  }
  HostBuffer imported(std::span<const Device> devices, std::size_t floats) {
    std::size_t align = 0;
    for (const Device& device : devices) {
      if (device.host_import_alignment() == 0)
        throw std::runtime_error("--import: " + device.info().name + " cannot import host memory");
      align = std::max(align, device.host_import_alignment());
    }
    const std::size_t bytes = (floats * sizeof(float) + align - 1) / align * align;
    own_memory_.emplace_back(static_cast<float*>(std::aligned_alloc(align, bytes)), &std::free);
    if (!own_memory_.back()) throw std::bad_alloc();
    return gpubatch::import_host(devices, std::span<float>(own_memory_.back().get(), bytes / sizeof(float)), floats);
  }
  static Request without_result_buffer(const Request& r) {
    Request copy = r;
    copy.host_result.reset();
    return copy;
  }

  static constexpr std::size_t kMaxPool = 32;
  int pool_ = 2;  // distinct requests: up to kMaxPool, at most about 64 MiB of inputs
  // --import: the memory behind the imported buffers. Declared first of these two: the requests
  // (and their buffers) go before it.
  std::vector<std::unique_ptr<float, decltype(&std::free)>> own_memory_;
  std::vector<Request> requests_;
  mutable std::vector<std::optional<Result>> passed_;
};

struct ThreadResult {
  std::vector<double> latencies_us;
  std::vector<double> send_lag_us;  // open loop: how late the sender handed each request over
  std::uint64_t errors = 0, mismatches = 0, lost = 0;
  std::string first_error;
  // The CPU each sender ran on when it finished (sched_getcpu; merged: one per thread): a lone
  // caller on the CPU that takes the GPU's interrupts waits about three times longer (DESIGN.md
  // "The GPU's interrupt CPU"), so each run says where its callers were.
  std::vector<int> caller_cpus;
  // Each sender's core's copy speed within L1 (bench::l1_copy_ns), before the gate and after its
  // last request: the driver's submit, and so a lone caller, slows with it (host_noise.hpp).
  std::vector<int> caller_l1_copy_ns;
  // The sender's own CPU from the gate's opening to its last result (summed when merged), for
  // cpu_s_by_thread: its thread has exited by the time the run's CPU is split.
  double cpu_start_s = 0, cpu_s = 0;
};

// The timed run starts for this sender: the gate opens, its CPU clock is read.
void start_clock(bench::StartGate& gate, ThreadResult& out) {
  gate.arrive_and_wait();
  out.cpu_start_s = bench::own_thread_cpu_s();
}

void record(ThreadResult& out, const Workload& w, std::uint64_t index, std::future<Result>& future,
            Clock::time_point start) {
  try {
    const Result result = future.get();
    out.latencies_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    if (auto mismatch = w.check(index, result)) {
      if (out.mismatches++ == 0) out.first_error = *mismatch;
    }
  } catch (const std::exception& e) {
    if (out.errors++ == 0 && out.first_error.empty()) out.first_error = e.what();
  }
}

struct Pending {
  std::uint64_t index;  // which of the workload's requests
  std::future<Result> future;
  Clock::time_point start;
};

// Open loop: the completion handler stamps the time itself, so a late look by the sending thread
// never counts as latency.
struct Stamped {
  std::uint64_t index = 0;  // which of the workload's requests
  Clock::time_point scheduled;
  Clock::time_point finished;
  Result result;
  std::exception_ptr error;
  std::atomic<bool> done{false};
};
using Completion = std::function<void(std::exception_ptr, Result)>;
using SubmitFuture = std::function<std::future<Result>(Request)>;
using SubmitCallback = std::function<void(Request, Completion)>;

void record_stamped(ThreadResult& out, const Workload& w, Stamped& s) {
  if (s.error) {
    try {
      std::rethrow_exception(s.error);
    } catch (const std::exception& e) {
      if (out.errors++ == 0 && out.first_error.empty()) out.first_error = e.what();
    }
    return;
  }
  out.latencies_us.push_back(std::chrono::duration<double, std::micro>(s.finished - s.scheduled).count());
  if (auto mismatch = w.check(s.index, s.result))
    if (out.mismatches++ == 0) out.first_error = *mismatch;
}

// Open loop: send on a fixed schedule, measure from the scheduled time to the completion.
void run_open_loop(const Options& o, const Workload& w, const SubmitCallback& submit, std::uint64_t count,
                   std::atomic<std::uint64_t>& done, ThreadResult& out, bench::StartGate& gate) {
  bench::precise_timer_slack();
  // Room for every sample up front: a vector that doubles while the clock runs reallocates on
  // every sender in the same instant (they keep pace), and the H100 traces showed the whole
  // process stalling then (DESIGN.md "Where the p99 under load came from"). Then the heap, and
  // the start with the others (bench/start_gate.hpp).
  bench::reserve_touched(out.latencies_us, count);
  bench::reserve_touched(out.send_lag_us, count);
  start_clock(gate, out);
  std::deque<std::shared_ptr<Stamped>> pending;
  const auto interval = std::chrono::duration<double>(double(o.threads) / o.rate);
  auto next_send = Clock::now();
  auto reap = [&] {
    while (!pending.empty() && pending.front()->done.load(std::memory_order_acquire)) {
      record_stamped(out, w, *pending.front());
      pending.pop_front();
      done.fetch_add(1, std::memory_order_relaxed);
    }
  };
  for (std::uint64_t sent = 0; sent < count;) {
    reap();
    if (Clock::now() < next_send) {
      bench::sleep_to_next_send(next_send, std::chrono::microseconds(o.pace_us));
      continue;
    }
    auto slot = std::make_shared<Stamped>();
    slot->scheduled = next_send;
    next_send = std::chrono::time_point_cast<Clock::duration>(next_send + interval);
    slot->index = sent;
    Request r = w.make(sent++);
    pending.push_back(slot);
    // Latency counts from the scheduled time (no coordinated omission); the sender's own lag is
    // reported beside it so that a generator falling behind is not mistaken for the executor.
    out.send_lag_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - slot->scheduled).count());
    submit(std::move(r), [slot](std::exception_ptr e, Result result) {
      slot->finished = Clock::now();
      slot->result = std::move(result);
      slot->error = e;
      slot->done.store(true, std::memory_order_release);
    });
  }
  const auto give_up = Clock::now() + std::chrono::seconds(120);
  while (!pending.empty() && Clock::now() < give_up) {
    reap();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  out.lost += pending.size();  // never resolved: the executor broke its promise
  done.fetch_add(pending.size(), std::memory_order_relaxed);
}

// Closed loop: keep `inflight` requests outstanding per thread.
void run_closed_loop(const Options& o, const Workload& w, const SubmitFuture& submit, std::uint64_t count,
                     std::atomic<std::uint64_t>& done, ThreadResult& out, bench::StartGate& gate) {
  if (o.think_us > 0) bench::precise_timer_slack();
  bench::reserve_touched(out.latencies_us, count);
  start_clock(gate, out);
  std::deque<Pending> pending;
  auto finish_front = [&] {
    Pending& p = pending.front();
    if (p.future.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
      ++out.lost;  // never resolved: the executor broke its promise
    } else {
      record(out, w, p.index, p.future, p.start);
    }
    pending.pop_front();
    done.fetch_add(1, std::memory_order_relaxed);
  };
  for (std::uint64_t sent = 0; sent < count;) {
    if (static_cast<int>(pending.size()) >= o.inflight) {
      finish_front();
      if (o.think_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(o.think_us));
    }
    const std::uint64_t index = sent;
    Request r = w.make(sent++);
    const auto start = Clock::now();
    pending.push_back({index, submit(std::move(r)), start});
  }
  while (!pending.empty()) finish_front();
}

// A closed-loop slot completed by a handler: the handler stores `state` 1 and wakes the caller
// only if it sleeps (state 2), so a request that completes before its caller looks costs no
// system call; std::promise::set_value always costs one (glibc's pthread_once behind call_once
// wakes unconditionally; DESIGN.md "What a std::future costs").
struct Slot {
  std::uint64_t index = 0;
  Clock::time_point start, finished;
  Result result;
  std::exception_ptr error;
  std::atomic<std::uint32_t> state{0};  // 0 pending, 1 done, 2 the caller sleeps on it
};

// Waits for `slot` (spinning `spin_us`, then sleeping on its state word); false after 120 s.
// On the H100, 16 callers each spinning 20 us took the cores the executor needed: 3.46-3.95 M
// requests/s against 4.56-4.74 M with futures, whose callers sleep at once; the default is 0.
bool await_slot(Slot& slot, int spin_us) {
  const auto spin_until = Clock::now() + std::chrono::microseconds(spin_us);
  while (slot.state.load(std::memory_order_acquire) == 0)
    if (Clock::now() >= spin_until) break;
  const auto give_up = Clock::now() + std::chrono::seconds(120);
  std::uint32_t seen = 0;
  while ((seen = slot.state.load(std::memory_order_acquire)) != 1) {
    if (Clock::now() >= give_up) return false;
    if (seen == 0 && !slot.state.compare_exchange_strong(seen, 2, std::memory_order_acq_rel)) continue;
    const timespec slice{0, 100'000'000};
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&slot.state), FUTEX_WAIT_PRIVATE, 2, &slice, nullptr, 0);
  }
  return true;
}

// Closed loop through completion handlers (--handlers): `inflight` outstanding per thread, as
// run_closed_loop keeps futures.
void run_closed_loop_handlers(const Options& o, const Workload& w, const SubmitCallback& submit, std::uint64_t count,
                              std::atomic<std::uint64_t>& done, ThreadResult& out, bench::StartGate& gate) {
  if (o.think_us > 0) bench::precise_timer_slack();
  bench::reserve_touched(out.latencies_us, count);
  start_clock(gate, out);
  std::deque<std::shared_ptr<Slot>> pending;
  auto finish_front = [&] {
    Slot& s = *pending.front();
    if (!await_slot(s, o.handler_spin_us)) {
      ++out.lost;  // never resolved: the executor broke its promise
    } else if (s.error) {
      try {
        std::rethrow_exception(s.error);
      } catch (const std::exception& e) {
        if (out.errors++ == 0 && out.first_error.empty()) out.first_error = e.what();
      }
    } else {
      out.latencies_us.push_back(std::chrono::duration<double, std::micro>(s.finished - s.start).count());
      if (auto mismatch = w.check(s.index, s.result))
        if (out.mismatches++ == 0) out.first_error = *mismatch;
    }
    pending.pop_front();
    done.fetch_add(1, std::memory_order_relaxed);
  };
  for (std::uint64_t sent = 0; sent < count;) {
    if (static_cast<int>(pending.size()) >= o.inflight) {
      finish_front();
      if (o.think_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(o.think_us));
    }
    auto slot = std::make_shared<Slot>();
    slot->index = sent;
    Request r = w.make(sent++);
    slot->start = Clock::now();
    pending.push_back(slot);
    submit(std::move(r), [slot](std::exception_ptr e, Result result) {
      slot->finished = Clock::now();
      slot->result = std::move(result);
      slot->error = e;
      if (slot->state.exchange(1, std::memory_order_acq_rel) == 2)
        syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&slot->state), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    });
  }
  while (!pending.empty()) finish_front();
}

// Each thread's distinct requests sent once and checked against the CPU reference before the clock
// starts (errors and mismatches count in `results`): the timed run then passes a result that is
// bit-identical to one that passed, and checks any other against the reference. Before, the
// first result of each distinct request paid the reference inside the timed window: with
// 1,048,576-float requests 16 of each thread's 62 in a short run, and the device went idle while
// the callers computed references (a trace on the H100 showed no request queued for ms at a time).
void prime_checks(const std::vector<Workload>& workloads, const SubmitFuture& submit, std::vector<ThreadResult>& results) {
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < workloads.size(); ++t)
    threads.emplace_back([&, t] {
      ThreadResult primed;
      const Workload& w = workloads[t];
      for (int i = 0; i < w.pool(); ++i) {
        auto future = submit(w.make(static_cast<std::uint64_t>(i)));
        record(primed, w, static_cast<std::uint64_t>(i), future, Clock::now());
      }
      results[t].errors += primed.errors;
      results[t].mismatches += primed.mismatches;
      if (results[t].first_error.empty()) results[t].first_error = primed.first_error;
    });
  for (auto& th : threads) th.join();
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const std::size_t k = std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

// Counters of every device of the run, summed.
DeviceCounters summed_counters(const std::vector<Device>& devices) {
  DeviceCounters sum;
  for (const Device& d : devices) {
    const DeviceCounters c = d.counters();
    sum.submissions += c.submissions;
    sum.dispatches += c.dispatches;
    sum.uploads += c.uploads;
    sum.downloads += c.downloads;
    sum.bytes_up += c.bytes_up;
    sum.bytes_down += c.bytes_down;
    sum.early_results += c.early_results;
  }
  return sum;
}

// ", \"timeline_100ms\": [completions in each 100 ms of the run]", or nothing without a timeline.
std::string timeline_json(const std::vector<std::uint64_t>& cumulative) {
  if (cumulative.empty()) return {};
  std::string s = ", \"timeline_100ms\": [";
  std::uint64_t prev = 0;
  for (std::size_t i = 0; i < cumulative.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(cumulative[i] - prev);
    prev = cumulative[i];
  }
  return s + "]";
}

std::string json_escaped(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// The JSON `devices` list: each device's name, and the batches and requests of the timed run it
// took (the synchronous path: one device, its submissions).
std::string int_list_json(const std::vector<int>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string devices_report(const Options& o, const std::vector<Device>& devices, const Stats& before,
                           const Stats& after, std::uint64_t batches) {
  std::string out = "[";
  for (std::size_t i = 0; i < devices.size(); ++i) {
    std::uint64_t b = 0, r = 0, failovers = 0;
    bool live = true;
    if (o.unbatched) {
      b = batches;
      r = o.requests;
    } else if (i < after.devices.size()) {
      const DeviceStats& a = after.devices[i];
      const DeviceStats zero;
      const DeviceStats& s = i < before.devices.size() ? before.devices[i] : zero;
      b = a.batches - s.batches;
      r = a.requests - s.requests;
      failovers = a.failovers - s.failovers;
      live = a.live;
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "\"batches\": %llu, \"requests\": %llu, \"failovers\": %llu, \"live\": %s}",
                  static_cast<unsigned long long>(b), static_cast<unsigned long long>(r),
                  static_cast<unsigned long long>(failovers), live ? "true" : "false");
    out += (i ? ", " : "") + std::string("{\"index\": ") + std::to_string(i) + ", \"name\": \"" +
           json_escaped(devices[i].info().name) + "\", \"pci_address\": \"" + devices[i].info().pci_address +
           "\", \"interrupt_cpus\": " + int_list_json(devices[i].info().interrupt_cpus) + ", " + buf;
  }
  return out + "]";
}

namespace {

// The command line, first half (--help lists the options in this order): the configuration and
// the load, open or closed loop.
void add_load_options(CLI::App& app, Options& o) {
  app.add_option("--preset", o.preset,
                 "latency | balanced | throughput | adaptive | realtime (default: BatchConfig's default, adaptive)");
  app.add_option("--config", o.config_file, "TOML config file (overrides --preset)");
  app.add_option("--threads", o.threads, "submitting threads")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--requests", o.requests, "requests in total")->check(CLI::Range(1ull, 1ull << 40))->capture_default_str();
  app.add_option("--op", o.op, verifiable_ops())
      ->capture_default_str();
  app.add_option("--size", o.size, "floats per request (states for gradients/interpolate, side for matmul)")
      ->check(CLI::Range(1u, 1u << 28))->capture_default_str();
  app.add_option("--inflight", o.inflight, "requests each thread keeps outstanding (closed loop)")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--think-us", o.think_us,
                 "closed loop: each caller sleeps this long after a result before its next request (a sparse caller)")
      ->check(CLI::Range(0, 10000000));
  app.add_option("--rate", o.rate, "open loop: requests/s offered in total")->check(CLI::NonNegativeNumber);
  app.add_option("--pace-us", o.pace_us, "open loop: a sender ahead of its schedule sleeps at least this long, then sends all come due (0: until each next send, the behaviour before 2026-11-29's twenty-second session)")
      ->check(CLI::Range(0, 200))
      ->capture_default_str();
}

// The command line, second half: how requests are sent, what the run adds (fault injection, an
// idle phase, host buffers), the devices and the output.
void add_mode_options(CLI::App& app, Options& o) {
  app.add_flag("--unbatched", o.unbatched, "each request alone through the synchronous path");
  app.add_flag("--sync", o.sync,
               "each thread calls handle.run() (synchronous, polls its own result); implies --inflight 1");
  app.add_flag("--handlers", o.handlers,
               "closed loop through completion handlers (handle.submit(request, handler)) instead of "
               "std::futures")->excludes("--sync");
  app.add_option("--handler-spin-us", o.handler_spin_us,
                 "with --handlers: how long a caller polls for its oldest result before it sleeps")
      ->check(CLI::Range(0, 100000))->capture_default_str();
  app.add_flag("--resident", o.resident, "resident mode on top of the preset (BatchConfig::resident)");
  app.add_option("--lose-device-ms", o.lose_device_ms,
                 "fault injection: this many ms into the timed run one device's next wait reports "
                 "device_lost (a device set re-runs its batches on another member); the JSON gains "
                 "timeline_100ms, completions per 100 ms")
      ->check(CLI::Range(0, 600000));
  app.add_option("--idle-ms", o.idle_ms,
                 "after the run, keep the executor idle this long and report its CPU use (idle_cores_busy)")
      ->check(CLI::Range(0, 60000));
  app.add_flag("--host-buffers", o.host_buffers,
               "inputs and results in pinned host buffers, used in place (not gradients/interpolate); with --devices, "
               "each shared by every device (gpubatch::allocate_host)");
  app.add_flag("--import", o.import,
               "with --host-buffers: the buffers are this process's own aligned memory, imported "
               "(Device::import_host) instead of allocate_host's");
  app.add_option("--device", o.device, "device index or name substring");
  app.add_option("--devices", o.devices,
                 "several devices behind one executor: all, or indices / name substrings (0,1; an index may "
                 "repeat: 0,0 opens device 0 twice); default: the devices config key, GPUBATCH_DEVICES, else --device")
      ->excludes("--device");
  app.add_flag("--json", o.json, "one JSON object on stdout");
  app.add_flag("--host-probe", o.host_probe,
               "a thread of this process sleeps 100 us at a time over the timed run: how late it woke goes into \"host\" (steal is always there)");
}

// Every built-in op but custom (user GLSL has no CPU reference to verify against); false, with
// the reason on stderr, for any other.
bool verifiable_op(const Options& o) {
  const auto parsed = op_from_string(o.op);
  if (!parsed || *parsed == Op::custom) {
    std::cerr << "gpubatch-load: --op " << o.op
              << (parsed ? " cannot be verified (user kernels have no CPU reference)" : " is not an operation") << "\n";
    return false;
  }
  return true;
}

// What a user gets: BatchConfig{} (or the named preset, or the file), then GPUBATCH_* variables.
BatchConfig make_config(const Options& o) {
  BatchConfig config = !o.config_file.empty() ? BatchConfig::from_file(o.config_file)
                       : o.preset.empty()     ? BatchConfig{}
                                              : BatchConfig::preset(o.preset);
  config.apply_environment();
  if (o.resident) config.resident = true;
  config.validate();
  return config;
}

// The configuration's name in the report ("preset"), with the modes laid on top of it.
std::string preset_label_of(const Options& o) {
  std::string preset_label = o.config_file.empty() ? o.preset : o.config_file;
  if (preset_label.empty()) {
    const char* env = std::getenv("GPUBATCH_PRESET");
    preset_label = env && *env ? env : "adaptive";  // BatchConfig{} is the adaptive preset
  }
  if (o.resident) preset_label += "+resident";
  if (o.sync) preset_label += "+sync";
  if (o.handlers) preset_label += "+handlers";
  if (o.unbatched) preset_label = "unbatched";
  return preset_label;
}

// --devices, else the config's devices key (GPUBATCH_DEVICES), else the one --device.
std::vector<Device> open_run_devices(const Options& o, const BatchConfig& config) {
  DeviceOptions device_options;
  device_options.selector = o.device;
  const std::string device_list = !o.devices.empty() ? o.devices : config.devices;
  return device_list.empty() ? std::vector<Device>{Device(device_options)} : open_devices(device_list, device_options);
}

// How the senders' requests reach the devices: an executor's handle (a future, a completion
// handler, or handle.run() with --sync), or without an executor the synchronous path
// (--unbatched). The synchronous path and the name in the report use the first device;
// --host-buffers (and --import's) are shared by every device of --devices
// (gpubatch::allocate_host, import_host).
class Submitters {
  // Declared before the functions that hold its handle, so that it is destroyed after them.
  std::unique_ptr<BatchExecutor> executor_;

 public:
  Submitters(const Options& o, std::vector<Device>& devices, const BatchConfig& config)
      : o_(o), devices_(devices), config_(config) {
    if (o.unbatched)
      use_synchronous_path(devices.front());
    else
      attach(std::make_unique<BatchExecutor>(devices, config));
  }
  // A fresh executor in place of the current one, shut down first (none on the synchronous path).
  void restart() {
    if (!executor_) return;
    executor_->shutdown();
    attach(std::make_unique<BatchExecutor>(devices_, config_));
  }
  void shutdown() {
    if (executor_) executor_->shutdown();
  }
  bool batched() const { return executor_ != nullptr; }
  Stats stats() const { return executor_ ? executor_->stats() : Stats{}; }

  SubmitFuture submit;
  SubmitCallback submit_with_callback;

 private:
  void use_synchronous_path(Device& device) {
    submit_with_callback = [&device](Request r, Completion done) {
      try {
        Result result = device.run(r);
        done(nullptr, std::move(result));
      } catch (...) {
        done(std::current_exception(), Result{});
      }
    };
    submit = [callback = submit_with_callback](Request r) {
      auto p = std::make_shared<std::promise<Result>>();
      callback(std::move(r), [p](std::exception_ptr e, Result result) {
        if (e) p->set_exception(e);
        else p->set_value(std::move(result));
      });
      return p->get_future();
    };
  }
  void attach(std::unique_ptr<BatchExecutor> e) {
    executor_ = std::move(e);
    auto handle = executor_->handle();
    submit = [handle](Request r) { return handle.submit(std::move(r)); };
    if (o_.sync)
      submit = [handle](Request r) {  // returns when the result is there: a ready future
        std::promise<Result> p;
        try {
          p.set_value(handle.run(std::move(r)));
        } catch (...) {
          p.set_exception(std::current_exception());
        }
        return p.get_future();
      };
    submit_with_callback = [handle](Request r, Completion done) { handle.submit(std::move(r), std::move(done)); };
  }

  const Options& o_;
  std::vector<Device>& devices_;
  const BatchConfig& config_;
};

// Warm up: kernels built, and staging grown to full batches (a burst of max_batch_size per
// in-flight slot), so the timed run measures the steady state, not first-time allocations.
void warm_up(const Options& o, const BatchConfig& config, const Workload& w, const SubmitFuture& submit) {
  std::size_t burst = o.unbatched ? 8 : config.max_batch_size * config.max_inflight_batches;
  // Large requests: full batches of them would not fit in memory (2048 x 4 x 4 MiB); warm up
  // with at most 256 MiB of inputs (at least 8 requests).
  const std::size_t request_bytes = std::max<std::size_t>(1, input_bytes(w.make(0)));
  burst = std::min(burst, std::max<std::size_t>(8, (std::size_t{256} << 20) / request_bytes));
  if (!o.unbatched) burst = std::min(burst, config.queue_capacity_of(0));  // reject / block_for
  std::vector<std::future<Result>> warm;
  for (std::size_t i = 0; i < burst; ++i) warm.push_back(submit(w.make(i)));
  for (auto& f : warm) f.wait();
}

// One sender per thread with its share of the requests: open loop (--rate), closed loop through
// completion handlers (--handlers), or closed loop through futures.
std::vector<std::thread> start_senders(const Options& o, const std::vector<Workload>& workloads,
                                       const Submitters& submitters, std::atomic<std::uint64_t>& done,
                                       std::vector<ThreadResult>& results, bench::StartGate& gate) {
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    const std::uint64_t share = o.requests / o.threads + (static_cast<std::uint64_t>(t) < o.requests % o.threads);
    threads.emplace_back([&, t, share] {
      results[t].caller_l1_copy_ns.push_back(static_cast<int>(bench::l1_copy_ns()));
      if (o.rate > 0)
        run_open_loop(o, workloads[t], submitters.submit_with_callback, share, done, results[t], gate);
      else if (o.handlers)
        run_closed_loop_handlers(o, workloads[t], submitters.submit_with_callback, share, done, results[t], gate);
      else
        run_closed_loop(o, workloads[t], submitters.submit, share, done, results[t], gate);
      results[t].cpu_s = bench::own_thread_cpu_s() - results[t].cpu_start_s;
      results[t].caller_cpus.push_back(sched_getcpu());
      results[t].caller_l1_copy_ns.push_back(static_cast<int>(bench::l1_copy_ns()));
    });
  }
  return threads;
}

// Beside the timed run, from the clock's start: the progress bar (on a terminal, without --json)
// and, with --lose-device-ms, the fault, and completions per 100 ms to see the throughput come back.
class RunWatch {
 public:
  RunWatch(const Options& o, Clock::time_point start, const std::atomic<std::uint64_t>& done) {
    const bool show_progress = !o.json && isatty(STDOUT_FILENO);
    if (o.lose_device_ms > 0) sampler_ = std::thread([this, &o, start, &done] { sample(o, start, done); });
    if (show_progress) progress_ = std::thread([this, &o, &done] { show_progress_bar(o, done); });
  }
  // Stops both (the bar erased); the completions so far at each 100 ms of the run.
  std::vector<std::uint64_t> stop() {
    finished_ = true;
    if (progress_.joinable()) progress_.join();
    if (sampler_.joinable()) sampler_.join();
    return std::move(timeline_);
  }

 private:
  void sample(const Options& o, Clock::time_point start, const std::atomic<std::uint64_t>& done) {
    bool armed = false;
    for (auto next = start + std::chrono::milliseconds(100); !finished_.load(); next += std::chrono::milliseconds(100)) {
      std::this_thread::sleep_until(next);
      timeline_.push_back(done.load());
      if (!armed && next - start >= std::chrono::milliseconds(o.lose_device_ms)) {
        gpu::FaultInjector::arm(gpu::Fault::wait_device_lost);
        armed = true;
      }
    }
  }
  void show_progress_bar(const Options& o, const std::atomic<std::uint64_t>& done) {
    while (!finished_.load()) {
      const double frac = double(done.load()) / double(o.requests);
      const int bar = static_cast<int>(frac * 40);
      std::printf("\r[%-40s] %5.1f%%", std::string(bar, '#').c_str(), frac * 100);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::printf("\r%60s\r", "");
  }

  std::atomic<bool> finished_{false};
  std::vector<std::uint64_t> timeline_;
  std::thread sampler_, progress_;
};

// What the clock saw.
struct Timing {
  double seconds = 0;
  bench::HostNoise noise;
  double cpu_seconds = 0;
  bench::ExecutorThreadsCpu executor_cpu;  // the executor's threads' share of cpu_seconds
  std::vector<std::uint64_t> timeline;  // --lose-device-ms: completions so far at each 100 ms
};

// The timed run: every sender's requests, from the gate's opening to the last sender's end.
Timing run_timed(const Options& o, const std::vector<Workload>& workloads, const Submitters& submitters,
                 std::vector<ThreadResult>& results) {
  std::atomic<std::uint64_t> done{0};
  bench::StartGate gate(o.threads);
  std::vector<std::thread> threads = start_senders(o, workloads, submitters, done, results, gate);
  // The senders are made and ready (bench/start_gate.hpp): the clock starts now.
  gate.wait_ready();
  bench::HostNoiseProbe host(o.host_probe);
  const double cpu_start = bench::process_cpu_s();
  const auto executor_start = bench::ExecutorThreadsCpu::now();
  const auto start = Clock::now();
  gate.open();
  RunWatch watch(o, start, done);
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const bench::HostNoise noise = host.stop();
  // The price of the latency: process CPU time over the timed run (spinning shows here), the
  // host probe's own left out.
  const double cpu_seconds = bench::process_cpu_s() - cpu_start - noise.probe_cpu_s;
  const auto executor_cpu = bench::ExecutorThreadsCpu::now() - executor_start;
  return {seconds, noise, cpu_seconds, executor_cpu, watch.stop()};
}

// An idle executor (nothing in flight, nothing queued) must burn no CPU: measure it.
double measure_idle_cores_busy(const Options& o) {
  double idle_cores_busy = 0;
  if (o.idle_ms > 0) {
    const double idle_cpu_start = bench::process_cpu_s();
    std::this_thread::sleep_for(std::chrono::milliseconds(o.idle_ms));
    idle_cores_busy = (bench::process_cpu_s() - idle_cpu_start) / (o.idle_ms / 1e3);
  }
  return idle_cores_busy;
}

// Every thread's results in one: samples appended in thread order, the first error of the first
// thread that had one.
ThreadResult merged(const std::vector<ThreadResult>& results) {
  ThreadResult all;
  for (auto& r : results) {
    all.latencies_us.insert(all.latencies_us.end(), r.latencies_us.begin(), r.latencies_us.end());
    all.send_lag_us.insert(all.send_lag_us.end(), r.send_lag_us.begin(), r.send_lag_us.end());
    all.errors += r.errors;
    all.mismatches += r.mismatches;
    all.lost += r.lost;
    if (all.first_error.empty()) all.first_error = r.first_error;
    all.caller_cpus.insert(all.caller_cpus.end(), r.caller_cpus.begin(), r.caller_cpus.end());
    all.caller_l1_copy_ns.insert(all.caller_l1_copy_ns.end(), r.caller_l1_copy_ns.begin(), r.caller_l1_copy_ns.end());
    all.cpu_s += r.cpu_s;
  }
  return all;
}

// The run as the reports give it: what was measured, and the figures derived from it.
struct Report {
  Stats before, after;  // the executor's (none on the synchronous path: zeros)
  DeviceCounters counters_before, counters_after;
  Timing timing;
  double idle_cores_busy = 0;
  ThreadResult all;  // every thread's
  bool batched = false;  // an executor ran the requests
  double p50 = 0, p90 = 0, p99 = 0, max = 0, lag_p50 = 0, lag_p99 = 0, lag_max = 0;
  double submit_p50 = 0, submit_p99 = 0, mean_batch = 0, cpu_us_per_request = 0, cores_busy = 0;
  std::uint64_t batches = 0;
  bool verified = false;
  std::string preset_label, device_names, drivers, devices_json;
};

// The figures of `r` from its measurements (and the devices' names).
void derive(const Options& o, const std::vector<Device>& devices, Report& r) {
  std::vector<double>& lat = r.all.latencies_us;
  std::vector<double>& lag = r.all.send_lag_us;
  r.cpu_us_per_request = r.timing.cpu_seconds * 1e6 / double(o.requests);
  r.cores_busy = r.timing.seconds > 0 ? r.timing.cpu_seconds / r.timing.seconds : 0;
  r.p50 = percentile(lat, 0.50), r.p90 = percentile(lat, 0.90), r.p99 = percentile(lat, 0.99);
  r.max = lat.empty() ? 0 : *std::max_element(lat.begin(), lat.end());
  r.lag_p50 = percentile(lag, 0.50), r.lag_p99 = percentile(lag, 0.99);
  r.lag_max = lag.empty() ? 0 : *std::max_element(lag.begin(), lag.end());
  // The executor's own measure: from the call to its batch's device submission returning.
  const auto us = [](std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e3; };
  r.submit_p50 = us(r.after.submit_latency.p50), r.submit_p99 = us(r.after.submit_latency.p99);
  r.batches = o.unbatched ? r.counters_after.submissions - r.counters_before.submissions
                          : r.after.batches - r.before.batches;
  // Requests of the direct lane (and the resident kernel) are no batch's.
  const std::uint64_t unbatched_here = (r.after.direct - r.before.direct) + (r.after.resident - r.before.resident);
  r.mean_batch = r.batches ? double(o.requests - std::min(o.requests, unbatched_here)) / double(r.batches) : 0;
  r.verified = r.all.errors == 0 && r.all.mismatches == 0 && r.all.lost == 0 && lat.size() == o.requests;
  r.devices_json = devices_report(o, devices, r.before, r.after, r.batches);
  for (const Device& each : devices) r.device_names += (r.device_names.empty() ? "" : ", ") + each.info().name;
  // The machine's driver beside every figure (docs/BENCHMARKS.md).
  for (const Device& each : devices) r.drivers += (r.drivers.empty() ? "" : ", ") + each.info().driver;
}

// --json: one object on stdout (the fields are the contract in docs/DESIGN.md).
void print_json(const Options& o, const Report& r) {
  const Stats& after = r.after;
  const Stats& before = r.before;
  const DeviceCounters& counters_after = r.counters_after;
  const DeviceCounters& counters_before = r.counters_before;
  char submit_json[96] = "null";  // the synchronous path has no executor
  if (r.batched)
    std::snprintf(submit_json, sizeof submit_json, "{\"p50\": %.2f, \"p99\": %.2f}", r.submit_p50, r.submit_p99);
  const auto d = [&](auto FlushCounts::*f) { return after.flushes.*f - before.flushes.*f; };
  std::printf(
      "{\"device\": \"%s\", \"driver\": \"%s\", \"preset\": \"%s\", \"op\": \"%s\", \"size\": %u, \"threads\": %d, "
      "\"inflight\": %d, \"think_us\": %d, \"rate\": %.1f, \"pace_us\": %d, \"requests\": %llu, \"seconds\": %.6f, \"throughput_rps\": %.1f, "
      "\"latency_us\": {\"p50\": %.2f, \"p90\": %.2f, \"p99\": %.2f, \"max\": %.2f}, \"submit_us\": %s, "
      "\"send_lag_us\": {\"p50\": %.2f, \"p99\": %.2f, \"max\": %.2f}, "
      "\"batches\": %llu, \"mean_batch_size\": %.2f, "
      "\"flushes\": {\"size\": %llu, \"deadline\": %llu, \"idle\": %llu, \"shutdown\": %llu}, "
      "\"transfers\": {\"uploads\": %llu, \"downloads\": %llu}, \"bytes\": {\"up\": %llu, \"down\": %llu}, \"early_results\": %llu, "
      "\"cost_model\": {\"fixed_us\": %.2f, \"us_per_kib\": %.4f}, "
      "\"cpu_us_per_request\": %.3f, \"cores_busy\": %.3f, \"cpu_s_by_thread\": %s, \"idle_ms\": %d, \"idle_cores_busy\": %.4f, "
      "\"resident\": %llu, \"direct\": %llu, \"split\": %llu, \"caller_completions\": %llu, \"strand_runs\": %llu, \"errors\": %llu, \"mismatches\": %llu, \"lost\": %llu, \"verified\": %s, "
      "\"host\": %s, \"caller_cpus\": %s, \"caller_l1_copy_ns\": %s, \"devices\": %s%s}\n",
      json_escaped(r.device_names).c_str(), json_escaped(r.drivers).c_str(), r.preset_label.c_str(), o.op.c_str(), o.size, o.threads, o.inflight, o.think_us, o.rate, o.pace_us,
      static_cast<unsigned long long>(o.requests), r.timing.seconds, double(o.requests) / r.timing.seconds, r.p50, r.p90, r.p99, r.max,
      submit_json,
      r.lag_p50, r.lag_p99, r.lag_max, static_cast<unsigned long long>(r.batches), r.mean_batch,
      static_cast<unsigned long long>(d(&FlushCounts::size)), static_cast<unsigned long long>(d(&FlushCounts::deadline)),
      static_cast<unsigned long long>(d(&FlushCounts::idle)), static_cast<unsigned long long>(d(&FlushCounts::shutdown)),
      static_cast<unsigned long long>(counters_after.uploads - counters_before.uploads),
      static_cast<unsigned long long>(counters_after.downloads - counters_before.downloads),
      static_cast<unsigned long long>(counters_after.bytes_up - counters_before.bytes_up),
      static_cast<unsigned long long>(counters_after.bytes_down - counters_before.bytes_down),
      static_cast<unsigned long long>(counters_after.early_results - counters_before.early_results),
      double(after.cost_fixed.count()) / 1e3, after.cost_ns_per_byte * 1024.0 / 1e3,
      r.cpu_us_per_request, r.cores_busy, bench::cpu_split_json(r.timing.cpu_seconds, r.all.cpu_s, r.timing.executor_cpu).c_str(), o.idle_ms, r.idle_cores_busy,
      static_cast<unsigned long long>(after.resident - before.resident),
      static_cast<unsigned long long>(after.direct - before.direct),
      static_cast<unsigned long long>(after.split - before.split),
      static_cast<unsigned long long>(after.caller_completions - before.caller_completions),
      static_cast<unsigned long long>(after.strand_runs - before.strand_runs),
      static_cast<unsigned long long>(r.all.errors), static_cast<unsigned long long>(r.all.mismatches),
      static_cast<unsigned long long>(r.all.lost), r.verified ? "true" : "false", r.timing.noise.json().c_str(),
      int_list_json(r.all.caller_cpus).c_str(), int_list_json(r.all.caller_l1_copy_ns).c_str(), r.devices_json.c_str(),
      timeline_json(r.timing.timeline).c_str());
}

// Without --json: the same run for a person to read.
void print_summary(const Options& o, const BatchConfig& config, std::size_t device_count, const Report& r) {
  const Stats& after = r.after;
  const auto d = [&](auto FlushCounts::*f) { return after.flushes.*f - r.before.flushes.*f; };
  std::printf("device      %s\n", r.device_names.c_str());
  std::printf("workload    %s, %u per request, %d threads x %s, %llu requests\n", o.op.c_str(), o.size,
              o.threads, o.rate > 0 ? ("open loop " + std::to_string(o.rate) + "/s").c_str()
                                    : (std::to_string(o.inflight) + " in flight").c_str(),
              static_cast<unsigned long long>(o.requests));
  std::printf("preset      %s\n", r.preset_label.c_str());
  std::printf("throughput  %.0f requests/s (%.3f s)\n", double(o.requests) / r.timing.seconds, r.timing.seconds);
  std::printf("latency us  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n", r.p50, r.p90, r.p99, r.max);
  if (r.batched)
    std::printf("submit us   p50 %.1f  p99 %.1f (the call to its batch's device submission returning)\n",
                r.submit_p50, r.submit_p99);
  std::printf("cpu         %.2f us per request, %.2f cores busy (process CPU time over the run)\n",
              r.cpu_us_per_request, r.cores_busy);
  std::printf("cpu s       %s (by thread)\n", bench::cpu_split_json(r.timing.cpu_seconds, r.all.cpu_s, r.timing.executor_cpu).c_str());
  std::printf("host        %s\n", r.timing.noise.json().c_str());
  if (o.idle_ms > 0)
    std::printf("idle        %.4f cores busy over %d ms with nothing to do\n", r.idle_cores_busy, o.idle_ms);
  if (o.rate > 0)
    std::printf("send lag us p50 %.1f  p99 %.1f  max %.1f (the generator's own lateness, included above)\n",
                r.lag_p50, r.lag_p99, r.lag_max);
  std::printf("batches     %llu, mean %.1f requests; flushes size %llu deadline %llu idle %llu shutdown %llu\n",
              static_cast<unsigned long long>(r.batches), r.mean_batch,
              static_cast<unsigned long long>(d(&FlushCounts::size)), static_cast<unsigned long long>(d(&FlushCounts::deadline)),
              static_cast<unsigned long long>(d(&FlushCounts::idle)), static_cast<unsigned long long>(d(&FlushCounts::shutdown)));
  if (device_count > 1)
    for (std::size_t i = 0; i < after.devices.size(); ++i)
      std::printf("device %-4zu %llu batches, %llu requests, %llu failovers%s\n", i,
                  static_cast<unsigned long long>(after.devices[i].batches),
                  static_cast<unsigned long long>(after.devices[i].requests),
                  static_cast<unsigned long long>(after.devices[i].failovers),
                  after.devices[i].live ? "" : " (lost)");
  if (config.resident)
    std::printf("resident    %llu requests served by the resident kernel\n",
                static_cast<unsigned long long>(after.resident - r.before.resident));
  std::printf("verified    %s (errors %llu, mismatches %llu, lost %llu)%s%s\n", r.verified ? "yes" : "NO",
              static_cast<unsigned long long>(r.all.errors), static_cast<unsigned long long>(r.all.mismatches),
              static_cast<unsigned long long>(r.all.lost), r.all.first_error.empty() ? "" : ": ",
              r.all.first_error.c_str());
}

// The whole run after the command line: set up, warm up, the timed run, the report. The exit
// code: 0 when every result was verified.
int run(const Options& o) {
  const BatchConfig config = make_config(o);
  Report r;
  r.preset_label = preset_label_of(o);
  std::vector<Device> devices = open_run_devices(o, config);
  Submitters submitters(o, devices, config);
  // Lives to the end of run(), past the executors' shutdown: with --import its memory must stay
  // allocated while an executor may still hold a request that reads it.
  Workload w(o, 999, devices);
  warm_up(o, config, w, submitters.submit);
  std::vector<Workload> workloads;
  for (int t = 0; t < o.threads; ++t) workloads.emplace_back(o, 1000 + t, devices);
  std::vector<ThreadResult> results(o.threads);
  prime_checks(workloads, submitters.submit, results);
  // The timed run gets an executor of its own, so that its latency percentiles (submit_us) hold
  // only the timed requests; the device's staging and kernels stay warm.
  submitters.restart();
  r.before = submitters.stats();
  r.counters_before = summed_counters(devices);
  r.timing = run_timed(o, workloads, submitters, results);
  r.idle_cores_busy = measure_idle_cores_busy(o);
  submitters.shutdown();
  r.after = submitters.stats();
  r.counters_after = summed_counters(devices);
  r.all = merged(results);
  r.batched = submitters.batched();
  derive(o, devices, r);
  if (o.json)
    print_json(o, r);
  else
    print_summary(o, config, devices.size(), r);
  return r.verified ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"gpubatch-load: load generator for the gpubatch executor"};
  add_load_options(app, o);
  add_mode_options(app, o);
  CLI11_PARSE(app, argc, argv);
  // The synchronous path blocks in the call: each thread has exactly one request outstanding.
  if (o.unbatched || o.sync) o.inflight = 1;
  if (o.import) o.host_buffers = true;
  if (!verifiable_op(o)) return 2;
  try {
    return run(o);
  } catch (const Error& e) {
    std::cerr << "gpubatch-load: " << e.what() << "\n";
    return 1;
  }
}

// The executor's own cost per request, without a GPU: a closed-loop crowd (like gpubatch-load
// --threads N --inflight M --op relu) over a null device that does no per-request work on the
// strand, and the CPU time of the executor's threads per request, read from their per-thread
// CPU clocks. The strand ("gpubatch-strand") is one thread: its time per request caps the
// executor's rate (issue 11: 16 threads of 256-float relu on the H100).
//
//   gpubatch-executor-cost --threads 2 --inflight 1024 --requests 2000000 --size 256 --reps 5
//
// Prints one line per repetition: requests/s, strand ns per request, completion threads' ns per
// request, mean batch size. The null device completes a batch `--delay-us` after its submit, so
// that batches form as they do behind a busy GPU; take_result fills the result (reusing the
// input's buffer, as the executor hands it over) on the completion threads.
//
//   gpubatch-executor-cost --lone --requests 200000 --size 256 --delay-us 0 --reps 5
//
// A lone caller instead (issue 11): one thread, one future at a time, each round trip timed, and
// beside each the same request straight on the null device (submit, wait, take the result: what
// Device::run does around the GPU). The difference of the two medians is what the executor adds
// to a lone future on any device, with no GPU's time and jitter in it.
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpubatch/batch_device.hpp"
#include "gpubatch/executor.hpp"
#include "thread_cpu.hpp"

namespace {

using Clock = std::chrono::steady_clock;

class NullBatch final : public gpubatch::detail::InFlightBatch {
 public:
  NullBatch(Clock::time_point done, std::vector<std::size_t> sizes) : done_(done), sizes_(std::move(sizes)) {}
  bool wait_for(std::chrono::nanoseconds timeout) override {
    const auto until = std::min(done_, Clock::now() + timeout);
    while (Clock::now() < until) std::this_thread::sleep_until(until);
    return Clock::now() >= done_;
  }
  void take_result(std::size_t index, gpubatch::Result& out) override { out.values.resize(sizes_[index]); }

 private:
  Clock::time_point done_;
  std::vector<std::size_t> sizes_;
};

// Reads only what a planner reads of each request (its op and length); no copies.
class NullDevice final : public gpubatch::detail::BatchDevice {
 public:
  explicit NullDevice(std::chrono::microseconds delay) : delay_(delay) {}
  std::string name() const override { return "null device"; }
  std::size_t max_request_bytes() const override { return std::size_t{1} << 30; }
  gpubatch::detail::TransferTotals transfers() const override { return {}; }
  std::unique_ptr<gpubatch::detail::InFlightBatch> submit(
      std::span<const gpubatch::Request* const> requests) override {
    std::vector<std::size_t> sizes(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) sizes[i] = requests[i]->a.size();
    return std::make_unique<NullBatch>(Clock::now() + delay_, std::move(sizes));
  }

 private:
  std::chrono::microseconds delay_;
};

// The executor's threads' CPU clocks: bench/thread_cpu.hpp (this program's own name is not an
// executor thread's: comm keeps 15 characters, "gpubatch-execut").
double threads_cpu_ns(const std::string& wanted) { return gpubatch::bench::threads_cpu_s(wanted) * 1e9; }

struct Options {
  std::size_t threads = 2, inflight = 1024, requests = 2000000, size = 256, reps = 3;
  unsigned delay_us = 100;
  bool handlers = false;  // completion handlers instead of futures
  bool lone = false;      // one caller, one future at a time, beside the null device's own call
};

double own_cpu_ns() { return gpubatch::bench::own_thread_cpu_s() * 1e9; }

// One caller: keeps `inflight` futures outstanding; adds its CPU time to `cpu_ns`.
void crowd(gpubatch::BatchedGpuHandle handle, const Options& o, std::size_t count, double& cpu_ns) {
  const std::vector<float> x(o.size, 1.0f);
  std::deque<std::future<std::vector<float>>> outstanding;
  for (std::size_t i = 0; i < count; ++i) {
    if (outstanding.size() >= o.inflight) {
      outstanding.front().get();
      outstanding.pop_front();
    }
    outstanding.push_back(handle.relu(x));
  }
  for (auto& f : outstanding) f.get();
  cpu_ns = own_cpu_ns();
}

// The same through completion handlers. A caller's ring of `inflight` slots holds one word per
// outstanding request: the handler sets it to 1 and wakes the caller only when it sleeps on that
// word (2), and the caller waits for its oldest request's word before it reuses the slot, as
// gpubatch-load --handlers does. With the library resolving a batch newest first, a caller thus
// wakes once per batch, as a future's caller does, and its CPU is what a caller of the handler
// path spends (before the thirty-eighth session the callers polled with yield: their CPU was the
// poll's). The ring outlives the executor, whose shutdown waits for every handler.
using HandlerRing = std::unique_ptr<std::atomic<std::uint32_t>[]>;

void await_word(std::atomic<std::uint32_t>& word) {
  std::uint32_t seen;
  while ((seen = word.load(std::memory_order_acquire)) != 1) {
    if (seen == 0 && !word.compare_exchange_strong(seen, 2, std::memory_order_acq_rel)) continue;
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, 2, nullptr, nullptr, 0);
  }
}

void crowd_handlers(gpubatch::BatchedGpuHandle handle, const Options& o, std::size_t count, double& cpu_ns,
                    std::atomic<std::uint32_t>* ring) {
  const std::vector<float> x(o.size, 1.0f);
  for (std::size_t i = 0; i < count; ++i) {
    std::atomic<std::uint32_t>& word = ring[i % o.inflight];
    if (i >= o.inflight) await_word(word);
    word.store(0, std::memory_order_relaxed);
    handle.relu(x, [&word](std::exception_ptr, std::vector<float>) {
      if (word.exchange(1, std::memory_order_acq_rel) == 2)
        syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    });
  }
  for (std::size_t i = count > o.inflight ? count - o.inflight : 0; i < count; ++i) await_word(ring[i % o.inflight]);
  cpu_ns = own_cpu_ns();
}

void one_rep(const Options& o) {
  std::vector<HandlerRing> rings(o.threads);  // before the executor: see crowd_handlers
  if (o.handlers)
    for (auto& r : rings) r = std::make_unique<std::atomic<std::uint32_t>[]>(o.inflight);
  gpubatch::BatchExecutor executor(std::make_shared<NullDevice>(std::chrono::microseconds(o.delay_us)),
                                   gpubatch::BatchConfig{});
  const auto before = executor.stats();
  const double strand0 = threads_cpu_ns("gpubatch-strand"), done0 = threads_cpu_ns("gpubatch-done");
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  std::vector<double> callers(o.threads);
  for (std::size_t t = 0; t < o.threads; ++t)
    threads.emplace_back([&, t, handle = executor.handle()] {
      if (o.handlers) crowd_handlers(handle, o, o.requests / o.threads, callers[t], rings[t].get());
      else crowd(handle, o, o.requests / o.threads, callers[t]);
    });
  for (auto& t : threads) t.join();
  double caller = 0;
  for (double c : callers) caller += c;
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double strand = threads_cpu_ns("gpubatch-strand") - strand0, done = threads_cpu_ns("gpubatch-done") - done0;
  const auto after = executor.stats();
  const double n = double(o.requests / o.threads * o.threads);
  const auto batches = after.batches - before.batches;
  std::printf("rps %.0f  strand_ns_per_req %.1f  done_ns_per_req %.1f  caller_ns_per_req %.1f  mean_batch %.0f\n",
              n / seconds, strand / n, done / n, caller / n, batches ? n / double(batches) : 0.0);
  std::fflush(stdout);
}

double percentile(std::vector<double>& v, double p) {
  const auto k = static_cast<std::size_t>(p * double(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// The null device's own round trip for one request, as Device::run makes it around the GPU.
void direct_call(NullDevice& device, const std::vector<float>& x) {
  gpubatch::Request request = gpubatch::Request::relu(x);
  const gpubatch::Request* one[] = {&request};
  auto batch = device.submit(one);
  batch->wait_for(std::chrono::seconds(1));
  gpubatch::Result result;
  batch->take_result(0, result);
  if (result.values.size() != x.size()) std::abort();
}

void lone_rep(const Options& o) {
  auto device = std::make_shared<NullDevice>(std::chrono::microseconds(o.delay_us));
  const auto made0 = Clock::now();
  gpubatch::BatchExecutor executor(device, gpubatch::BatchConfig{});
  const double made_ms = std::chrono::duration<double, std::milli>(Clock::now() - made0).count();
  auto handle = executor.handle();
  const std::vector<float> x(o.size, 1.0f);
  std::vector<double> future_ns, direct_ns;
  future_ns.reserve(o.requests);
  direct_ns.reserve(o.requests);
  for (std::size_t i = 0; i < o.requests; ++i) {  // interleaved, so both see the same machine
    auto t0 = Clock::now();
    if (handle.relu(x).get().size() != x.size()) std::abort();
    auto t1 = Clock::now();
    direct_call(*device, x);
    auto t2 = Clock::now();
    future_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    direct_ns.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count());
  }
  const double f50 = percentile(future_ns, 0.5), d50 = percentile(direct_ns, 0.5);
  std::printf("lone future p50 %.0f p99 %.0f ns  direct p50 %.0f p99 %.0f ns  executor adds %.0f ns at p50  "
              "caller_completions %llu of %zu  executor made in %.1f ms\n",
              f50, percentile(future_ns, 0.99), d50, percentile(direct_ns, 0.99), f50 - d50,
              static_cast<unsigned long long>(executor.stats().caller_completions), o.requests, made_ms);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"gpubatch-executor-cost: the executor's CPU per request over a null device"};
  app.add_option("--threads", o.threads);
  app.add_option("--inflight", o.inflight);
  app.add_option("--requests", o.requests);
  app.add_option("--size", o.size);
  app.add_option("--reps", o.reps);
  app.add_option("--delay-us", o.delay_us, "the null device's time per batch");
  app.add_flag("--handlers", o.handlers, "completion handlers instead of futures");
  app.add_flag("--lone", o.lone, "one caller, one future at a time, beside the null device's own call");
  CLI11_PARSE(app, argc, argv);
  for (std::size_t r = 0; r < o.reps; ++r) o.lone ? lone_rep(o) : one_rep(o);
  return 0;
}

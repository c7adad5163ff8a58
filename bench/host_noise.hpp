#pragma once
// What the host did to a run, reported beside its latencies by gpubatch-load and gpubatch-mix
// (`"host"` in their JSON): the steal time of the machine's vCPUs over the run (the hypervisor
// running something else on them: on the H100 VMs, 70-130 ms in a loaded 3 s run and none idle,
// BENCHMARKS.md third session of 2026-11-27), and, with --host-probe, how late a thread of the
// load generator's own process woke from 100 us sleeps while the run lasted. A p99 of 20 ms beside
// a probe that woke 15 ms late is the machine's; one beside a probe that never woke 1 ms late is
// the executor's. gpubatch-stall-probe is the same probe in a process of its own. The process's
// page faults and involuntary context switches over the run say what the stalls may be: memory
// mapped and unmapped under every thread (faults), or more runnable threads than cores (switches).
// l1_copy_ns(): how fast the calling thread's core copies within its L1 cache. On the H200 VMs
// that speed halves for seconds at a time while the clock holds (a busy sibling hyperthread of
// the host), and the driver's vkQueueSubmit slows with it (BENCHMARKS.md, thirty-second session):
// gpubatch-load measures it on each sender before and after the run, so that a lone caller's
// figure is read with it.
#include <pthread.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace gpubatch::bench {

// An open loop's sender sleeps until each send: with Linux's default timer slack (50 us) it woke
// 56-64 us late at p50 on the H100 VMs at sparse rates, and that lateness counts in the measured
// latency (from the scheduled send). Senders sleep with 1 ns of slack, as the executor's own
// threads do; `send_lag_us` still reports what lateness is left.
inline void precise_timer_slack() { prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); }

// An open loop's sender ahead of its schedule sleeps until its next send, but for at least `pace`
// (--pace-us), then sends every request come due since, each still timed from its own scheduled
// send. With pace 0 a sender at 125,000 requests/s (2 M/s from 16 threads) sleeps for every
// request or few, and the sleeps' wake-ups are the generator's CPU, not the executor's: on the
// H200 the open loop took 7-10 us of process CPU a request where the closed loop takes 2.3 us
// (BENCHMARKS.md, twenty-second session). At most 200 us at a time, so that results are reaped.
inline void sleep_to_next_send(std::chrono::steady_clock::time_point next, std::chrono::microseconds pace) {
  const auto now = std::chrono::steady_clock::now();
  std::this_thread::sleep_until(std::min(std::max(next, now + pace), now + std::chrono::microseconds(200)));
}

// The "steal" column of /proc/stat's cpu line (all CPUs), in clock ticks; 0 where unreadable.
inline long long steal_ticks() {
  std::ifstream f("/proc/stat");
  std::string line;
  if (!std::getline(f, line)) return 0;
  std::istringstream in(line);
  std::string cpu;
  long long v[8] = {};
  in >> cpu;
  for (long long& x : v) in >> x;
  return v[7];
}

inline double ticks_to_ms(long long ticks) {
  const long hz = sysconf(_SC_CLK_TCK);
  return hz > 0 ? double(ticks) * 1000.0 / double(hz) : 0.0;
}

// p in [0, 1] of `v` (sorted here); 0 for none.
inline double percentile_of(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// The p50 over 101 tries of eight 4 KiB copies between two buffers in L1, in ns.
inline double l1_copy_ns() {
  alignas(64) static thread_local char a[4096], b[4096];
  std::vector<double> ns;
  ns.reserve(101);
  for (int t = 0; t < 101; ++t) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 8; ++i) {
      std::memcpy(i & 1 ? a : b, i & 1 ? b : a, sizeof a);
      asm volatile("" ::: "memory");  // each copy is made
    }
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
  }
  return percentile_of(std::move(ns), 0.5);
}

struct HostNoise {
  double steal_ms = 0;
  bool probed = false;  // the figures below only with a probe thread
  std::size_t wakeups = 0, stalls_over_1ms = 0;
  double late_p99_us = 0, late_max_us = 0;
  double probe_cpu_s = 0;  // the probe thread's own CPU time (to leave out of the run's)
  long minor_faults = 0, major_faults = 0, involuntary_switches = 0;  // the process's, over the run

  std::string json() const {
    char buf[384];
    int n = std::snprintf(buf, sizeof buf, "{\"steal_ms\": %.1f, \"minor_faults\": %ld, \"major_faults\": %ld, "
                          "\"involuntary_switches\": %ld", steal_ms, minor_faults, major_faults, involuntary_switches);
    if (probed)
      n += std::snprintf(buf + n, sizeof buf - std::size_t(n),
                         ", \"probe_wakeups\": %zu, \"probe_late_p99_us\": %.1f, \"probe_late_max_us\": %.1f, "
                         "\"probe_stalls_over_1ms\": %zu", wakeups, late_p99_us, late_max_us, stalls_over_1ms);
    std::snprintf(buf + n, sizeof buf - std::size_t(n), "}");
    return buf;
  }
};

// Measures from construction to stop(): steal always, a probe thread (sleeping `period` at a
// time, timer slack 1 ns, as the executor's threads sleep) when `probe`.
class HostNoiseProbe {
 public:
  explicit HostNoiseProbe(bool probe, std::chrono::microseconds period = std::chrono::microseconds(100))
      : steal0_(steal_ticks()) {
    getrusage(RUSAGE_SELF, &usage0_);
    if (probe) thread_ = std::thread([this, period] { run(period); });
  }
  HostNoiseProbe(const HostNoiseProbe&) = delete;
  HostNoiseProbe& operator=(const HostNoiseProbe&) = delete;
  ~HostNoiseProbe() { stop(); }

  HostNoise stop() {
    if (!stopped_) {
      stopped_ = true;
      result_.steal_ms = ticks_to_ms(steal_ticks() - steal0_);
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      result_.minor_faults = u.ru_minflt - usage0_.ru_minflt;
      result_.major_faults = u.ru_majflt - usage0_.ru_majflt;
      result_.involuntary_switches = u.ru_nivcsw - usage0_.ru_nivcsw;
      done_.store(true, std::memory_order_relaxed);
      if (thread_.joinable()) {
        thread_.join();
        result_.probed = true;
        result_.wakeups = late_us_.size();
        result_.late_p99_us = percentile_of(late_us_, 0.99);
        result_.late_max_us = late_us_.empty() ? 0 : *std::max_element(late_us_.begin(), late_us_.end());
        result_.stalls_over_1ms = static_cast<std::size_t>(
            std::count_if(late_us_.begin(), late_us_.end(), [](double x) { return x > 1000.0; }));
      }
    }
    return result_;
  }

 private:
  using Clock = std::chrono::steady_clock;

  void run(std::chrono::microseconds period) {
    pthread_setname_np(pthread_self(), "host-probe");
    precise_timer_slack();
    late_us_.reserve(1 << 20);  // nothing grows while the clock runs (BENCHMARKS.md)
    for (auto next = Clock::now() + period; !done_.load(std::memory_order_relaxed); next += period) {
      std::this_thread::sleep_until(next);
      const auto now = Clock::now();
      if (late_us_.size() < late_us_.capacity())
        late_us_.push_back(std::chrono::duration<double, std::micro>(now - next).count());
      if (now > next + period) next = now;  // a long stall: do not replay the missed wake-ups
    }
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    result_.probe_cpu_s = double(t.tv_sec) + double(t.tv_nsec) / 1e9;
  }

  const long long steal0_;
  rusage usage0_{};
  std::atomic<bool> done_{false};
  bool stopped_ = false;
  std::vector<double> late_us_;
  HostNoise result_;
  std::thread thread_;
};

}  // namespace gpubatch::bench

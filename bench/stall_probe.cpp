// gpubatch-stall-probe: how late a sleeping thread wakes up on this machine, with nothing of
// gpubatch in the process. Run it alone and beside a load (another process) to tell where a p99
// comes from: stalls that hit every probe thread at the same instant while the machine is idle
// are the machine's (the hypervisor, the host); stalls only under load are CPU contention; the
// executor's own stalls would not show here at all (docs/BENCHMARKS.md, issue 14's p99).
//
//   gpubatch-stall-probe [--threads N] [--seconds S] [--period-us P] [--stall-us U]
//
// Each thread sleeps until a deadline P us ahead, again and again, and records how late it woke.
// Output: one JSON object: per-thread lateness p50/p99/max, the wake-ups later than U us, how many
// of those overlapped in time on at least half the threads ("together"), and the host's steal and
// the process's involuntary context switches over the run.
#include <CLI/CLI.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "host_noise.hpp"

using Clock = std::chrono::steady_clock;

namespace {

struct Stall {
  Clock::time_point from, to;  // the intended wake-up and the real one
};

struct ThreadResult {
  std::vector<double> late_us;
  std::vector<Stall> stalls;
};

void probe(Clock::time_point end, std::chrono::microseconds period, std::chrono::microseconds stall,
           ThreadResult& out) {
  out.late_us.reserve(1 << 20);
  for (auto next = Clock::now() + period; next < end; next += period) {
    std::this_thread::sleep_until(next);
    const auto now = Clock::now();
    out.late_us.push_back(std::chrono::duration<double, std::micro>(now - next).count());
    if (now - next > stall) out.stalls.push_back({next, now});
    if (now > next + period) next = now;  // a long stall: do not replay the missed wake-ups
  }
}

using gpubatch::bench::steal_ticks;

// Stalls of one thread that overlap stalls of at least `need` threads (itself included).
std::size_t together(const std::vector<ThreadResult>& all, std::size_t need) {
  std::size_t count = 0;
  for (const Stall& s : all.front().stalls) {
    std::size_t hit = 0;
    for (const ThreadResult& t : all)
      for (const Stall& o : t.stalls)
        if (o.from < s.to && s.from < o.to) {
          ++hit;
          break;
        }
    if (hit >= need) ++count;
  }
  return count;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpubatch-stall-probe: how late sleeping threads wake up"};
  int threads = 4;
  double seconds = 5;
  int period_us = 100;
  int stall_us = 1000;
  app.add_option("--threads", threads, "probe threads")->check(CLI::Range(1, 256));
  app.add_option("--seconds", seconds, "how long")->check(CLI::Range(0.01, 3600.0));
  app.add_option("--period-us", period_us, "sleep per wake-up")->check(CLI::Range(1, 1000000));
  app.add_option("--stall-us", stall_us, "a wake-up later than this is a stall")->check(CLI::Range(1, 10000000));
  CLI11_PARSE(app, argc, argv);

  std::vector<ThreadResult> results(threads);
  const long long steal0 = steal_ticks();
  rusage ru0{};
  getrusage(RUSAGE_SELF, &ru0);
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back(probe, end, std::chrono::microseconds(period_us), std::chrono::microseconds(stall_us),
                        std::ref(results[t]));
  }
  rusage ru1{};
  getrusage(RUSAGE_SELF, &ru1);
  std::vector<double> all;
  double worst = 0;
  std::size_t stalls = 0;
  std::string per_thread;
  for (const ThreadResult& r : results) {
    all.insert(all.end(), r.late_us.begin(), r.late_us.end());
    const double mx = r.late_us.empty() ? 0 : *std::max_element(r.late_us.begin(), r.late_us.end());
    worst = std::max(worst, mx);
    stalls += r.stalls.size();
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%.1f", per_thread.empty() ? "" : ", ", mx);
    per_thread += buf;
  }
  std::printf(
      "{\"probe\": \"stall\", \"threads\": %d, \"seconds\": %.2f, \"period_us\": %d, \"stall_us\": %d, "
      "\"wakeups\": %zu, \"late_us\": {\"p50\": %.1f, \"p99\": %.1f, \"p999\": %.1f, \"max\": %.1f}, "
      "\"max_late_us_per_thread\": [%s], \"stalls\": %zu, \"stalls_together\": %zu, "
      "\"steal_ticks\": %lld, \"involuntary_switches\": %ld}\n",
      threads, seconds, period_us, stall_us, all.size(), gpubatch::bench::percentile_of(all, 0.5), gpubatch::bench::percentile_of(all, 0.99),
      gpubatch::bench::percentile_of(all, 0.999), worst, per_thread.c_str(), stalls,
      together(results, std::max<std::size_t>(2, results.size() / 2)), steal_ticks() - steal0,
      ru1.ru_nivcsw - ru0.ru_nivcsw);
  return 0;
}

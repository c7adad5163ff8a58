#pragma once
// CPU time of this process's threads, read from their per-thread CPU clocks (nanoseconds; the
// ticks in /proc/PID/task/*/stat are 10 ms). gpubatch-load splits a timed run's CPU by them
// (`cpu_s_by_thread`) and gpubatch-executor-cost its executor's threads' cost per request. A
// thread that has exited is no longer listed, so a caller's thread reads its own clock
// (own_thread_cpu_s) before it ends.
#include <dirent.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace gpubatch::bench {

// CPU seconds of the calling thread so far.
inline double own_thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Calls each(name, cpu_seconds) for every live thread of this process (comm keeps 15 characters).
template <typename Each>
void for_each_thread_cpu_s(Each each) {
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
    // Linux's per-thread CPU clock of any thread of this process (MAKE_THREAD_CPUCLOCK).
    const clockid_t clock = static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6);
    timespec ts{};
    if (clock_gettime(clock, &ts) == 0) each(name, double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9);
  }
  closedir(dir);
}

// CPU seconds of every live thread of this process named `wanted`.
inline double threads_cpu_s(const std::string& wanted) {
  double total = 0;
  for_each_thread_cpu_s([&](const std::string& name, double s) {
    if (name == wanted) total += s;
  });
  return total;
}

// The executor's threads by role, CPU seconds so far (their names: src/executor/).
struct ExecutorThreadsCpu {
  double strand = 0, completion = 0, packer = 0, other = 0;  // other: bulk lane, expiry, resident ring

  static ExecutorThreadsCpu now() {  // one pass over the process's threads
    ExecutorThreadsCpu c;
    for_each_thread_cpu_s([&](const std::string& name, double s) {
      if (name == "gpubatch-strand") c.strand += s;
      else if (name == "gpubatch-done") c.completion += s;
      else if (name == "gpubatch-pack") c.packer += s;
      else if (name == "gpubatch-bulk" || name == "gpubatch-expiry" || name == "gpubatch-ring") c.other += s;
    });
    return c;
  }
  ExecutorThreadsCpu operator-(const ExecutorThreadsCpu& o) const {
    return {strand - o.strand, completion - o.completion, packer - o.packer, other - o.other};
  }
  double total() const { return strand + completion + packer + other; }
};

// CPU time (user + system) of every thread of this process so far, in seconds.
inline double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto s = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// A timed run's process CPU (`process_s`) split by thread, as the tools' JSON gives it
// (`cpu_s_by_thread`): the senders' own clocks, the executor's threads by role, and the rest (the
// device's threads on lavapipe, the driver's, the tool's other threads), in seconds.
inline std::string cpu_split_json(double process_s, double callers_s, const ExecutorThreadsCpu& e) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "{\"callers\": %.4f, \"strand\": %.4f, \"completion\": %.4f, \"packer\": %.4f, "
                "\"executor_other\": %.4f, \"rest\": %.4f}",
                callers_s, e.strand, e.completion, e.packer, e.other,
                std::max(0.0, process_s - callers_s - e.total()));
  return buf;
}

}  // namespace gpubatch::bench

// thread_nice: the executor's own threads (strand, completion threads, deadline watch) take the
// configured nice value; the callers' threads are left alone; 0 leaves the threads as made. They
// also sleep with a timer slack of 1 ns (GPUBATCH_TIMER_SLACK=default: the system's).
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "executor/thread_slice.hpp"
#include "fake_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;

int nice_of(pid_t tid) { return getpriority(PRIO_PROCESS, static_cast<id_t>(tid)); }

std::set<pid_t> threads_now() {
  std::set<pid_t> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task"))
    out.insert(static_cast<pid_t>(std::stol(task.path().filename().string())));
  return out;
}

// The nice value of every thread of this process named gpubatch-* that is not in `before` (other
// tests' executors may leave threads of theirs behind for a while), by name.
// Nice by default; `slack` reads each thread's timer slack (ns) instead.
std::multimap<std::string, long> new_executor_thread_nices(const std::set<pid_t>& before, bool slack = false) {
  std::multimap<std::string, long> out;
  for (pid_t tid : threads_now()) {
    if (before.count(tid)) continue;
    std::ifstream comm("/proc/self/task/" + std::to_string(tid) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("gpubatch-", 0) != 0) continue;
    if (!slack) {
      out.emplace(name, nice_of(tid));
      continue;
    }
    std::ifstream f("/proc/" + std::to_string(tid) + "/timerslack_ns");  // a thread's, by its id
    long ns = -1;
    f >> ns;
    out.emplace(name, ns);
  }
  return out;
}

TEST(ThreadNice, TheExecutorsThreadsTakeIt) {
  const int base = nice_of(gettid());
  const int target = std::min(19, base + 3);  // raising one's nice needs no privilege
  auto device = std::make_shared<FakeDevice>();
  {
    const std::set<pid_t> before = threads_now();
    BatchConfig c = BatchConfig::adaptive();
    c.thread_nice = target;
    c.completion_threads = 2;
    BatchExecutor executor(device, c);
    auto gpu = executor.handle();
    auto first = gpu.relu({1.0f});
    auto timed = gpu.relu({2.0f}, SubmitOptions::within(60s));  // starts the deadline watch
    ASSERT_TRUE(ready_within(first, 30s));
    ASSERT_TRUE(ready_within(timed, 30s));
    // A thread sets its own nice when it starts: wait for each to have started.
    std::multimap<std::string, long> nices;
    ASSERT_TRUE(eventually([&] {
      nices = new_executor_thread_nices(before);
      return nices.count("gpubatch-strand") == 1 && nices.count("gpubatch-done") == 2 &&
             nices.count("gpubatch-expiry") == 1 &&
             std::all_of(nices.begin(), nices.end(), [&](const auto& kv) { return kv.second == target; });
    })) << "strand " << nices.count("gpubatch-strand") << ", done " << nices.count("gpubatch-done")
        << ", expiry " << nices.count("gpubatch-expiry");
    EXPECT_EQ(nice_of(gettid()), base) << "the caller's thread is left alone";
  }
  const std::set<pid_t> before = threads_now();
  BatchExecutor plain(device, BatchConfig::adaptive());  // thread_nice 0: as made
  auto done = plain.handle().relu({1.0f});
  ASSERT_TRUE(ready_within(done, 30s));
  // The future may resolve on this thread (a lone future's pass) before the executor's threads
  // have named themselves: wait for the strand's.
  std::multimap<std::string, long> nices;
  ASSERT_TRUE(eventually([&] {
    nices = new_executor_thread_nices(before);
    return nices.count("gpubatch-strand") == 1;
  }));
  for (const auto& [name, nice] : nices) EXPECT_EQ(nice, base) << name;
}

// The slice of a thread of this process (sched_getattr of another thread: its id), or -1.
long long slice_of(pid_t tid) {
  detail::SchedAttr a;
  if (::syscall(SYS_sched_getattr, tid, &a, sizeof a, 0) != 0) return -1;
  return static_cast<long long>(a.sched_runtime);
}

// thread_slice_us: the executor's threads ask for it, the caller's keeps its own. Skipped where
// the kernel keeps no custom slices (before 6.12), which a scratch thread finds out first.
TEST(ThreadSlice, TheExecutorsThreadsTakeIt) {
  using namespace std::chrono;
  detail::SliceOutcome probe{};
  std::thread([&] { probe = detail::request_thread_slice(microseconds(300)); }).join();
  if (probe != detail::SliceOutcome::applied) GTEST_SKIP() << "this kernel keeps no custom slices";
  const long long own = slice_of(gettid());
  const long long want = duration_cast<nanoseconds>(microseconds(300)).count();
  ASSERT_NE(own, want) << "pick a slice this thread does not have already";
  auto device = std::make_shared<FakeDevice>();
  const std::set<pid_t> before = threads_now();
  BatchConfig c = BatchConfig::adaptive();
  c.thread_slice = microseconds(300);
  c.thread_nice = std::min(19, nice_of(gettid()) + 2);  // both: the slice keeps the nice value
  c.completion_threads = 2;
  BatchExecutor executor(device, c);
  auto gpu = executor.handle();
  auto first = gpu.relu({1.0f});
  auto timed = gpu.relu({2.0f}, SubmitOptions::within(60s));  // starts the deadline watch
  ASSERT_TRUE(ready_within(first, 30s));
  ASSERT_TRUE(ready_within(timed, 30s));
  std::multimap<std::string, long> nices;
  std::map<pid_t, long long> slices;
  ASSERT_TRUE(eventually([&] {
    nices = new_executor_thread_nices(before);
    slices.clear();
    for (pid_t tid : threads_now()) {
      if (before.count(tid)) continue;
      std::ifstream comm("/proc/self/task/" + std::to_string(tid) + "/comm");
      std::string name;
      std::getline(comm, name);
      if (name.rfind("gpubatch-", 0) == 0) slices[tid] = slice_of(tid);
    }
    return nices.count("gpubatch-strand") == 1 && nices.count("gpubatch-done") == 2 &&
           nices.count("gpubatch-expiry") == 1 &&
           std::all_of(nices.begin(), nices.end(), [&](const auto& kv) { return kv.second == c.thread_nice; }) &&
           std::all_of(slices.begin(), slices.end(), [&](const auto& kv) { return kv.second == want; });
  })) << "strand " << nices.count("gpubatch-strand") << ", done " << nices.count("gpubatch-done")
      << ", expiry " << nices.count("gpubatch-expiry");
  EXPECT_EQ(slice_of(gettid()), own) << "the caller's thread is left alone";
}

// The threads sleep until instants that matter (a deadline, a batch's max_wait): they ask for a
// timer slack of 1 ns instead of the default 50 us. The caller's thread keeps its own.
TEST(TimerSlack, TheExecutorsThreadsSleepWithoutSlack) {
  const long own = ::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  if (own == 1) GTEST_SKIP() << "this thread's own slack is already 1 ns";
  long mine = -1;
  std::ifstream("/proc/" + std::to_string(gettid()) + "/timerslack_ns") >> mine;
  if (mine != own) GTEST_SKIP() << "no /proc/<tid>/timerslack_ns to read here";
  auto device = std::make_shared<FakeDevice>();
  for (const bool system : {false, true}) {
    if (system) ::setenv("GPUBATCH_TIMER_SLACK", "default", 1);
    const std::set<pid_t> before = threads_now();
    BatchConfig c = BatchConfig::adaptive();
    c.completion_threads = 2;
    BatchExecutor executor(device, c);
    auto gpu = executor.handle();
    auto timed = gpu.relu({2.0f}, SubmitOptions::within(60s));  // starts the deadline watch
    ASSERT_TRUE(ready_within(timed, 30s));
    const long want = system ? own : 1;
    std::multimap<std::string, long> slacks;
    ASSERT_TRUE(eventually([&] {
      slacks = new_executor_thread_nices(before, true);
      return slacks.count("gpubatch-strand") == 1 && slacks.count("gpubatch-done") == 2 &&
             slacks.count("gpubatch-expiry") == 1 &&
             std::all_of(slacks.begin(), slacks.end(), [&](const auto& kv) { return kv.second == want; });
    })) << (system ? "system" : "1 ns") << ": strand " << slacks.count("gpubatch-strand") << ", done "
        << slacks.count("gpubatch-done") << ", expiry " << slacks.count("gpubatch-expiry");
    ::unsetenv("GPUBATCH_TIMER_SLACK");
  }
  EXPECT_EQ(::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), own) << "the caller's thread is left alone";
}

}  // namespace
}  // namespace gpubatch::testing

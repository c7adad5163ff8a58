// thread_nice and thread_slice_us: the executor's own threads (strand, completion threads,
// deadline watch) take the configured nice value and scheduler slice; the callers' threads are
// left alone; 0 leaves the threads as made. They also sleep with a timer slack of 1 ns
// (GPUBATCH_TIMER_SLACK=default: the system's).
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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

long long slice_of(pid_t tid) { return detail::thread_slice_ns(tid); }

// What to read of each thread: its nice value, its timer slack (ns) or its scheduler slice (ns).
enum class Reading { nice, slack, slice };

// That reading of every thread of this process named gpubatch-* that is not in `before` (other
// tests' executors may leave threads of theirs behind for a while), by name.
std::multimap<std::string, long long> new_executor_threads(const std::set<pid_t>& before,
                                                           Reading what = Reading::nice) {
  std::multimap<std::string, long long> out;
  for (pid_t tid : threads_now()) {
    if (before.count(tid)) continue;
    std::ifstream comm("/proc/self/task/" + std::to_string(tid) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("gpubatch-", 0) != 0) continue;
    if (what == Reading::nice) {
      out.emplace(name, nice_of(tid));
    } else if (what == Reading::slice) {
      out.emplace(name, slice_of(tid));
    } else {
      std::ifstream f("/proc/" + std::to_string(tid) + "/timerslack_ns");  // a thread's, by its id
      long long ns = -1;
      f >> ns;
      out.emplace(name, ns);
    }
  }
  return out;
}

// An executor of two completion threads that has started its strand, both completion threads
// and its deadline watch (a request with a deadline starts it).
BatchConfig two_completion_threads() {
  BatchConfig c = BatchConfig::adaptive();
  c.completion_threads = 2;
  return c;
}
void start_every_thread(BatchExecutor& executor) {
  auto gpu = executor.handle();
  auto first = gpu.relu({1.0f});
  auto timed = gpu.relu({2.0f}, SubmitOptions::within(std::chrono::seconds(60)));
  ASSERT_TRUE(ready_within(first, std::chrono::seconds(30)));
  ASSERT_TRUE(ready_within(timed, std::chrono::seconds(30)));
}
// Every thread of such an executor is there and reads `want` (a thread sets its own values when
// it starts: callers wait for this with eventually()).
bool every_thread_reads(const std::multimap<std::string, long long>& seen, long long want) {
  return seen.count("gpubatch-strand") == 1 && seen.count("gpubatch-done") == 2 &&
         seen.count("gpubatch-expiry") == 1 &&
         std::all_of(seen.begin(), seen.end(), [&](const auto& kv) { return kv.second == want; });
}
std::string counts(const std::multimap<std::string, long long>& seen) {
  return "strand " + std::to_string(seen.count("gpubatch-strand")) + ", done " +
         std::to_string(seen.count("gpubatch-done")) + ", expiry " + std::to_string(seen.count("gpubatch-expiry"));
}

TEST(ThreadNice, TheExecutorsThreadsTakeIt) {
  const int base = nice_of(gettid());
  const int target = std::min(19, base + 3);  // raising one's nice needs no privilege
  auto device = std::make_shared<FakeDevice>();
  {
    const std::set<pid_t> before = threads_now();
    BatchConfig c = two_completion_threads();
    c.thread_nice = target;
    BatchExecutor executor(device, c);
    ASSERT_NO_FATAL_FAILURE(start_every_thread(executor));
    std::multimap<std::string, long long> nices;
    ASSERT_TRUE(eventually([&] { return every_thread_reads(nices = new_executor_threads(before), target); }))
        << counts(nices);
    EXPECT_EQ(nice_of(gettid()), base) << "the caller's thread is left alone";
  }
  const std::set<pid_t> before = threads_now();
  BatchExecutor plain(device, BatchConfig::adaptive());  // thread_nice 0: as made
  auto done = plain.handle().relu({1.0f});
  ASSERT_TRUE(ready_within(done, 30s));
  // The future may resolve on this thread (a lone future's pass) before the executor's threads
  // have named themselves: wait for the strand's.
  std::multimap<std::string, long long> nices;
  ASSERT_TRUE(eventually([&] { return (nices = new_executor_threads(before)).count("gpubatch-strand") == 1; }));
  for (const auto& [name, nice] : nices) EXPECT_EQ(nice, base) << name;
}

// thread_slice_us: the executor's threads ask for it (keeping their nice value), the caller's
// keeps its own. Skipped where the kernel keeps no custom slices (before 6.12), which a scratch
// thread finds out first.
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
  BatchConfig c = two_completion_threads();
  c.thread_slice = microseconds(300);
  c.thread_nice = std::min(19, nice_of(gettid()) + 2);
  BatchExecutor executor(device, c);
  ASSERT_NO_FATAL_FAILURE(start_every_thread(executor));
  std::multimap<std::string, long long> slices, nices;
  ASSERT_TRUE(eventually([&] {
    return every_thread_reads(slices = new_executor_threads(before, Reading::slice), want) &&
           every_thread_reads(nices = new_executor_threads(before), c.thread_nice);
  })) << counts(slices);
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
    BatchExecutor executor(device, two_completion_threads());
    ASSERT_NO_FATAL_FAILURE(start_every_thread(executor));
    std::multimap<std::string, long long> slacks;
    ASSERT_TRUE(eventually([&] {
      return every_thread_reads(slacks = new_executor_threads(before, Reading::slack), system ? own : 1);
    })) << (system ? "system: " : "1 ns: ") << counts(slacks);
    ::unsetenv("GPUBATCH_TIMER_SLACK");
  }
  EXPECT_EQ(::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), own) << "the caller's thread is left alone";
}

}  // namespace
}  // namespace gpubatch::testing

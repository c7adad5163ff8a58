// thread_nice: the executor's own threads (strand, completion threads, deadline watch) take the
// configured nice value; the callers' threads are left alone; 0 leaves the threads as made.
#include <gtest/gtest.h>
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
#include <vector>

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
std::multimap<std::string, int> new_executor_thread_nices(const std::set<pid_t>& before) {
  std::multimap<std::string, int> out;
  for (pid_t tid : threads_now()) {
    if (before.count(tid)) continue;
    std::ifstream comm("/proc/self/task/" + std::to_string(tid) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("gpubatch-", 0) == 0) out.emplace(name, nice_of(tid));
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
    std::multimap<std::string, int> nices;
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
  const auto nices = new_executor_thread_nices(before);
  EXPECT_FALSE(nices.empty());
  for (const auto& [name, nice] : nices) EXPECT_EQ(nice, base) << name;
}

}  // namespace
}  // namespace gpubatch::testing

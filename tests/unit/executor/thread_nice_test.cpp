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

// The nice value of every thread of this process named gpubatch-*, by name.
std::multimap<std::string, int> executor_thread_nices() {
  std::multimap<std::string, int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("gpubatch-", 0) != 0) continue;
    out.emplace(name, nice_of(static_cast<pid_t>(std::stol(task.path().filename().string()))));
  }
  return out;
}

TEST(ThreadNice, TheExecutorsThreadsTakeIt) {
  const int base = nice_of(gettid());
  const int target = std::min(19, base + 3);  // raising one's nice needs no privilege
  auto device = std::make_shared<FakeDevice>();
  {
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
      nices = executor_thread_nices();
      return nices.count("gpubatch-strand") == 1 && nices.count("gpubatch-done") == 2 &&
             nices.count("gpubatch-expiry") == 1 &&
             std::all_of(nices.begin(), nices.end(), [&](const auto& kv) { return kv.second == target; });
    })) << "strand " << nices.count("gpubatch-strand") << ", done " << nices.count("gpubatch-done")
        << ", expiry " << nices.count("gpubatch-expiry");
    EXPECT_EQ(nice_of(gettid()), base) << "the caller's thread is left alone";
  }
  BatchExecutor plain(device, BatchConfig::adaptive());  // thread_nice 0: as made
  auto done = plain.handle().relu({1.0f});
  ASSERT_TRUE(ready_within(done, 30s));
  for (const auto& [name, nice] : executor_thread_nices()) EXPECT_EQ(nice, base) << name;
}

}  // namespace
}  // namespace gpubatch::testing

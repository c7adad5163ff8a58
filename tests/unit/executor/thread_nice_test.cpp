// thread_nice: the executor's own threads (here a completion thread and the deadline watch, where
// handlers run inline) take the configured nice value; 0 leaves them as made.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <vector>

#include "fake_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;

int my_nice() { return getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())); }

// The nice value of the thread that runs a request's handler.
std::future<int> nice_where_it_resolves(const BatchedGpuHandle& gpu, const SubmitOptions& options) {
  auto seen = std::make_shared<std::promise<int>>();
  auto f = seen->get_future();
  gpu.relu({1.0f}, options, [seen](std::exception_ptr, std::vector<float>) { seen->set_value(my_nice()); });
  return f;
}

TEST(ThreadNice, TheExecutorsThreadsTakeIt) {
  const int base = my_nice();
  const int target = std::min(19, base + 3);  // raising one's nice needs no privilege
  auto device = std::make_shared<FakeDevice>();
  BatchConfig c = BatchConfig::adaptive();
  c.max_inflight_batches = 1;
  c.thread_nice = target;
  BatchExecutor executor(device, c);
  auto gpu = executor.handle();
  auto on_completion = nice_where_it_resolves(gpu, {});
  ASSERT_TRUE(ready_within(on_completion, 30s));
  EXPECT_EQ(on_completion.get(), target) << "a completion thread";
  device->pause();
  auto held = gpu.relu({2.0f});  // takes the only slot
  ASSERT_TRUE(device->wait_for_batches(2));
  auto on_watch = nice_where_it_resolves(gpu, SubmitOptions::within(5ms));  // expires waiting
  ASSERT_TRUE(ready_within(on_watch, 30s));
  EXPECT_EQ(on_watch.get(), target) << "the deadline watch";
  device->resume();
  ASSERT_TRUE(ready_within(held, 30s));
  EXPECT_EQ(my_nice(), base) << "the caller's thread is left alone";

  BatchExecutor plain(device, BatchConfig::adaptive());  // thread_nice 0: as made
  auto untouched = nice_where_it_resolves(plain.handle(), {});
  ASSERT_TRUE(ready_within(untouched, 30s));
  EXPECT_EQ(untouched.get(), base);
}

}  // namespace
}  // namespace gpubatch::testing

// The caller's express batch (src/executor/express_lane.cpp): a request above level 0, made while
// the regular slots are taken, goes to the device at once on its caller's thread, without waiting
// for the strand; it never overtakes an earlier request above level 0 that still waits; a submit
// the device refuses leaves the request to the queue; GPUBATCH_EXPRESS_INLINE=off keeps it queued.
#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "config_test_util.hpp"
#include "fake_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/stats.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;
using Floats = std::vector<float>;

BatchConfig two_levels() {
  BatchConfig c = BatchConfig::adaptive();
  c.max_batch_size = 4;
  c.max_inflight_batches = 1;
  c.completion_threads = 1;
  c.priority_levels = 2;
  return c;
}
SubmitOptions high() { return SubmitOptions::with_priority(1); }

// The strand (or the inline pass that holds it) sits inside a held submit of the regular slot's
// batch; the high request's own submit starts meanwhile, on its caller's thread.
TEST(ExpressLane, AHighRequestGoesOutOnItsCallersThreadWhileTheStrandIsInASubmit) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, two_levels());
  auto gpu = executor.handle();
  device->hold_submits();
  std::future<Floats> low, up;
  std::thread regular([&] { low = gpu.relu({-1.0f}); });
  ASSERT_TRUE(device->wait_for_submits_entered(1));
  std::thread::id caller;
  std::thread express([&] {
    caller = std::this_thread::get_id();
    up = gpu.relu({-2.0f, 3.0f}, high());
  });
  const bool entered = device->wait_for_submits_entered(2);
  const auto threads = device->submit_threads();
  device->release_submits();
  regular.join();
  express.join();
  ASSERT_TRUE(entered) << "the high request waited for the strand";
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads[1], caller);
  ASSERT_TRUE(ready_within(low, 30s));
  ASSERT_TRUE(ready_within(up, 30s));
  EXPECT_EQ(low.get(), Floats{0.0f});
  EXPECT_EQ(up.get(), (Floats{0.0f, 3.0f}));
  const Stats s = executor.stats();
  EXPECT_EQ(s.express_batches, 1u);
  EXPECT_EQ(s.batches, 2u);
  EXPECT_EQ(s.submitted, 2u);
  EXPECT_EQ(s.completed, 2u);
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_EQ(s.flushes.size + s.flushes.deadline + s.flushes.idle + s.flushes.shutdown, s.batches);
}

// The same with GPUBATCH_EXPRESS_INLINE=off: the request waits in its queue for the strand.
TEST(ExpressLane, OffTheHighRequestWaitsForTheStrand) {
  EnvGuard off("GPUBATCH_EXPRESS_INLINE", "off");
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, two_levels());
  auto gpu = executor.handle();
  device->hold_submits();
  std::future<Floats> low;
  std::thread regular([&] { low = gpu.relu({-1.0f}); });
  ASSERT_TRUE(device->wait_for_submits_entered(1));
  auto up = gpu.relu({-2.0f}, high());
  EXPECT_FALSE(device->wait_for_submits_entered(2, 100ms));
  device->release_submits();
  regular.join();
  ASSERT_TRUE(ready_within(up, 30s));
  EXPECT_EQ(up.get(), Floats{0.0f});
  EXPECT_EQ(low.get(), Floats{0.0f});
}

// A high request that waits in its queue (its cancellation slot keeps it off the express lane)
// is not overtaken by a later one from the same thread: that one queues behind it.
TEST(ExpressLane, ALaterHighRequestDoesNotOvertakeOneThatWaits) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, two_levels());
  auto gpu = executor.handle();
  device->hold_submits();
  std::future<Floats> low;
  std::thread regular([&] { low = gpu.relu({-1.0f}); });
  ASSERT_TRUE(device->wait_for_submits_entered(1));
  boost::asio::cancellation_signal signal;
  std::promise<Floats> first;
  std::future<Floats> second;
  std::atomic<bool> sent{false};
  std::thread sender([&] {  // both from one thread; the second would block in a held submit
    gpu.relu({10.0f}, high(),
             boost::asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, Floats v) {
               if (e) first.set_exception(e);
               else first.set_value(std::move(v));
             }));
    second = gpu.relu({20.0f}, high());
    sent = true;
  });
  EXPECT_FALSE(device->wait_for_submits_entered(2, 100ms)) << "the second went ahead of the first";
  EXPECT_TRUE(eventually([&] { return sent.load(); }, 5s)) << "the second's call did not return";
  device->release_submits();
  regular.join();
  sender.join();
  auto f = first.get_future();
  ASSERT_TRUE(ready_within(f, 30s));
  ASSERT_TRUE(ready_within(second, 30s));
  EXPECT_EQ(f.get(), Floats{10.0f});
  EXPECT_EQ(second.get(), Floats{20.0f});
  const auto order = device->markers();
  const auto at = [&](float m) { return std::find(order.begin(), order.end(), m) - order.begin(); };
  EXPECT_LT(at(10.0f), at(20.0f));
}

// A submit the device refuses leaves the request to the queue, which runs it.
TEST(ExpressLane, ARefusedSubmitLeavesTheRequestToTheQueue) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, two_levels());
  auto gpu = executor.handle();
  device->pause();
  auto low = gpu.relu({-1.0f});
  ASSERT_TRUE(device->wait_for_inflight(1, 30s));
  device->fail_next_submit(ErrorCode::out_of_memory);
  auto up = gpu.relu({-3.0f, 4.0f}, high());
  device->resume();
  ASSERT_TRUE(ready_within(up, 30s));
  EXPECT_EQ(up.get(), (Floats{0.0f, 4.0f}));
  EXPECT_EQ(low.get(), Floats{0.0f});
  EXPECT_EQ(device->submit_faults(), 1u);
  const Stats s = executor.stats();
  EXPECT_EQ(s.completed, 2u);
  EXPECT_EQ(s.submitted, 2u);
  EXPECT_EQ(s.queue_depth, 0u);
}

// Under a crowd of level-0 senders, one thread's high requests reach the device in the order it
// sent them (callers' express batches and the strand's alike), and every result is right.
TEST(ExpressLane, OneThreadsHighRequestsKeepTheirOrderBesideACrowd) {
  auto device = std::make_shared<FakeDevice>();
  device->set_delay(100us);
  BatchConfig c = BatchConfig::adaptive();
  c.max_batch_size = 64;
  c.priority_levels = 2;
  BatchExecutor executor(device, c);
  auto gpu = executor.handle();
  std::atomic<bool> stop{false};
  std::vector<std::thread> crowd;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 3; ++t)
    crowd.emplace_back([&] {
      std::vector<std::future<Floats>> mine;
      while (!stop.load()) {
        mine.push_back(gpu.relu({-5.0f}));
        if (mine.size() == 256) {
          for (auto& f : mine)
            if (f.get() != Floats{0.0f}) ++wrong;
          mine.clear();
        }
      }
      for (auto& f : mine)
        if (f.get() != Floats{0.0f}) ++wrong;
    });
  std::vector<std::future<Floats>> ups;
  for (int i = 0; i < 2000; ++i) {
    ups.push_back(gpu.relu({1000.0f + static_cast<float>(i)}, high()));
    if (i % 8 == 7) std::this_thread::sleep_for(20us);
  }
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(ready_within(ups[i], 30s));
    EXPECT_EQ(ups[i].get(), Floats{1000.0f + static_cast<float>(i)});
  }
  stop = true;
  for (auto& t : crowd) t.join();
  EXPECT_EQ(wrong.load(), 0);
  std::vector<float> seen;
  for (float m : device->markers())
    if (m >= 1000.0f) seen.push_back(m);
  ASSERT_EQ(seen.size(), 2000u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end())) << "a high request overtook an earlier one";
  EXPECT_GT(executor.stats().express_batches, 0u);
}

}  // namespace
}  // namespace gpubatch::testing

// A core per member of a device set (src/executor/set_shard.hpp) on fake members: which core a
// calling thread reaches, one core with shard_per_device off, a shard's own member winning ties,
// shutdown of every shard, the statistics summed over shards, a lost member's batches re-run,
// a busy shard's large request on the lane, a cancelled request of another shard, a trace per
// shard. Every result is checked against the CPU reference.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "executor/device_set.hpp"
#include "executor/executor_core.hpp"
#include "executor/set_shard.hpp"
#include "fake_device.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"
#include "test_util.hpp"

namespace gpubatch {
namespace {

using testing::FakeDevice;
using namespace std::chrono_literals;

std::vector<float> ramp(std::size_t n, float start) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i % 89) - 44.0f;
  return v;
}

std::vector<float> relu_of(const std::vector<float>& x) { return reference::run(Request::relu(x)).values; }

struct Members {
  std::shared_ptr<FakeDevice> a, b;
  std::shared_ptr<detail::DeviceSet> set;
  explicit Members(FakeDevice::Options options = {})
      : a(std::make_shared<FakeDevice>(options)),
        b(std::make_shared<FakeDevice>(options)),
        set(std::make_shared<detail::DeviceSet>(std::vector<std::shared_ptr<detail::BatchDevice>>{a, b}, 60000ms)) {}
};

BatchConfig config() {
  BatchConfig c = BatchConfig::adaptive();
  c.max_inflight_batches = 2;
  c.completion_threads = 2;
  c.max_batch_size = 32;
  return c;
}

// The cores behind `lead` (detail::make_executor's result), shut down at the end of a test.
struct Cores {
  std::shared_ptr<detail::ExecutorCore> lead;
  ~Cores() {
    std::vector<detail::ExecutorCore*> all{lead.get()};
    if (auto* g = lead->shard_group())
      for (auto& c : g->others) all.push_back(c.get());
    for (auto* c : all) c->begin_shutdown(ShutdownMode::drain);
    for (auto* c : all) c->shutdown(ShutdownMode::drain);
  }
};

// The core each of `threads` new threads reaches, twice each (a thread keeps to its shard).
std::vector<detail::ExecutorCore*> cores_of_threads(const std::shared_ptr<detail::ExecutorCore>& lead, int threads) {
  std::vector<detail::ExecutorCore*> seen(threads);
  for (int t = 0; t < threads; ++t) {
    std::thread([&, t] {
      detail::ExecutorCore* first = detail::route(lead).get();
      EXPECT_EQ(detail::route(lead).get(), first) << "a thread keeps to its shard";
      seen[t] = first;
    }).join();
  }
  return seen;
}

// A call from a thread that has not called before (it takes the next shard) fails with shut_down.
void expect_shut_down_from_a_new_thread(const BatchedGpuHandle& gpu) {
  std::thread([&] {
    try {
      gpu.relu({1.0f}).get();
      ADD_FAILURE() << "accepted after shutdown";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::shut_down);
    }
  }).join();
}

TEST(SetShards, ThreadsSpreadOverOneCorePerMemberAndKeepToTheirs) {
  Members m;
  Cores cores{detail::make_executor(m.set, config())};
  ASSERT_NE(cores.lead->shard_group(), nullptr);
  ASSERT_EQ(cores.lead->shard_group()->size(), 2u);
  const auto seen = cores_of_threads(cores.lead, 4);
  const std::set<detail::ExecutorCore*> distinct(seen.begin(), seen.end());
  EXPECT_EQ(distinct.size(), 2u) << "four threads in turn take both shards";
  EXPECT_NE(seen[0], seen[1]);
  EXPECT_EQ(seen[0], seen[2]);
  EXPECT_EQ(seen[1], seen[3]);
}

TEST(SetShards, OneCoreForTheSetWhenTurnedOffWithOneDeviceOrInResidentMode) {
  Members m;
  BatchConfig off = config();
  off.shard_per_device = false;
  Cores one{detail::make_executor(m.set, off)};
  EXPECT_EQ(one.lead->shard_group(), nullptr);
  for (auto* c : cores_of_threads(one.lead, 3)) EXPECT_EQ(c, one.lead.get());
  Cores single{detail::make_executor(std::make_shared<FakeDevice>(), config())};
  EXPECT_EQ(single.lead->shard_group(), nullptr);
  BatchConfig resident = config();
  resident.resident = true;  // its kernel is member 0's: every thread must reach it
  Cores kept{detail::make_executor(m.set, resident)};
  EXPECT_EQ(kept.lead->shard_group(), nullptr);
}

TEST(SetShards, TheKeyComesFromFilesAndTheEnvironment) {
  EXPECT_TRUE(BatchConfig{}.shard_per_device);
  EXPECT_FALSE(BatchConfig::from_string("shard_per_device = false").shard_per_device);
  EXPECT_THROW(BatchConfig::from_string("shard_per_device = 2"), Error);
  ::setenv("GPUBATCH_SHARD_PER_DEVICE", "off", 1);
  EXPECT_FALSE(BatchConfig::from_environment().shard_per_device);
  ::setenv("GPUBATCH_SHARD_PER_DEVICE", "sometimes", 1);
  try {
    BatchConfig::from_environment();
    ADD_FAILURE() << "an invalid value is refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_config);
    EXPECT_NE(std::string(e.what()).find("GPUBATCH_SHARD_PER_DEVICE"), std::string::npos) << e.what();
  }
  ::unsetenv("GPUBATCH_SHARD_PER_DEVICE");
}

// With both members idle, a shard's batches go to its own member: two threads, one request at a
// time each, land on different members.
TEST(SetShards, AShardsOwnMemberWinsATie) {
  Members m;
  BatchExecutor executor(m.set, config());
  auto gpu = executor.handle();
  auto one_thread = [&](float start) {
    std::thread([&, start] {
      for (int i = 0; i < 5; ++i) {
        const auto x = ramp(16, start + static_cast<float>(i));
        EXPECT_EQ(gpu.relu(x).get(), relu_of(x));
      }
    }).join();
  };
  one_thread(1.0f);
  const std::size_t a_first = m.a->batches(), b_first = m.b->batches();
  EXPECT_TRUE((a_first == 5 && b_first == 0) || (a_first == 0 && b_first == 5)) << a_first << " " << b_first;
  one_thread(100.0f);
  EXPECT_EQ(m.a->batches(), 5u);
  EXPECT_EQ(m.b->batches(), 5u) << "the second thread's shard has the other member";
}

// Sixteen threads over two shards: every result right, both members used, and the statistics
// are the sum of the shards' (every request counted once; the devices' counts are the set's).
TEST(SetShards, StatisticsAreTheShardsSummed) {
  Members m(FakeDevice::Options{.delay = 50us});
  BatchExecutor executor(m.set, config());
  auto gpu = executor.handle();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      std::vector<std::pair<std::vector<float>, std::future<std::vector<float>>>> pending;
      for (int i = 0; i < 200; ++i) {
        auto x = ramp(32, static_cast<float>(t * 7 + i));
        auto f = gpu.relu(x);
        pending.emplace_back(std::move(x), std::move(f));
      }
      for (auto& [x, f] : pending)
        if (f.get() != relu_of(x)) ++wrong;
    });
  for (auto& t : threads) t.join();
  executor.shutdown();
  EXPECT_EQ(wrong.load(), 0);
  const Stats st = executor.stats();
  EXPECT_EQ(st.submitted, 3200u);
  EXPECT_EQ(st.completed, 3200u);
  EXPECT_EQ(st.queue_depth, 0u);
  EXPECT_EQ(st.batches, m.a->batches() + m.b->batches());
  EXPECT_EQ(st.end_to_end.count, 3200u);
  ASSERT_FALSE(st.end_to_end_by_priority.empty());
  EXPECT_EQ(st.end_to_end_by_priority[0].summary.count, 3200u);
  ASSERT_EQ(st.devices.size(), 2u);
  EXPECT_EQ(st.devices[0].requests + st.devices[1].requests, 3200u);
  EXPECT_GT(m.a->batches(), 0u);
  EXPECT_GT(m.b->batches(), 0u);
}

// shutdown() stops every shard before any drains: whatever thread calls afterwards gets
// shut_down, and every request accepted before resolves.
TEST(SetShards, ShutdownStopsEveryShardAndEveryAcceptedRequestResolves) {
  Members m(FakeDevice::Options{.delay = 200us});
  BatchExecutor executor(m.set, config());
  auto gpu = executor.handle();
  std::vector<std::pair<std::vector<float>, std::future<std::vector<float>>>> accepted[4];
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto x = ramp(8, static_cast<float>(t * 50 + i));
        auto f = gpu.relu(x);
        accepted[t].emplace_back(std::move(x), std::move(f));
      }
    });
  for (auto& t : threads) t.join();
  executor.shutdown();
  for (auto& list : accepted)
    for (auto& [x, f] : list) EXPECT_EQ(f.get(), relu_of(x));
  for (int t = 0; t < 3; ++t) expect_shut_down_from_a_new_thread(gpu);
  EXPECT_EQ(executor.stats().completed, 200u);
}

// shutdown() from a completion handler on one shard's thread stops every shard and waits for
// none, even while another shard still has a batch on the device.
TEST(SetShards, ShutdownFromAHandlerOnAShardsThreadWaitsForNone) {
  Members m;
  m.a->pause();
  BatchExecutor executor(m.set, config());
  auto gpu = executor.handle();
  std::future<std::vector<float>> held;
  std::thread([&] { held = gpu.relu({4.0f}); }).join();  // shard 0: on member 0, which holds it
  ASSERT_TRUE(m.a->wait_for_batches(1));
  std::promise<void> returned;
  std::thread([&] {  // shard 1: member 1
    gpu.relu({5.0f}, [&](std::exception_ptr e, std::vector<float> v) {
      EXPECT_FALSE(e);
      EXPECT_EQ(v, std::vector<float>{5.0f});
      executor.shutdown();
      returned.set_value();
    });
  }).join();
  EXPECT_EQ(returned.get_future().wait_for(5s), std::future_status::ready)
      << "the handler's shutdown() waited for shard 0's batch";
  expect_shut_down_from_a_new_thread(gpu);
  m.a->resume();
  EXPECT_EQ(held.get(), std::vector<float>{4.0f});
}

// A member lost on wait: the batch a shard placed there runs again on the other member.
TEST(SetShards, ALostMembersBatchRunsAgainOnTheOther) {
  Members m;
  BatchExecutor executor(m.set, config());
  auto gpu = executor.handle();
  m.a->fail_next_wait(ErrorCode::device_lost, 1);
  for (int t = 0; t < 2; ++t)  // one thread per shard: one of them places its batch on member 0
    std::thread([&, t] {
      const auto x = ramp(64, static_cast<float>(t));
      try {
        EXPECT_EQ(gpu.relu(x).get(), relu_of(x));
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    }).join();
  const Stats st = executor.stats();
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(st.devices[0].failovers, 1u);
  EXPECT_EQ(st.devices[1].reruns, 1u);
}

// A large future request of a thread whose shard is busy (its earlier request still on the
// device) takes the direct lane: submitted by the caller's own thread, placed on the member with
// less outstanding work, back ready.
TEST(SetShards, ABusyShardsLargeRequestTakesTheLane) {
  Members m;
  // The small request's batch stays on the device until released (it had a 300 ms delay, which
  // under TSan on a loaded 2-core machine ran out before the large request came: the shard was
  // then idle, and the large request was batched).
  m.a->hold(-2.0f);
  m.b->hold(-2.0f);
  BatchExecutor executor(m.set, config());
  auto gpu = executor.handle();
  std::thread([&] {
    auto small = gpu.relu({-2.0f});  // in flight on this shard's member until released
    ASSERT_TRUE(testing::eventually([&] { return m.a->batches() + m.b->batches() == 1; }))
        << "the small request was never submitted";
    const auto x = ramp(600'000, 0.25f);
    auto large = gpu.relu(x);
    EXPECT_EQ(large.wait_for(0s), std::future_status::ready) << "the lane's future comes back ready";
    EXPECT_EQ(large.get(), relu_of(x));
    EXPECT_EQ(small.wait_for(0s), std::future_status::timeout);
    m.a->release(-2.0f);
    m.b->release(-2.0f);
    EXPECT_EQ(small.get(), std::vector<float>{0.0f});
    const auto& other = m.a->batches() == 2 ? m.a : m.b;  // both on one member would be wrong
    EXPECT_EQ(m.a->batches() + m.b->batches(), 2u);
    EXPECT_EQ(other->batches(), 1u);
    bool by_caller = false;
    for (auto id : m.a->submit_threads()) by_caller = by_caller || id == std::this_thread::get_id();
    for (auto id : m.b->submit_threads()) by_caller = by_caller || id == std::this_thread::get_id();
    EXPECT_TRUE(by_caller) << "the caller's own thread submitted the large request";
  }).join();
  m.a->release(-2.0f);  // also when an assertion above returned early
  m.b->release(-2.0f);
  EXPECT_EQ(executor.stats().direct, 1u);
}

// A handler's request cancelled through its slot leaves the queue of the shard it went to.
TEST(SetShards, ACancelledRequestLeavesItsShardsQueue) {
  Members m;
  m.a->pause();
  m.b->pause();
  BatchConfig c = config();
  c.max_inflight_batches = 1;
  BatchExecutor executor(m.set, c);
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> held;
  std::promise<std::exception_ptr> outcome;
  boost::asio::cancellation_signal signal;
  std::thread([&] {
    held.push_back(gpu.relu({1.0f}));  // fills this shard's one slot (its member is paused)
    ASSERT_TRUE(m.a->wait_for_batches(1) || m.b->wait_for_batches(1));
    gpu.relu({2.0f}, boost::asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, std::vector<float>) {
               outcome.set_value(e);
             }));
  }).join();
  signal.emit(boost::asio::cancellation_type::terminal);
  auto f = outcome.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "cancelled while its shard's slot is taken";
  try {
    std::rethrow_exception(f.get());
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::cancelled);
  } catch (...) {
    ADD_FAILURE() << "not a gpubatch::Error";
  }
  m.a->resume();
  m.b->resume();
  for (auto& h : held) EXPECT_EQ(h.get(), std::vector<float>{1.0f});
}

// A trace per shard: the executor's file, and shard 1's with ".shard1" before the extension.
TEST(SetShards, EachShardWritesItsOwnTrace) {
  EXPECT_EQ(detail::shard_trace_path("/tmp/t.json", 0), "/tmp/t.json");
  EXPECT_EQ(detail::shard_trace_path("/tmp/t.json", 1), "/tmp/t.shard1.json");
  EXPECT_EQ(detail::shard_trace_path("/tmp/x.d/trace", 2), "/tmp/x.d/trace.shard2");
  const auto path = std::filesystem::temp_directory_path() / ("gpubatch-shards-" + std::to_string(::getpid()) + ".json");
  const auto shard1 = detail::shard_trace_path(path.string(), 1);
  {
    Members m;
    BatchExecutor executor(m.set, config());
    executor.start_trace(path, 1);
    auto gpu = executor.handle();
    for (int t = 0; t < 2; ++t)
      std::thread([&] { EXPECT_EQ(gpu.relu({3.0f}).get(), std::vector<float>{3.0f}); }).join();
    EXPECT_TRUE(executor.stop_trace());
  }
  EXPECT_GT(std::filesystem::file_size(path), 100u);
  EXPECT_GT(std::filesystem::file_size(shard1), 100u);
  std::filesystem::remove(path);
  std::filesystem::remove(shard1);
}

}  // namespace
}  // namespace gpubatch

// A device set on fake members (fake_device.hpp): placement by outstanding bytes, an idle member
// taking work while another is busy, failover of a lost member's batches, every member lost,
// HostBuffer routing, and the stats it reports. Every result is checked against the CPU reference.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config_test_util.hpp"
#include "executor/device_set.hpp"
#include "fake_device.hpp"
#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"

namespace gpubatch {
namespace {

using testing::FakeDevice;
using namespace std::chrono_literals;

std::vector<float> ramp(std::size_t n, float start) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i % 97) - 48.0f;
  return v;
}

std::vector<float> relu_of(const std::vector<float>& x) {
  return reference::run(Request::relu(x)).values;
}

struct Set {
  std::shared_ptr<FakeDevice> a, b;
  std::shared_ptr<detail::DeviceSet> set;
  explicit Set(FakeDevice::Options options = {}, std::chrono::milliseconds attempt = 60000ms)
      : a(std::make_shared<FakeDevice>(options)),
        b(std::make_shared<FakeDevice>(options)),
        set(std::make_shared<detail::DeviceSet>(
            std::vector<std::shared_ptr<detail::BatchDevice>>{a, b}, attempt)) {}
};

BatchConfig small_batches() {
  BatchConfig c = BatchConfig::adaptive();
  c.max_inflight_batches = 2;
  c.completion_threads = 2;
  c.max_batch_size = 32;  // many batches, so that every member gets (and loses) several
  return c;
}

// 16 threads, each with `per_thread` relu requests; every result verified. Returns the failures.
int run_sixteen_threads(BatchExecutor& executor, int per_thread, std::size_t floats = 64) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  auto gpu = executor.handle();
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<std::vector<float>, std::future<std::vector<float>>>> pending;
      for (int i = 0; i < per_thread; ++i) {
        auto x = ramp(floats, static_cast<float>(t * 1000 + i));
        auto f = gpu.relu(x);
        pending.emplace_back(std::move(x), std::move(f));
      }
      for (auto& [x, f] : pending) {
        try {
          if (f.get() != relu_of(x)) ++failures;
        } catch (const std::exception& e) {
          ADD_FAILURE() << e.what();
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return failures.load();
}

TEST(DeviceSet, BothMembersTakeBatchesUnderSixteenThreads) {
  Set s(FakeDevice::Options{.delay = 100us});
  BatchExecutor executor(s.set, small_batches());
  EXPECT_EQ(run_sixteen_threads(executor, 300), 0);
  executor.shutdown();
  EXPECT_GT(s.a->batches(), 0u);
  EXPECT_GT(s.b->batches(), 0u);
  const Stats st = executor.stats();
  ASSERT_EQ(st.devices.size(), 2u);
  EXPECT_EQ(st.devices[0].requests + st.devices[1].requests, 16u * 300u);
  EXPECT_EQ(st.devices[0].batches, s.a->batches());
  EXPECT_EQ(st.devices[1].batches, s.b->batches());
  EXPECT_TRUE(st.devices[0].live && st.devices[1].live);
  EXPECT_EQ(st.completed, 16u * 300u);
  EXPECT_EQ(st.transfers.submissions, s.a->transfers().submissions + s.b->transfers().submissions);
  const std::string text = to_prometheus(st);
  EXPECT_NE(text.find("gpubatch_device_batches_total{device=\"1\"} " + std::to_string(s.b->batches())),
            std::string::npos);
  EXPECT_NE(text.find("gpubatch_device_live{device=\"0\"} 1"), std::string::npos);
}

// Member 0 holds a big batch that does not finish; the small batches after it go to member 1,
// whose outstanding bytes stay below member 0's.
TEST(DeviceSet, SmallBatchesGoToTheMemberWithoutTheBigOne) {
  Set s;
  s.a->pause();
  BatchConfig one_core = small_batches();
  one_core.shard_per_device = false;  // one thread fills the set's 4 slots; ties round robin
  BatchExecutor executor(s.set, one_core);  // 4 batches in flight: 2 per member
  auto gpu = executor.handle();
  const auto big = ramp(1 << 16, 0.0f);
  auto big_result = gpu.relu(big);
  ASSERT_TRUE(s.a->wait_for_batches(1));  // ties go round robin from member 0
  std::vector<std::pair<std::vector<float>, std::future<std::vector<float>>>> small;
  for (int i = 0; i < 3; ++i) {
    auto x = ramp(8, static_cast<float>(i));
    small.emplace_back(x, gpu.relu(x));
    ASSERT_TRUE(s.b->wait_for_batches(static_cast<std::size_t>(i + 1)));
  }
  EXPECT_EQ(s.a->batches(), 1u);
  EXPECT_EQ(s.b->batches(), 3u);
  const Stats mid = executor.stats();
  EXPECT_EQ(mid.devices[0].inflight_bytes, 2 * big.size() * sizeof(float));
  s.a->resume();
  EXPECT_EQ(big_result.get(), relu_of(big));
  for (auto& [x, f] : small) EXPECT_EQ(f.get(), relu_of(x));
}

// While member 0 cannot finish anything, member 1 takes every batch that arrives, and their
// results come back without waiting for member 0's (a completion thread waits per member).
TEST(DeviceSet, IdleMemberTakesWorkWhileTheOtherIsBusy) {
  Set s;
  BatchExecutor executor(s.set, small_batches());
  auto gpu = executor.handle();
  s.a->pause();
  auto x0 = ramp(1024, 1.0f);
  auto stuck = gpu.relu(x0);
  ASSERT_TRUE(s.a->wait_for_batches(1));
  for (int i = 0; i < 20; ++i) {  // more batches than the set has in-flight slots
    auto x = ramp(16, static_cast<float>(i));
    EXPECT_EQ(gpu.relu(x).get(), relu_of(x));  // resolves while member 0 still holds its batch
  }
  EXPECT_EQ(s.a->batches(), 1u);  // the busy member took nothing more
  EXPECT_EQ(s.b->batches(), 20u);
  EXPECT_EQ(stuck.wait_for(0s), std::future_status::timeout);
  s.a->resume();
  EXPECT_EQ(stuck.get(), relu_of(x0));
}

TEST(DeviceSet, BatchesLostOnWaitRunAgainOnTheOtherMember) {
  Set s(FakeDevice::Options{.delay = 50us});
  s.a->fail_next_wait(ErrorCode::device_lost, 3);
  BatchExecutor executor(s.set, small_batches());
  EXPECT_EQ(run_sixteen_threads(executor, 200), 0);
  executor.shutdown();
  const Stats st = executor.stats();
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(st.completed, 16u * 200u);
  // Every lost batch ran again on the other member; losses seen while member 0 was already out
  // of placement count once (one loss, one recovery).
  EXPECT_EQ(st.devices[0].failovers, 3u);
  EXPECT_EQ(st.devices[1].reruns, 3u);
  EXPECT_GE(st.devices[0].losses, 1u);
  EXPECT_LE(st.devices[0].losses, 3u);
  EXPECT_EQ(static_cast<std::uint64_t>(s.a->recoveries()), st.devices[0].losses);
  EXPECT_EQ(st.devices[0].recoveries, st.devices[0].losses);
  EXPECT_TRUE(st.devices[0].live);  // recovered: back in placement
}

TEST(DeviceSet, BatchesLostOnSubmitGoToTheOtherMember) {
  Set s;
  s.a->fail_next_submit(ErrorCode::device_lost, 2);
  s.b->fail_next_submit(ErrorCode::device_lost, 1);
  BatchExecutor executor(s.set, small_batches());
  EXPECT_EQ(run_sixteen_threads(executor, 100), 0);
  executor.shutdown();
  const Stats st = executor.stats();
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(st.devices[0].losses + st.devices[1].losses, 3u);
  EXPECT_EQ(st.devices[0].failovers + st.devices[1].failovers, 0u);  // nothing ran: not a re-run
  EXPECT_EQ(s.a->recoveries() + s.b->recoveries(), 3);
}

// A member that never answers: after batch_timeout its batch runs on the other member.
TEST(DeviceSet, AHungMemberIsLostAfterBatchTimeout) {
  // 1 s (it was 300 ms): also the bound of the re-run on member 1, which a thread under a
  // sanitizer on a loaded 2-core machine must not outlast.
  Set s({}, 1000ms);
  BatchConfig config = small_batches();
  config.batch_timeout = 1s;
  BatchExecutor executor(s.set, config);
  auto gpu = executor.handle();
  s.a->pause();
  auto x = ramp(256, 3.0f);
  auto f = gpu.relu(x);
  ASSERT_TRUE(s.a->wait_for_batches(1));
  EXPECT_EQ(f.get(), relu_of(x));  // from member 1, after member 0's attempt timed out
  const Stats st = executor.stats();
  EXPECT_EQ(st.devices[0].failovers, 1u);
  EXPECT_EQ(st.devices[1].reruns, 1u);
  s.a->resume();
}

TEST(DeviceSet, EveryMemberLostFailsWithDeviceLostAndEveryFutureResolves) {
  Set s;
  s.a->fail_next_wait(ErrorCode::device_lost, 1 << 20);
  s.b->fail_next_wait(ErrorCode::device_lost, 1 << 20);
  BatchExecutor executor(s.set, small_batches());
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 200; ++i) futures.push_back(gpu.relu(ramp(32, static_cast<float>(i))));
  for (auto& f : futures) {
    try {
      f.get();
      ADD_FAILURE() << "a request succeeded on lost devices";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::device_lost) << e.what();
    }
  }
  // The members recover; later requests run.
  s.a->fail_next_wait(ErrorCode::device_lost, 0);
  s.b->fail_next_wait(ErrorCode::device_lost, 0);
  auto x = ramp(32, 9.0f);
  EXPECT_EQ(gpu.relu(x).get(), relu_of(x));
}

TEST(DeviceSet, NoMemberLeftOnSubmitFailsTheBatch) {
  Set s;
  s.a->fail_next_submit(ErrorCode::device_lost, 1 << 20);
  s.b->fail_next_submit(ErrorCode::device_lost, 1 << 20);
  BatchExecutor executor(s.set, small_batches());
  auto gpu = executor.handle();
  try {
    gpu.relu(ramp(32, 1.0f)).get();
    FAIL() << "expected device_lost";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device_lost);
  }
}

// Host memory owned by one fake member: its can_run() accepts only that memory.
struct FakeHostMemory : detail::HostMemory {
  explicit FakeHostMemory(std::size_t n) : storage(n) {
    data = storage.data();
    floats = n;
  }
  std::vector<float> storage;
};

class OwningFake : public FakeDevice {
 public:
  using FakeDevice::FakeDevice;
  HostBuffer allocate(std::size_t n) {
    auto m = std::make_shared<FakeHostMemory>(n);
    owned_.push_back(m.get());
    return HostBuffer(std::move(m));
  }
  bool can_run(const Request& r) const override {
    for (const auto* m : {r.host_a.get(), r.host_result.get()})
      if (m && std::find(owned_.begin(), owned_.end(), m) == owned_.end()) return false;
    return true;
  }

 private:
  std::vector<const detail::HostMemory*> owned_;  // set before use
};

TEST(DeviceSet, HostBufferRequestsRunOnTheirOwnerAndFailClearlyWhenItIsLost) {
  auto a = std::make_shared<OwningFake>();
  auto b = std::make_shared<OwningFake>();
  std::vector<HostBuffer> buffers;
  for (int i = 0; i < 8; ++i) {
    buffers.push_back(b->allocate(64));
    for (std::size_t k = 0; k < 64; ++k) buffers.back()[k] = static_cast<float>(k) - 32.0f + i;
  }
  auto set = std::make_shared<detail::DeviceSet>(std::vector<std::shared_ptr<detail::BatchDevice>>{a, b}, 60000ms);
  BatchExecutor executor(set, small_batches());
  auto gpu = executor.handle();
  for (int round = 0; round < 3; ++round) {
    std::vector<std::future<Result>> futures;
    for (auto& buf : buffers) futures.push_back(gpu.submit(Request::from_host(Op::relu, buf)));
    for (std::size_t i = 0; i < futures.size(); ++i) {
      const Result r = futures[i].get();
      EXPECT_EQ(r.values, relu_of(std::vector<float>(buffers[i].begin(), buffers[i].end())));
    }
  }
  EXPECT_EQ(a->requests_seen(), 0u);
  EXPECT_EQ(b->requests_seen(), 3u * buffers.size());
  // The owner lost with them in flight: they fail (device_lost, saying why), never run on `a`;
  // plain requests in the same batches still run.
  b->fail_next_wait(ErrorCode::device_lost, 1 << 20);
  std::vector<std::future<Result>> host;
  for (auto& buf : buffers) host.push_back(gpu.submit(Request::from_host(Op::relu, buf)));
  auto x = ramp(32, 2.0f);
  auto plain = gpu.relu(x);
  for (auto& f : host) {
    try {
      f.get();
      ADD_FAILURE() << "a HostBuffer request succeeded on its lost owner";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::device_lost);
      EXPECT_NE(std::string(e.what()).find("HostBuffers"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(plain.get(), relu_of(x));
  EXPECT_EQ(a->requests_seen(), 1u);  // only the plain request (directly, or re-run from `b`)
}

// One batch holding HostBuffer requests of both members and plain ones: split by owner, each
// result back in place.
// A lone large request from HostBuffers every member can run, on a set whose members are idle,
// runs in ranges, one per member: each range a request of its own on its member, the result whole
// in the caller's buffer. Not spread: below the line, beside a busy member, or with the line
// turned off.
TEST(DeviceSet, ALoneLargeRequestFromSharedHostBuffersIsSpreadOverIdleMembers) {
  testing::EnvGuard line("GPUBATCH_SET_SPREAD_BYTES", "1048576");
  Set s;
  BatchExecutor executor(s.set, small_batches());
  auto gpu = executor.handle();
  auto x = std::make_shared<FakeHostMemory>(300'000);
  for (std::size_t i = 0; i < x->storage.size(); ++i) x->storage[i] = static_cast<float>(i % 13) - 6.0f;
  auto out = std::make_shared<FakeHostMemory>(300'000);
  gpu.submit(Request::from_host(Op::relu, HostBuffer(x)).deliver_to(HostBuffer(out))).get();
  ASSERT_EQ(s.a->batches(), 1u);
  ASSERT_EQ(s.b->batches(), 1u);
  const Stats st = executor.stats();
  EXPECT_EQ(st.completed, 1u);
  EXPECT_EQ(st.batches, 1u);
  EXPECT_EQ(st.devices[0].requests + st.devices[1].requests, 2u) << "one range per member";
  EXPECT_EQ(st.devices[0].bytes + st.devices[1].bytes, 2 * 300'000 * sizeof(float));
  EXPECT_EQ(st.devices[0].bytes, 2 * 150'528 * sizeof(float)) << "ranges start on 1,024-float bounds";

  auto small = std::make_shared<FakeHostMemory>(100'000), small_out = std::make_shared<FakeHostMemory>(100'000);
  gpu.submit(Request::from_host(Op::relu, HostBuffer(small)).deliver_to(HostBuffer(small_out))).get();
  EXPECT_EQ(s.a->batches() + s.b->batches(), 3u) << "below the line: whole";

  Set u;  // member 0 holds a batch (ties go round robin from member 0)
  u.a->pause();
  BatchExecutor busy(u.set, small_batches());
  auto held = busy.handle().relu({-1.0f});
  ASSERT_TRUE(u.a->wait_for_batches(1));
  busy.handle().submit(Request::from_host(Op::relu, HostBuffer(x)).deliver_to(HostBuffer(out))).get();
  EXPECT_EQ(u.a->batches(), 1u);
  EXPECT_EQ(u.b->batches(), 1u) << "beside a busy member: whole, on the idle one";
  u.a->resume();
  held.get();
}

// The default line: 4 MiB of input and output.
TEST(DeviceSet, TheSpreadLineIsFourMebibytesByDefault) {
  ASSERT_EQ(std::getenv("GPUBATCH_SET_SPREAD_BYTES"), nullptr);
  Set s;
  BatchExecutor executor(s.set, small_batches());
  auto gpu = executor.handle();
  for (std::size_t n : {std::size_t{524'288}, std::size_t{524'287}}) {  // 4 MiB in and out, and under
    auto x = std::make_shared<FakeHostMemory>(n), out = std::make_shared<FakeHostMemory>(n);
    gpu.submit(Request::from_host(Op::relu, HostBuffer(x)).deliver_to(HostBuffer(out))).get();
  }
  EXPECT_EQ(s.a->batches() + s.b->batches(), 3u) << "the first in two ranges, the second whole";
}

TEST(DeviceSet, ASpreadRangeLostOnItsMemberRunsAgainOnTheOther) {
  testing::EnvGuard line("GPUBATCH_SET_SPREAD_BYTES", "1048576");
  Set s;
  s.b->fail_next_wait(ErrorCode::device_lost, 1);
  BatchExecutor executor(s.set, small_batches());
  auto x = std::make_shared<FakeHostMemory>(300'000), out = std::make_shared<FakeHostMemory>(300'000);
  executor.handle().submit(Request::from_host(Op::relu, HostBuffer(x)).deliver_to(HostBuffer(out))).get();
  const Stats st = executor.stats();
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(st.devices[1].failovers, 1u);
  EXPECT_EQ(st.devices[0].reruns, 1u);
  EXPECT_EQ(s.a->batches(), 2u) << "its own range and the lost one";
  testing::EnvGuard never("GPUBATCH_SET_SPREAD_BYTES", "never");
  Set t;
  BatchExecutor whole(t.set, small_batches());
  whole.handle().submit(Request::from_host(Op::relu, HostBuffer(x)).deliver_to(HostBuffer(out))).get();
  EXPECT_EQ(t.a->batches() + t.b->batches(), 1u) << "GPUBATCH_SET_SPREAD_BYTES=never";
  testing::EnvGuard bad("GPUBATCH_SET_SPREAD_BYTES", "lots");
  EXPECT_THROW(Set{}, Error);
}

TEST(DeviceSet, AMixedBatchIsSplitByOwner) {
  auto a = std::make_shared<OwningFake>();
  auto b = std::make_shared<OwningFake>();
  std::vector<HostBuffer> on_a, on_b;
  for (int i = 0; i < 4; ++i) {
    on_a.push_back(a->allocate(16));
    on_b.push_back(b->allocate(16));
    for (std::size_t k = 0; k < 16; ++k) {
      on_a.back()[k] = static_cast<float>(k) - 8.0f - i;
      on_b.back()[k] = 8.0f - static_cast<float>(k) + i;
    }
  }
  auto set = std::make_shared<detail::DeviceSet>(std::vector<std::shared_ptr<detail::BatchDevice>>{a, b}, 60000ms);
  BatchConfig config = BatchConfig::balanced();
  config.max_batch_size = 12;  // the 12 requests below are one batch
  config.max_wait = 60s;
  BatchExecutor executor(set, config);
  auto gpu = executor.handle();
  std::vector<std::pair<std::vector<float>, std::future<Result>>> calls;
  for (int i = 0; i < 4; ++i) {
    calls.emplace_back(std::vector<float>(on_b[i].begin(), on_b[i].end()), gpu.submit(Request::from_host(Op::relu, on_b[i])));
    auto x = ramp(16, static_cast<float>(i));
    calls.emplace_back(x, gpu.submit(Request::relu(x)));
    calls.emplace_back(std::vector<float>(on_a[i].begin(), on_a[i].end()), gpu.submit(Request::from_host(Op::relu, on_a[i])));
  }
  for (auto& [x, f] : calls) EXPECT_EQ(f.get().values, relu_of(x));
  EXPECT_EQ(executor.stats().batches, 1u);
  EXPECT_EQ(a->batches() + b->batches(), 3u);  // one submission per owner, one for the rest
  EXPECT_GE(a->requests_seen(), 4u);
  EXPECT_GE(b->requests_seen(), 4u);
  EXPECT_EQ(a->requests_seen() + b->requests_seen(), 12u);
}

// A kernel registered with rerun_on_loss = false: its request, lost with its member, fails with
// device_lost instead of running again; a plain request lost the same way runs again.
TEST(DeviceSet, AKernelThatOptedOutOfReRunsFailsWithItsLostMember) {
  Set s;
  auto kernel = std::make_shared<CustomKernelInfo>();
  kernel->name = "not_pure";
  kernel->key = "custom/not_pure";
  kernel->rerun_on_loss = false;
  BatchExecutor executor(s.set, small_batches());
  auto gpu = executor.handle();
  s.a->fail_next_wait(ErrorCode::device_lost, 1);
  auto f = gpu.submit(Request::custom(kernel, ramp(8, 1.0f)));  // the first batch: member 0
  try {
    f.get();
    ADD_FAILURE() << "expected device_lost";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::device_lost);
    EXPECT_NE(std::string(e.what()).find("rerun_on_loss = false"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.b->requests_seen(), 0u);
  EXPECT_EQ(executor.stats().devices[0].failovers, 0u);
}

TEST(DeviceSet, PrometheusLabelsEscapeDeviceNames) {
  Stats st;
  st.devices.resize(2);
  st.devices[0].name = "gpu \"a\"\\x";
  st.devices[1].name = "b";
  st.devices[1].live = false;
  st.devices[1].failovers = 7;
  const std::string text = to_prometheus(st);
  EXPECT_NE(text.find("gpubatch_device_info{device=\"0\",name=\"gpu \\\"a\\\"\\\\x\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("gpubatch_device_live{device=\"1\"} 0"), std::string::npos);
  EXPECT_NE(text.find("gpubatch_device_failovers_total{device=\"1\"} 7"), std::string::npos);
  EXPECT_EQ(to_prometheus(Stats{}).find("gpubatch_device_info"), std::string::npos);  // no devices, no series
}

// The lanes' tests: member 0 holds a small batch it does not finish (paused), so the executor is
// busy and member 1 is idle (ties go round robin from member 0). release() lets member 0 go. One
// core for the set: a lane is taken by a busy core's callers, and the test's threads would
// otherwise keep to different shards (DeviceSetShards.* has the lane of a shard).
struct BusySet {
  static BatchConfig one_core() {
    BatchConfig c = small_batches();
    c.shard_per_device = false;
    return c;
  }
  BusySet() : executor(paused_first(s), one_core()), gpu(executor.handle()), small(gpu.relu({-1.0f})) {
    EXPECT_TRUE(s.a->wait_for_batches(1));
  }
  void release() {
    s.a->resume();
    EXPECT_EQ(small.get(), std::vector<float>{0.0f});
  }
  static std::shared_ptr<detail::DeviceSet> paused_first(Set& set) {
    set.a->pause();
    return set.set;
  }
  Set s;
  BatchExecutor executor;
  BatchedGpuHandle gpu;
  std::future<std::vector<float>> small;
};

// The direct lane on a set: member 0 holds a small batch it does not finish (the executor is
// busy), and a large request's caller submits it itself; the set places it on member 1, the idle
// one, and the call comes back with its result while member 0 still holds its batch.
TEST(DeviceSet, ALargeRequestOfABusySetTakesTheLaneToTheIdleMember) {
  BusySet busy;
  const auto x = ramp(600'000, 0.5f);  // 4.8 MB in and out, over the 2 MiB line
  std::thread::id caller;
  std::future<std::vector<float>> large;
  std::thread t([&] {
    caller = std::this_thread::get_id();
    large = busy.gpu.relu(x);
  });
  t.join();
  ASSERT_EQ(large.wait_for(0s), std::future_status::ready) << "the lane's future comes back ready";
  EXPECT_EQ(large.get(), relu_of(x));
  ASSERT_EQ(busy.s.b->submit_threads().size(), 1u);
  EXPECT_EQ(busy.s.b->submit_threads().front(), caller) << "the caller's own thread submitted it";
  EXPECT_EQ(busy.s.a->batches(), 1u);
  EXPECT_EQ(busy.executor.stats().direct, 1u);
  EXPECT_EQ(busy.small.wait_for(0s), std::future_status::timeout);
  busy.release();
}

// A lane request whose member is lost runs again, whole, on the other member, and its caller
// still gets the right result; GPUBATCH_SET_LANES=off keeps a set's large requests on the strand.
TEST(DeviceSet, ALaneRequestLostOnItsMemberRunsAgainOnTheOther) {
  BusySet busy;
  busy.s.b->fail_next_wait(ErrorCode::device_lost, 1);
  const auto x = ramp(600'000, -0.5f);
  std::future<std::vector<float>> large;
  std::thread t([&] { large = busy.gpu.relu(x); });
  ASSERT_TRUE(busy.s.a->wait_for_batches(2)) << "the re-run goes to member 0, the only other one";
  busy.release();
  t.join();
  EXPECT_EQ(large.get(), relu_of(x));
  const Stats st = busy.executor.stats();
  EXPECT_EQ(st.direct, 1u);
  EXPECT_EQ(st.failed, 0u);
  EXPECT_EQ(st.devices[1].failovers, 1u);
  EXPECT_EQ(st.devices[0].reruns, 1u);
}

// A completion handler's large request on a busy set goes to the bulk lane's threads, which
// submit it to the set: placed on the idle member, resolved while member 0 still holds its batch.
TEST(DeviceSet, AHandlersLargeRequestTakesTheBulkLaneToTheIdleMember) {
  BusySet busy;
  const auto x = ramp(600'000, 1.5f);
  std::promise<std::vector<float>> got;
  busy.gpu.relu(x, [&](std::exception_ptr e, std::vector<float> v) {
    if (e) got.set_exception(e);
    else got.set_value(std::move(v));
  });
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready) << "served by member 1 while member 0 is paused";
  EXPECT_EQ(f.get(), relu_of(x));
  EXPECT_EQ(busy.s.b->batches(), 1u);
  EXPECT_NE(busy.s.b->submit_threads().front(), std::this_thread::get_id());
  EXPECT_EQ(busy.executor.stats().direct, 1u);
  busy.release();
}

TEST(DeviceSet, TheLanesCanBeTurnedOffForASet) {
  testing::EnvGuard off("GPUBATCH_SET_LANES", "off");
  BusySet busy;
  const auto x = ramp(600'000, 0.5f);
  auto large = busy.gpu.relu(x);  // batched by the strand: placed on member 1, resolved there
  EXPECT_EQ(large.get(), relu_of(x));
  EXPECT_EQ(busy.executor.stats().direct, 0u);
  EXPECT_NE(busy.s.b->submit_threads().front(), std::this_thread::get_id());
  busy.release();
}

TEST(DeviceSet, RefusesAnEmptyOrNullMemberList) {
  EXPECT_THROW(detail::DeviceSet({}, 1000ms), Error);
  EXPECT_THROW(detail::DeviceSet({nullptr}, 1000ms), Error);
}

TEST(DeviceSet, InflightDepthIsPerMember) {
  Set s;
  s.a->pause();
  s.b->pause();
  BatchConfig config = small_batches();  // 2 per member
  config.shard_per_device = false;        // one core, whose one calling thread fills them all
  BatchExecutor executor(s.set, config);
  auto gpu = executor.handle();
  std::vector<std::future<std::vector<float>>> futures;
  for (int i = 0; i < 4; ++i) {
    futures.push_back(gpu.relu(ramp(8, static_cast<float>(i))));
    ASSERT_TRUE(s.a->wait_for_batches((i + 2) / 2) && s.b->wait_for_batches((i + 1) / 2));
  }
  EXPECT_EQ(executor.stats().inflight_batches, 4u);
  s.a->resume();
  s.b->resume();
  for (auto& f : futures) f.get();
}

}  // namespace
}  // namespace gpubatch

// Prompt deadlines: the deadline watch on its own (order, cells the strand took, the heap's
// bound), and on the executor a request that expires while the strand is stuck in a submit.
#include "executor/deadline_watch.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <set>
#include <thread>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "config_test_util.hpp"
#include "fake_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "hold_strand.hpp"
#include "test_util.hpp"

namespace gpubatch::testing {
namespace {

using namespace std::chrono_literals;
using detail::DeadlineWatch;
using detail::ExpiryCell;
using Clock = std::chrono::steady_clock;

std::shared_ptr<ExpiryCell> cell_at(Clock::time_point deadline, int id) {
  auto c = std::make_shared<ExpiryCell>();
  c->deadline = deadline;
  c->shape.floats = static_cast<std::size_t>(id);  // the test's id
  return c;
}

TEST(DeadlineWatch, ExpiresCellsInDeadlineOrderAndSkipsTakenOnes) {
  std::mutex m;
  std::vector<std::size_t> order;
  DeadlineWatch watch([&](ExpiryCell& c) {
    if (!c.expire()) return;
    std::lock_guard<std::mutex> lock(m);
    order.push_back(c.shape.floats);
  });
  const auto now = Clock::now();
  auto taken = cell_at(now + 20ms, 2);
  watch.add(cell_at(now + 40ms, 3));
  watch.add(taken);
  watch.add(cell_at(now + 10ms, 1));
  ASSERT_TRUE(taken->take());  // the strand took it: it is never expired
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(m);
    return order.size() == 2;
  }));
  std::this_thread::sleep_for(30ms);
  std::lock_guard<std::mutex> lock(m);
  EXPECT_EQ(order, (std::vector<std::size_t>{1, 3}));
  EXPECT_FALSE(taken->expired());
  EXPECT_TRUE(taken->take());  // still the strand's
}

TEST(DeadlineWatch, TakenCellsDoNotAccumulate) {
  DeadlineWatch watch([](ExpiryCell& c) { c.expire(); });
  const auto far = Clock::now() + 1h;
  for (int i = 0; i < 100000; ++i) {
    auto c = cell_at(far, i);
    watch.add(c);
    c->take();
  }
  // The inbox is taken in at least every 4096 cells and taken cells are swept from the heap: what
  // is held stays a small multiple of that, not the 100,000 added.
  EXPECT_TRUE(eventually([&] { return watch.size() < 16384u; })) << watch.size();
  watch.stop();
}

// A cell the strand left to the watch (its request dropped from the queue) is still the watch's
// to expire, also across the sweeps that drop taken cells from the heap; the watch learns it was
// left. Cells are marked watched once added.
TEST(DeadlineWatch, ExpiresCellsTheStrandLeftEvenAcrossSweeps) {
  std::mutex m;
  std::vector<std::pair<std::size_t, bool>> expired;  // id, was left
  DeadlineWatch watch([&](ExpiryCell& c) {
    bool left = false;
    if (!c.expire(&left)) return;
    std::lock_guard<std::mutex> lock(m);
    expired.emplace_back(c.shape.floats, left);
  });
  const auto now = Clock::now();
  auto left = cell_at(now + 30ms, 1);
  EXPECT_FALSE(left->watched.load());
  watch.add(left);
  EXPECT_TRUE(left->watched.load());
  ASSERT_TRUE(left->leave());
  EXPECT_TRUE(left->pending());
  EXPECT_FALSE(left->take()) << "a left cell is not the strand's any more";
  for (int i = 0; i < 5000; ++i) {  // enough taken cells for a sweep of the heap
    auto c = cell_at(now + 1h, 100 + i);
    watch.add(c);
    c->take();
  }
  watch.add(cell_at(now + 40ms, 2));
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(m);
    return expired.size() == 2;
  }));
  std::lock_guard<std::mutex> lock(m);
  EXPECT_EQ(expired, (std::vector<std::pair<std::size_t, bool>>{{1, true}, {2, false}}));
  EXPECT_TRUE(left->expired());
  EXPECT_FALSE(left->leave()) << "expired already";
}

TEST(DeadlineWatch, AStoppedWatchTakesNoMoreCells) {
  int calls = 0;
  DeadlineWatch watch([&](ExpiryCell&) { ++calls; });
  watch.stop();
  watch.add(cell_at(Clock::now(), 1));
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(watch.size(), 0u);
}

// The strand is stuck in the device's submit (a large batch being packed); a request whose
// deadline passes meanwhile fails at its deadline, not when the strand is back.
TEST(PromptDeadline, ARequestExpiresWhileTheStrandIsBusySubmitting) {
  auto device = std::make_shared<FakeDevice>();
  device->hold_submits();
  BatchExecutor executor(device, BatchConfig::adaptive());
  auto gpu = executor.handle();
  // From a thread of its own: on an idle executor a future's call submits its lone batch on the
  // caller's thread (held here), and this thread has to go on.
  auto first = std::async(std::launch::async, [gpu] { return gpu.relu({1.0f}).get(); });
  ASSERT_TRUE(device->wait_for_submits_entered(1));  // the strand is inside submit()
  const auto start = Clock::now();
  auto doomed = gpu.relu({2.0f}, SubmitOptions::within(30ms));
  auto patient = gpu.relu({3.0f});
  ASSERT_TRUE(ready_within(doomed, 30s));
  const auto waited = Clock::now() - start;
  EXPECT_GE(waited, 30ms);
  EXPECT_EQ(error_code(doomed), ErrorCode::deadline_exceeded);
  EXPECT_EQ(device->requests_seen(), 0u) << "nothing was submitted: the strand is still held";
  EXPECT_FALSE(ready(patient));
  device->release_submits();
  ASSERT_TRUE(ready_within(first, 30s));
  ASSERT_TRUE(ready_within(patient, 30s));
  EXPECT_EQ(patient.get(), (std::vector<float>{3.0f}));
  const Stats s = executor.stats();
  EXPECT_EQ(s.expired, 1u);
  EXPECT_EQ(s.completed, 2u);
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_EQ(device->requests_seen(), 2u) << "the expired request never reached the device";
}

// The watch runs a handler inline, as a completion thread does: a handler that shuts the executor
// down there must not wait for itself.
TEST(PromptDeadline, AHandlerOnTheWatchThreadMayShutTheExecutorDown) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, BatchConfig::adaptive());
  auto gpu = executor.handle();
  auto first = hold_the_strand(*device, gpu);
  std::promise<ErrorCode> seen;
  gpu.relu({2.0f}, SubmitOptions::within(20ms), [&](std::exception_ptr e, std::vector<float>) {
    try {
      std::rethrow_exception(e);
    } catch (const Error& x) {
      executor.shutdown(ShutdownMode::cancel);  // on the watch's thread: returns at once
      seen.set_value(x.code());
    }
  });
  auto outcome = seen.get_future();
  const bool heard = outcome.wait_for(30s) == std::future_status::ready;
  device->release_submits();  // before any assertion can end the test with the strand held
  ASSERT_TRUE(heard);
  EXPECT_EQ(outcome.get(), ErrorCode::deadline_exceeded);
  auto late = gpu.relu({3.0f});
  ASSERT_TRUE(ready_within(late, 30s));
  EXPECT_EQ(error_code(late), ErrorCode::shut_down);
  ASSERT_TRUE(ready_within(first, 30s));
  EXPECT_EQ(first.get(), (std::vector<float>{1.0f}));  // already submitted: it ran
}

// Without the watch (GPUBATCH_DEADLINE_WATCH=off) the strand's own sweeps still fail a waiting
// request once its deadline has passed.
TEST(PromptDeadline, WithoutTheWatchTheStrandExpiresWaitingRequests) {
  auto device = std::make_shared<FakeDevice>();
  device->pause();
  BatchConfig c = BatchConfig::adaptive();
  c.max_inflight_batches = 1;
  std::optional<BatchExecutor> made;
  {
    EnvGuard off("GPUBATCH_DEADLINE_WATCH", "off");  // read when the executor is made
    made.emplace(device, c);
  }
  BatchExecutor& executor = *made;
  auto gpu = executor.handle();
  auto first = gpu.relu({1.0f});
  ASSERT_TRUE(device->wait_for_batches(1));
  auto doomed = gpu.relu({2.0f}, SubmitOptions::within(20ms));
  ASSERT_TRUE(ready_within(doomed, 30s));
  EXPECT_EQ(error_code(doomed), ErrorCode::deadline_exceeded);
  device->resume();
  ASSERT_TRUE(ready_within(first, 30s));
  EXPECT_EQ(executor.stats().expired, 1u);
}

// Many requests with staggered deadlines, some taken by the strand, some expired by the watch,
// some cancelled by shutdown: each resolves exactly once and the counts add up.
TEST(PromptDeadline, EveryRequestResolvesOnceWhateverTakesIt) {
  auto device = std::make_shared<FakeDevice>(FakeDevice::Options{.delay = 200us});
  BatchConfig c = BatchConfig::adaptive();
  c.max_batch_size = 32;
  BatchExecutor executor(device, c);
  std::vector<std::future<std::vector<float>>> all;
  auto gpu = executor.handle();
  for (int i = 0; i < 3000; ++i)
    all.push_back(gpu.relu({static_cast<float>(i)}, SubmitOptions::within(std::chrono::microseconds(50 + (i * 37) % 3000))));
  std::size_t ok = 0, expired = 0;
  for (auto& f : all) {
    ASSERT_TRUE(ready_within(f, 30s));
    const auto code = error_code(f);
    if (!code) ++ok;
    else if (*code == ErrorCode::deadline_exceeded) ++expired;
    else ADD_FAILURE() << "unexpected error";
  }
  executor.shutdown();
  const Stats s = executor.stats();
  EXPECT_EQ(ok + expired, all.size());
  EXPECT_EQ(s.completed, ok);
  EXPECT_EQ(s.expired + s.rejected, expired);
  EXPECT_EQ(s.queue_depth, 0u);
}

}  // namespace
}  // namespace gpubatch::testing

namespace gpubatch::testing {
namespace {
std::string error_text(std::future<std::vector<float>>& f) {
  try {
    f.get();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// Requests of one shape that expire together share one deadline error (the watch formats and
// allocates it once); each still gets its own shape's message, in any order of shapes.
TEST(PromptDeadline, EachExpiredRequestNamesItsOwnShape) {
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, BatchConfig::adaptive());
  auto gpu = executor.handle();
  auto first = hold_the_strand(*device, gpu);
  const auto when = SubmitOptions::within(100ms);  // all six queued before it, on a slow machine too
  std::vector<std::future<std::vector<float>>> ones, threes;
  for (int i = 0; i < 3; ++i) {
    ones.push_back(gpu.relu({1.0f}, when));
    threes.push_back(gpu.relu({1.0f, 2.0f, 3.0f}, when));
  }
  for (auto& f : ones) ASSERT_TRUE(ready_within(f, 30s));
  for (auto& f : threes) ASSERT_TRUE(ready_within(f, 30s));
  device->release_submits();
  for (auto& f : ones) EXPECT_NE(error_text(f).find("relu request (1 floats)"), std::string::npos);
  for (auto& f : threes) EXPECT_NE(error_text(f).find("relu request (3 floats)"), std::string::npos);
  ASSERT_TRUE(ready_within(first, 30s));
  EXPECT_EQ(executor.stats().expired, 6u);
}
}  // namespace gpubatch::testing

namespace gpubatch::testing {
namespace {

struct Heard {
  std::promise<void> done;
  std::thread::id thread;
  std::optional<ErrorCode> code;
};

// A relu handler that notes its thread and error code, after waiting on `gate` when given.
auto noting(Heard& h, std::shared_future<void> gate = {}) {
  return [&h, gate](std::exception_ptr e, std::vector<float>) {
    if (gate.valid()) gate.wait();
    h.thread = std::this_thread::get_id();
    try {
      if (e) std::rethrow_exception(e);
    } catch (const Error& x) {
      h.code = x.code();
    }
    h.done.set_value();
  };
}

// Request 2's deadline passes while the watch is held in request 1's handler; then the strand,
// draining for shutdown, pulls request 2. With the watch holding its cell, the strand leaves it to
// the watch (it does not fail it itself), and the shutdown waits for the watch to resolve it. With
// GPUBATCH_STRAND_EXPIRES=on the strand fails it, on another thread, while the watch is held.
void the_strand_finds_an_expired_request(bool strand_expires) {
  Heard one, two;
  std::promise<void> open;
  std::shared_future<void> gate = open.get_future().share();
  bool opened = false;
  auto open_gate = [&] {
    if (!opened) open.set_value();
    opened = true;
  };
  auto device = std::make_shared<FakeDevice>();
  std::optional<BatchExecutor> made;
  {
    EnvGuard sw("GPUBATCH_STRAND_EXPIRES", strand_expires ? "on" : "");
    // A watch that woke late on a busy machine (past the 1 ms lag limit) is not left more
    // (ALaggingWatchIsNotLeftMore): here it may be as late as it likes.
    EnvGuard lag("GPUBATCH_WATCH_LAG_US", "10000000");
    made.emplace(device, BatchConfig::adaptive());
  }
  struct OpenOnExit {  // destroyed before the executor: a failed assertion cannot leave it held
    std::function<void()> f;
    ~OpenOnExit() { f(); }
  } guard{open_gate};
  BatchExecutor& executor = *made;
  auto gpu = executor.handle();
  auto first = hold_the_strand(*device, gpu);
  gpu.relu({1.0f}, SubmitOptions::within(5ms), noting(one, gate));
  gpu.relu({2.0f}, SubmitOptions::within(10ms), noting(two));
  std::this_thread::sleep_for(30ms);  // both deadlines have passed; the watch waits in one's handler
  device->release_submits();
  ASSERT_TRUE(ready_within(first, 30s));
  auto heard_two = two.done.get_future();
  auto closing = std::async(std::launch::async, [&] { executor.shutdown(); });  // the strand drains
  if (strand_expires) {
    ASSERT_EQ(heard_two.wait_for(30s), std::future_status::ready) << "the strand failed it";
  } else {
    EXPECT_EQ(heard_two.wait_for(50ms), std::future_status::timeout) << "left to the watch, which is held";
    EXPECT_EQ(closing.wait_for(0s), std::future_status::timeout) << "shutdown waits for the watch";
  }
  open_gate();
  ASSERT_EQ(closing.wait_for(30s), std::future_status::ready);
  ASSERT_EQ(heard_two.wait_for(0s), std::future_status::ready);
  ASSERT_EQ(one.done.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_EQ(one.code, ErrorCode::deadline_exceeded);
  EXPECT_EQ(two.code, ErrorCode::deadline_exceeded);
  if (strand_expires) EXPECT_NE(two.thread, one.thread);
  else EXPECT_EQ(two.thread, one.thread) << "both failed on the watch's thread";
  EXPECT_EQ(executor.stats().expired, 2u);
  EXPECT_EQ(device->requests_seen(), 1u) << "only the first request reached the device";
}

// Requests due together by the hundred are failed on the watch's thread and the completion
// threads at once (DeadlineWatch's spread); each exactly once. GPUBATCH_EXPIRY_SPREAD=off: on the
// watch's thread alone.
std::set<std::thread::id> threads_that_expired(bool spread) {
  auto device = std::make_shared<FakeDevice>();
  std::optional<BatchExecutor> made;
  {
    EnvGuard sw("GPUBATCH_EXPIRY_SPREAD", spread ? "" : "off");
    made.emplace(device, BatchConfig::adaptive());
  }
  BatchExecutor& executor = *made;
  auto gpu = executor.handle();
  auto first = hold_the_strand(*device, gpu);
  constexpr int kRequests = 256;
  std::mutex m;
  std::set<std::thread::id> threads;
  std::atomic<int> expired{0}, other{0};
  std::promise<void> all;
  // One deadline for all: one round of the watch. Far enough ahead that all 256 are queued before
  // it (under TSan beside other tests the loop once took over 20 ms: the later ones were refused
  // at their call, on this thread).
  const auto when = Clock::now() + 500ms;
  for (int i = 0; i < kRequests; ++i) {
    gpu.relu({1.0f}, SubmitOptions::at(when), [&](std::exception_ptr e, std::vector<float>) {
      std::this_thread::sleep_for(200us);  // a handler with some work to do
      {
        std::lock_guard<std::mutex> lock(m);
        threads.insert(std::this_thread::get_id());
      }
      std::optional<ErrorCode> code;
      try {
        if (e) std::rethrow_exception(e);
      } catch (const Error& x) {
        code = x.code();
      }
      if (code == ErrorCode::deadline_exceeded) ++expired;
      else ++other;
      if (expired + other == kRequests) all.set_value();
    });
  }
  EXPECT_LT(Clock::now(), when) << "256 requests took over 500 ms to queue";
  const bool done = all.get_future().wait_for(30s) == std::future_status::ready;
  device->release_submits();
  EXPECT_TRUE(done);
  EXPECT_TRUE(ready_within(first, 30s));
  EXPECT_EQ(expired.load(), kRequests);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(executor.stats().expired, static_cast<std::uint64_t>(kRequests));
  return threads;
}

TEST(PromptDeadline, ManyDueRequestsFailOnSeveralThreads) {
  EXPECT_GE(threads_that_expired(true).size(), 2u);
  EXPECT_EQ(threads_that_expired(false).size(), 1u);
}

// A watch that is behind (its latest expiry began 20 ms after that request's deadline, over
// ExecutorCore::kWatchLagLimit) is not left more: the strand fails the expired request it finds
// itself, on another thread, while the watch is still held.
TEST(PromptDeadline, ALaggingWatchIsNotLeftMore) {
  Heard one, two, four;
  std::promise<void> open1, open2;
  std::shared_future<void> gate1 = open1.get_future().share(), gate2 = open2.get_future().share();
  bool opened1 = false, opened2 = false;
  auto open_all = [&] {
    if (!opened1) open1.set_value();
    if (!opened2) open2.set_value();
    opened1 = opened2 = true;
  };
  auto device = std::make_shared<FakeDevice>();
  BatchExecutor executor(device, BatchConfig::adaptive());
  struct OpenOnExit {
    std::function<void()> f;
    ~OpenOnExit() { f(); }
  } guard{open_all};
  auto gpu = executor.handle();
  auto first = hold_the_strand(*device, gpu);
  gpu.relu({1.0f}, SubmitOptions::within(5ms), noting(one, gate1));
  gpu.relu({2.0f}, SubmitOptions::within(10ms), noting(two, gate2));
  std::this_thread::sleep_for(30ms);
  open1.set_value();  // the watch goes on to request 2, 20 ms late, and waits in its handler
  opened1 = true;
  std::this_thread::sleep_for(10ms);
  gpu.relu({4.0f}, SubmitOptions::within(5ms), noting(four));
  std::this_thread::sleep_for(20ms);  // request 4's deadline has passed; the watch is held
  device->release_submits();          // the strand pulls request 4
  auto heard_four = four.done.get_future();
  ASSERT_EQ(heard_four.wait_for(30s), std::future_status::ready) << "the strand failed it, the watch being held";
  EXPECT_EQ(four.code, ErrorCode::deadline_exceeded);
  open_all();
  ASSERT_TRUE(ready_within(first, 30s));
  ASSERT_EQ(two.done.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_NE(four.thread, two.thread) << "not on the watch's thread";
  EXPECT_EQ(executor.stats().expired, 3u);
}

// A jammed executor (device paused, one slot, batches of 2, a queue of 4) for requests with
// deadlines that meet a full queue: the watch holds each request's deadline from before its push.
// The first request goes out alone (the next is pushed once its batch was submitted), so the jam
// holds 1 in flight + 2 forming + 4 queued whatever the timing. (It pushed 8 at once: when the
// test thread lost its core for the 1 ms max_wait, the first batch went out with 1 request, only
// 7 fitted, and the eighth call, overflow = block without a deadline, waited for room until the
// 60 s watchdog failed the paused batch: CI under a sanitizer, 2026-12-01.)
std::unique_ptr<BatchExecutor> jammed(FakeDevice& device, const std::shared_ptr<FakeDevice>& shared,
                                      OverflowPolicy policy, std::vector<std::future<std::vector<float>>>& held) {
  BatchConfig c = BatchConfig::balanced();
  c.max_batch_size = 2;
  c.max_wait = std::chrono::microseconds(1000);
  c.queue_capacity = 4;
  c.max_inflight_batches = 1;
  c.overflow = policy;
  c.deadline_admission = false;  // every request meets the queue
  auto executor = std::make_unique<BatchExecutor>(shared, c);
  auto gpu = executor->handle();
  device.pause();
  held.push_back(gpu.relu({0.0f}));
  EXPECT_TRUE(device.wait_for_batches(1));  // the one slot taken, by a batch of 1
  for (int i = 1; i < 7; ++i) held.push_back(gpu.relu({float(i)}));  // the former and the queue full
  return executor;
}

// A push refused at once (overflow = reject) takes back the cell the watch already holds: the
// request fails once, with queue_full, and its deadline passing later fails nothing.
TEST(PromptDeadline, ARefusedRequestIsNotExpiredLater) {
  auto device = std::make_shared<FakeDevice>();
  std::vector<std::future<std::vector<float>>> held;
  auto executor = jammed(*device, device, OverflowPolicy::reject, held);
  auto gpu = executor->handle();
  const std::uint64_t before = executor->stats().rejected;  // some of the jam's own may be refused
  std::size_t refused = 0, accepted = 0;
  for (int i = 0; i < 16; ++i) {
    const auto pushed = std::chrono::steady_clock::now();
    auto f = gpu.relu({1.0f}, SubmitOptions::within(5ms));
    if (!ready(f)) {
      held.push_back(std::move(f));
      ++accepted;
      continue;
    }
    // Ready at once is a refusal, unless this thread lost the core for the whole 5 ms (a CI run
    // under a sanitizer did): then it is an accepted request the watch failed at its deadline.
    const auto code = error_code(f);
    if (code == ErrorCode::queue_full) {
      ++refused;
    } else {
      EXPECT_EQ(code, ErrorCode::deadline_exceeded);
      EXPECT_GE(std::chrono::steady_clock::now() - pushed, 5ms) << "failed before its deadline";
      ++accepted;
    }
  }
  ASSERT_GT(refused, 0u);
  std::this_thread::sleep_for(30ms);  // every deadline has passed, with the watch running
  const Stats s = executor->stats();
  EXPECT_EQ(s.rejected - before, refused);
  EXPECT_LE(s.expired, accepted) << "only the accepted ones with a deadline may expire";
  device->resume();
  for (auto& f : held) ASSERT_TRUE(ready_within(f, 30s));
  executor->shutdown();
  EXPECT_EQ(executor->stats().rejected - before, refused);
}

// A caller that waits for room (overflow = block) past its request's deadline: the request fails
// once with deadline_exceeded, by the watch or by the call's own end of waiting, whichever comes
// first, and the counts say so once.
TEST(PromptDeadline, ARequestWaitingForRoomFailsOnceAtItsDeadline) {
  auto device = std::make_shared<FakeDevice>();
  std::vector<std::future<std::vector<float>>> held;
  auto executor = jammed(*device, device, OverflowPolicy::block, held);
  auto gpu = executor->handle();
  const auto start = Clock::now();
  auto f = gpu.relu({1.0f}, SubmitOptions::within(20ms));  // blocks for room until its deadline
  ASSERT_TRUE(ready_within(f, 30s));
  EXPECT_GE(Clock::now() - start, 20ms);
  EXPECT_EQ(error_code(f), ErrorCode::deadline_exceeded);
  std::this_thread::sleep_for(20ms);
  const Stats s = executor->stats();
  EXPECT_EQ(s.expired + s.rejected, 1u);
  device->resume();
  for (auto& h : held) EXPECT_EQ(h.get().size(), 1u);
  executor->shutdown();
}

TEST(PromptDeadline, TheStrandLeavesAnExpiredRequestToTheWatch) { the_strand_finds_an_expired_request(false); }
TEST(PromptDeadline, WithStrandExpiresOnTheStrandFailsItItself) { the_strand_finds_an_expired_request(true); }

}  // namespace
}  // namespace gpubatch::testing

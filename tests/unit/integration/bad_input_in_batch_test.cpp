// Bad input inside a batch, through the executor, on the real device: each bad request gets its
// typed error and the good requests submitted with it (the same flush) all succeed with values
// that match the CPU reference. Most bad requests are refused before they join the batch (at
// submit); those only the device can find (a kernel that cannot be built, a hand-built kernel with
// no code) fail inside the batch, alone. docs/RELIABILITY.md lists each row and its test.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gpu/fault_injection.hpp"
#include "gpubatch/config.hpp"
#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/graph.hpp"
#include "gpubatch/reference.hpp"

using namespace gpubatch;
using namespace std::chrono_literals;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Requests above 1 MiB are refused with request_too_large.
Device& device() {
  static Device d([] {
    DeviceOptions o;
    o.max_request_bytes = 1 << 20;
    return o;
  }());
  return d;
}

BatchConfig one_batch() {
  BatchConfig c = BatchConfig::balanced();
  c.max_batch_size = 4096;
  c.max_wait = 500ms;  // everything submitted below joins one flush
  return c;
}

struct Case {
  std::string row;
  Request request;
  SubmitOptions options;
  std::optional<ErrorCode> expected;  // nullopt: succeeds, value checked against the reference
};

std::vector<Request> good_requests() {
  std::vector<Request> g;
  for (int i = 0; i < 4; ++i) {
    g.push_back(Request::relu({float(i), -1.0f, 2.5f}));
    g.push_back(Request::add({1.0f, 2.0f}, {float(i), 4.0f}));
    g.push_back(Request::dot({1.0f, 2.0f, 3.0f}, {float(i), 1.0f, 1.0f}));
    g.push_back(Request::matmul({1, 2, 3, 4, 5, 6}, {1, 0, 0, 1, 1, 1}, 2, 3, 2));
    g.push_back(Request::interpolate(std::vector<std::uint8_t>(16, 0x18), std::vector<std::uint8_t>(16, 0xE3),
                                     0.25f * float(i), InterpolationMode::slerp));
    g.push_back(chain({-1.0f, 0.5f, float(i)}).relu().scale(2.0f).add({1.0f, 1.0f, 1.0f}));
  }
  return g;
}

void check_case(const Case& c, std::future<Result>& f) {
  ASSERT_EQ(f.wait_for(120s), std::future_status::ready) << c.row;
  try {
    const Result got = f.get();
    if (c.expected) {
      ADD_FAILURE() << c.row << ": expected " << to_string(*c.expected) << ", got a value";
    } else {
      EXPECT_FALSE(reference::check(c.request, got).has_value()) << c.row << ": " << *reference::check(c.request, got);
    }
  } catch (const Error& e) {
    if (!c.expected) ADD_FAILURE() << c.row << ": " << e.what();
    else EXPECT_EQ(e.code(), *c.expected) << c.row << ": " << e.what();
  }
}

// Submits good and bad cases interleaved, all at once, and checks each.
void run_mixed(BatchExecutor& executor, std::vector<Case> bad) {
  auto gpu = executor.handle();
  std::vector<Case> cases;
  const auto good = good_requests();
  for (std::size_t i = 0; i < std::max(good.size(), bad.size()); ++i) {
    if (i < good.size()) cases.push_back({"good " + describe_op(good[i]), good[i], {}, std::nullopt});
    if (i < bad.size()) cases.push_back(bad[i]);
  }
  std::vector<std::future<Result>> futures;
  for (const Case& c : cases) futures.push_back(gpu.submit(c.request, c.options));
  for (std::size_t i = 0; i < cases.size(); ++i) check_case(cases[i], futures[i]);
}

struct Disarm {
  ~Disarm() { gpu::FaultInjector::disarm_all(); }
};

}  // namespace

TEST(BadInputInBatch, EachBadRequestFailsAloneAndTheGoodOnesOfItsBatchSucceed) {
  BatchExecutor executor(device(), one_batch());
  const auto ia = ErrorCode::invalid_argument;
  auto no_code = std::make_shared<CustomKernelInfo>();  // hand-built: no GLSL, no SPIR-V
  no_code->name = "handmade";
  no_code->key = "custom/handmade/0";
  const std::vector<std::uint8_t> all_bytes = [] {
    std::vector<std::uint8_t> v(256);
    for (int i = 0; i < 256; ++i) v[i] = static_cast<std::uint8_t>(i);
    return v;
  }();
  std::vector<Case> bad = {
      {"empty input", Request::relu({}), {}, ia},
      {"empty input (binary)", Request::add({}, {}), {}, ia},
      {"empty states", Request::gradients({}), {}, ia},
      {"mismatched lengths", Request::add({1, 2}, {1}), {}, ia},
      {"mismatched lengths (dot)", Request::dot({1, 2, 3}, {1, 2}), {}, ia},
      {"mismatched states", Request::interpolate(std::vector<std::uint8_t>(16), std::vector<std::uint8_t>(32), 0.5f,
                                                 InterpolationMode::lerp), {}, ia},
      {"states not whole", Request::gradients(std::vector<std::uint8_t>(17)), {}, ia},
      {"NaN and infinities pass through (not an error)", Request::relu({kNaN, kInf, -kInf, -0.0f, 1.0f}), {}, std::nullopt},
      {"NaN and infinities in add", Request::add({kNaN, kInf, kInf}, {1.0f, -kInf, 1.0f}), {}, std::nullopt},
      {"NaN and infinities in dot", Request::dot({kInf, 1.0f}, {1.0f, 1.0f}), {}, std::nullopt},
      {"request larger than any buffer", Request::relu(std::vector<float>(300000, 1.0f)), {}, ErrorCode::request_too_large},
      {"matmul mismatched dimensions", Request::matmul({1, 2, 3, 4}, {1, 2}, 2, 2, 2), {}, ia},
      {"matmul zero dimension", Request::matmul({}, {}, 0, 2, 2), {}, ia},
      {"matmul zero N", Request::matmul({1}, {}, 1, 1, 0), {}, ia},
      {"every state byte is a valid layer", Request::gradients(all_bytes), {}, std::nullopt},
      {"t below 0", Request::interpolate(std::vector<std::uint8_t>(16), std::vector<std::uint8_t>(16), -0.01f,
                                         InterpolationMode::lerp), {}, ia},
      {"t above 1", Request::interpolate(std::vector<std::uint8_t>(16), std::vector<std::uint8_t>(16), 1.01f,
                                         InterpolationMode::slerp), {}, ia},
      {"t NaN", Request::interpolate(std::vector<std::uint8_t>(16), std::vector<std::uint8_t>(16), kNaN,
                                     InterpolationMode::slerp), {}, ia},
      {"expired deadline", Request::relu({1.0f}), SubmitOptions::at(std::chrono::steady_clock::now() - 1ms),
       ErrorCode::deadline_exceeded},
      {"chain with no steps", Request::chain_of(std::make_shared<ChainShape>(std::vector<ChainStep>{}, 0), {1.0f}), {}, ia},
      {"hand-built kernel with no code (fails on the device, alone)", Request::custom(no_code, {1.0f, 2.0f}), {}, ia},
  };
  const Stats before = executor.stats();
  run_mixed(executor, bad);
  const Stats after = executor.stats();
  EXPECT_EQ(after.batches - before.batches, 1u) << "good and bad requests were submitted as one batch";
  // Out-of-range nibbles are refused where layers are packed.
  for (Layer l : {Layer{8, 0}, Layer{-9, 0}, Layer{0, 16}, Layer{0, -1}}) {
    try {
      pack_layer(l);
      ADD_FAILURE() << "pack_layer accepted rho " << l.rho << " theta " << l.theta;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ia);
    }
  }
}

TEST(BadInputInBatch, AKernelThatFailsToBuildFailsOnlyItsOwnRequests) {
  Disarm d;
  BatchExecutor executor(device(), one_batch());
  {  // the built-in and fused kernels the good requests use are built first
    auto gpu = executor.handle();
    std::vector<std::future<Result>> warm;
    for (const Request& r : good_requests()) warm.push_back(gpu.submit(r));
    for (auto& f : warm) f.get();
  }
  gpu::FaultInjector::arm(gpu::Fault::pipeline_build);  // the first new pipeline: this chain's
  std::vector<Case> bad;
  for (int i = 0; i < 3; ++i)
    bad.push_back({"kernel that fails to build", chain({float(i), 1.0f}).gelu().swish().tanh().sigmoid().scale(0.25f),
                   {}, ErrorCode::compile_failed});
  run_mixed(executor, bad);
  // Not remembered: the same shape builds and runs next time.
  auto again = executor.handle().submit(chain({1.0f, 1.0f}).gelu().swish().tanh().sigmoid().scale(0.25f)).get();
  EXPECT_EQ(again.values.size(), 2u);
}

TEST(BadInputInBatch, MalformedGlslIsRefusedAndTheRunningBatchIsUntouched) {
  BatchExecutor executor(device(), one_batch());
  auto gpu = executor.handle();
  const auto good = good_requests();
  std::vector<std::future<Result>> futures;
  for (const Request& r : good) futures.push_back(gpu.submit(r));
  try {
    register_kernel(device(), "broken_in_batch", KernelKind::elementwise, "return x +* 2.0;");
    ADD_FAILURE() << "malformed GLSL compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::compile_failed) << e.what();
  }
  for (std::size_t i = 0; i < good.size(); ++i)
    EXPECT_FALSE(reference::check(good[i], futures[i].get()).has_value());
}

TEST(BadInputInBatch, QueueFullUnderRejectFailsOnlyTheOverflow) {
  Disarm d;
  BatchConfig c = BatchConfig::latency();
  c.max_batch_size = 2;
  c.max_wait = 100ms;
  c.queue_capacity = 4;
  c.max_inflight_batches = 1;
  c.overflow = OverflowPolicy::reject;
  c.batch_timeout = 1000ms;
  BatchExecutor executor(device(), c);
  auto gpu = executor.handle();
  gpu::FaultInjector::arm(gpu::Fault::hang);  // the first batch holds the only slot for 1 s
  std::vector<Request> requests;
  for (int i = 0; i < 40; ++i) requests.push_back(Request::scale({float(i), 1.0f}, 2.0f));
  std::vector<std::future<Result>> futures;
  for (const Request& r : requests) futures.push_back(gpu.submit(r));
  int ok = 0, full = 0, lost = 0;
  for (std::size_t i = 0; i < futures.size(); ++i) {
    try {
      const Result got = futures[i].get();
      EXPECT_FALSE(reference::check(requests[i], got).has_value());
      ++ok;
    } catch (const Error& e) {
      if (e.code() == ErrorCode::queue_full) ++full;
      else if (e.code() == ErrorCode::device_lost) ++lost;  // the hung batch, by the watchdog
      else ADD_FAILURE() << e.what();
    }
  }
  EXPECT_EQ(lost, 2) << "only the hung batch";
  EXPECT_GT(full, 0);
  // At least a queue's worth was accepted (the hung batch's 2 among them); every accepted request
  // other than the hung batch's ran, however fast the strand pulled.
  EXPECT_GE(ok + lost, 4) << ok << " ran, " << full << " queue_full";
  EXPECT_GE(ok, 2) << ok << " ran, " << full << " queue_full";
  EXPECT_EQ(ok + full + lost, 40) << ok << " ran, " << full << " queue_full, " << lost << " device_lost";
}

TEST(BadInputInBatch, SubmitAfterShutdownFailsAndAcceptedRequestsDrain) {
  BatchExecutor executor(device(), one_batch());
  auto gpu = executor.handle();
  const auto good = good_requests();
  std::vector<std::future<Result>> futures;
  for (const Request& r : good) futures.push_back(gpu.submit(r));
  executor.shutdown(ShutdownMode::drain);
  for (std::size_t i = 0; i < good.size(); ++i)
    EXPECT_FALSE(reference::check(good[i], futures[i].get()).has_value());
  auto late = gpu.relu({1.0f});
  try {
    late.get();
    ADD_FAILURE() << "accepted after shutdown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::shut_down);
  }
}

TEST(BadInputInBatch, InvalidConfigPresetAndForeignBufferIdLeaveARunningExecutorUntouched) {
  BatchExecutor executor(device(), one_batch());
  auto gpu = executor.handle();
  const auto good = good_requests();
  std::vector<std::future<Result>> futures;
  for (const Request& r : good) futures.push_back(gpu.submit(r));
  auto expect_code = [](ErrorCode code, auto&& f) {
    try {
      f();
      ADD_FAILURE() << "expected " << to_string(code);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
    }
  };
  const auto ic = ErrorCode::invalid_config;
  expect_code(ic, [] { BatchConfig::from_string("max_batch_size = ="); });
  expect_code(ic, [] { BatchConfig::from_string("max_batch_size = 0"); });
  expect_code(ic, [] { BatchConfig::from_string("no_such_key = 1"); });
  expect_code(ic, [] { BatchConfig::preset("fastest"); });
  expect_code(ic, [] { BatchConfig::from_file("/nonexistent/gpubatch.toml"); });
  expect_code(ic, [] {
    BatchConfig c;
    c.completion_threads = 0;
    BatchExecutor bad(device(), c);
  });
  GpuCommandBatch g(device()), other(device());
  auto foreign = other.upload({1.0f});
  expect_code(ErrorCode::invalid_argument, [&] { g.relu(foreign); });
  for (std::size_t i = 0; i < good.size(); ++i)
    EXPECT_FALSE(reference::check(good[i], futures[i].get()).has_value());
}

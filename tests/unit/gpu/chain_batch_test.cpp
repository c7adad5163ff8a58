// Chains and custom kernels as requests: many chains of one shape (different lengths and
// scalars) in one submission are one fused ragged dispatch, beside built-in ops and other shapes;
// custom kernels batch the same way; a group whose kernel cannot be built fails only its own
// requests. Through the BatchDevice directly and through Device::run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "gpubatch/batch_device.hpp"
#include "gpu/fault_injection.hpp"
#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"
#include "support/random_data.hpp"
#include "test_device.hpp"

using namespace gpubatch;

namespace {


std::size_t random_length(std::mt19937& rng, std::size_t max = 3000) {
  return std::uniform_int_distribution<std::size_t>(1, max)(rng);
}

// Submits `requests` as one batch and returns each result (or the error it threw).
struct Outcome {
  std::optional<Result> result;
  std::optional<Error> error;
};
std::vector<Outcome> run_batch(Device& device, const std::vector<Request>& requests,
                               DeviceCounters* delta = nullptr) {
  std::vector<const Request*> pointers;
  for (const auto& r : requests) pointers.push_back(&r);
  const auto before = device.counters();
  auto in_flight = device.batch_device()->submit(pointers);
  EXPECT_TRUE(in_flight->wait_for(std::chrono::seconds(120)));
  const auto after = device.counters();
  if (delta) {
    delta->submissions = after.submissions - before.submissions;
    delta->dispatches = after.dispatches - before.dispatches;
    delta->uploads = after.uploads - before.uploads;
    delta->downloads = after.downloads - before.downloads;
  }
  std::vector<Outcome> out(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      Result r;
      in_flight->take_result(i, r);
      out[i].result = std::move(r);
    } catch (const Error& e) {
      out[i].error = e;
    }
  }
  return out;
}

void expect_reference(const std::vector<Request>& requests, const std::vector<Outcome>& outcomes) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(outcomes[i].result) << "request " << i << " failed: " << outcomes[i].error->what();
    const auto mismatch = reference::check(requests[i], *outcomes[i].result);
    ASSERT_FALSE(mismatch) << "request " << i << ": " << *mismatch;
  }
}

// Shape A (DESIGN.md's chain): relu -> scale(s) -> add(y).
Request chain_a(std::size_t n, float s, std::mt19937& rng) {
  return chain(random_floats(n, rng)).relu().scale(s).add(random_floats(n, rng));
}

// Shape B: every element-wise op, three extra inputs.
Request chain_b(std::size_t n, std::mt19937& rng) {
  return chain(random_floats(n, rng))
      .sigmoid()
      .mul(random_floats(n, rng))
      .lerp(random_floats(n, rng), 0.3f)
      .gelu()
      .tanh()
      .swish()
      .sub(random_floats(n, rng))
      .scale(-1.5f)
      .relu();
}

}  // namespace

TEST(ChainBatch, SameShapeIsOneDispatchBesideBuiltinsAndAnotherShape) {
  Device& device = test_device();
  std::mt19937 rng(11);
  std::vector<Request> requests;
  for (int i = 0; i < 200; ++i) requests.push_back(chain_a(random_length(rng), 0.5f + float(i % 7), rng));
  for (int i = 0; i < 40; ++i) requests.push_back(chain_b(random_length(rng), rng));
  for (int i = 0; i < 40; ++i) requests.push_back(Request::relu(random_floats(random_length(rng), rng)));
  for (int i = 0; i < 20; ++i)
    requests.push_back(Request::dot(random_floats(1500 + i, rng), random_floats(1500 + i, rng)));  // two passes
  for (int i = 0; i < 10; ++i) {
    const auto m = 3u + i, k = 5u, n = 7u + i;
    requests.push_back(Request::matmul(random_floats(m * k, rng), random_floats(k * n, rng), m, k, n));
  }
  std::shuffle(requests.begin(), requests.end(), rng);

  run_batch(device, requests);  // builds the fused kernels (the counters below are the steady state)
  DeviceCounters delta;
  const auto outcomes = run_batch(device, requests, &delta);
  EXPECT_EQ(delta.submissions, 1u);
  EXPECT_EQ(delta.uploads, 1u);
  EXPECT_EQ(delta.downloads, 1u);
  // chain A, chain B, relu, dot (two passes), matmul.
  EXPECT_EQ(delta.dispatches, 6u) << "one dispatch per chain shape, whatever the lengths and scalars";
  expect_reference(requests, outcomes);
}

TEST(ChainBatch, ShapesDifferingOnlyInWiringAreSeparateGroups) {
  // relu -> add(in0) -> mul(in1) and relu -> add(in1) -> mul(in0): same ops, other wiring.
  Device& device = test_device();
  std::mt19937 rng(12);
  std::vector<Request> requests;
  for (int i = 0; i < 30; ++i) {
    const std::size_t n = random_length(rng, 500);
    std::vector<float> y = random_floats(n, rng), z = random_floats(n, rng);
    std::vector<ChainStep> steps1 = {{Op::relu}, {Op::add, 0, 0}, {Op::mul, 0, 1}};
    std::vector<ChainStep> steps2 = {{Op::relu}, {Op::add, 0, 1}, {Op::mul, 0, 0}};
    requests.push_back(Request::chain_of(std::make_shared<const ChainShape>(steps1, 2), random_floats(n, rng), {y, z}));
    requests.push_back(Request::chain_of(std::make_shared<const ChainShape>(steps2, 2), random_floats(n, rng), {y, z}));
  }
  run_batch(device, requests);
  DeviceCounters delta;
  const auto outcomes = run_batch(device, requests, &delta);
  EXPECT_EQ(delta.dispatches, 2u);
  expect_reference(requests, outcomes);
}

TEST(ChainBatch, SharedShapeAndSpecialValues) {
  // One shape object shared by many requests; NaN, infinities, signed zeros and denormals pass
  // through as IEEE says (within check()'s flush allowance).
  Device& device = test_device();
  std::mt19937 rng(13);
  auto shape = std::make_shared<const ChainShape>(
      std::vector<ChainStep>{{Op::relu}, {Op::scale, 2.0f}, {Op::add, 0, 0}, {Op::tanh}}, 1);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<Request> requests;
  requests.push_back(Request::chain_of(shape, {nan, inf, -inf, -0.0f, 0.0f, 1e-40f, -1e-40f, 3e38f},
                                       {{1.0f, -inf, inf, -0.0f, 1e-40f, 0.0f, 1.0f, 3e38f}}));
  for (int i = 0; i < 20; ++i) {
    const std::size_t n = random_length(rng, 700);
    requests.push_back(Request::chain_of(shape, random_floats(n, rng), {random_floats(n, rng)}));
  }
  expect_reference(requests, run_batch(device, requests));
}

TEST(ChainBatch, SynchronousPath) {
  Device& device = test_device();
  std::mt19937 rng(14);
  const std::size_t n = 10007;
  const auto x = random_floats(n, rng), y = random_floats(n, rng);
  const Request r = chain(x).relu().scale(2.0f).add(y);
  const Result got = device.run(r);
  ASSERT_EQ(got.values.size(), n);
  EXPECT_FALSE(reference::check(r, got));
  for (std::size_t i = 0; i < n; ++i) {
    const float s = (x[i] < 0 ? 0.0f : x[i]) * 2.0f;  // exact: times 2
    ASSERT_EQ(got.values[i], s + y[i]) << i << ": relu, scale by 2 and add are correctly rounded";
  }
  const Request b = chain_b(4321, rng);
  const Result got_b = device.run(b);
  EXPECT_FALSE(reference::check(b, got_b));
}

TEST(ChainBatch, InvalidChainsAreRefused) {
  Device& device = test_device();
  auto code = [&](const Request& r) {
    try {
      device.run(r);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::internal;
  };
  EXPECT_EQ(code(chain({1.0f, 2.0f})), ErrorCode::invalid_argument);                 // no steps
  EXPECT_EQ(code(chain({1.0f, 2.0f}).relu().add({1.0f})), ErrorCode::invalid_argument);  // lengths
  EXPECT_EQ(code(chain({}).relu()), ErrorCode::invalid_argument);                    // empty x
  EXPECT_EQ(code(chain({1.0f}).apply(Op::dot, {1.0f})), ErrorCode::invalid_argument);  // not element-wise
  EXPECT_EQ(code(chain({1.0f}).apply(Op::add)), ErrorCode::invalid_argument);          // no second input
}

// ---- custom kernels -------------------------------------------------------------------------

TEST(CustomBatch, RaggedRequestsOfOneKernelAreOneDispatch) {
  Device& device = test_device();
  auto cube = register_kernel(device, "batch_cube", KernelKind::elementwise, "return x * x * x + p;");
  auto hyp = register_kernel(device, "batch_hyp", KernelKind::elementwise, "return sqrt(a * a + b * b) + p;",
                             {.inputs = 2});
  auto total = register_kernel(device, "batch_total", KernelKind::per_segment,
                               "float s = 0.0;\nfor (uint i = 0; i < n; ++i) s += a.v[i] * b.v[i];\ndst.v[0] = s + p;",
                               {.inputs = 2, .output_length = 1});
  ASSERT_TRUE(cube && hyp && total);
  EXPECT_EQ(find_kernel(device, "batch_cube"), cube);
  EXPECT_EQ(register_kernel(device, "batch_cube", KernelKind::elementwise, "return x * x * x + p;"), cube);

  std::mt19937 rng(21);
  std::vector<Request> requests;
  for (int i = 0; i < 300; ++i) {
    const std::size_t n = random_length(rng, 600);
    switch (i % 3) {
      case 0: requests.push_back(Request::custom(cube, random_floats(n, rng), {}, float(i))); break;
      case 1: requests.push_back(Request::custom(hyp, random_floats(n, rng), random_floats(n, rng), 0.25f)); break;
      default: requests.push_back(Request::custom(total, random_floats(n % 50 + 1, rng), random_floats(n % 50 + 1, rng), 1.0f));
    }
  }
  run_batch(device, requests);
  DeviceCounters delta;
  const auto outcomes = run_batch(device, requests, &delta);
  EXPECT_EQ(delta.submissions, 1u);
  EXPECT_EQ(delta.dispatches, 3u) << "one dispatch per kernel";
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    ASSERT_TRUE(outcomes[i].result) << outcomes[i].error->what();
    const auto& got = outcomes[i].result->values;
    ASSERT_EQ(got.size() * sizeof(float), output_bytes(r)) << i;
    if (r.kernel == total) {
      double want = r.scalar, mag = 0;
      for (std::size_t k = 0; k < r.a.size(); ++k) want += double(r.a[k]) * r.b[k], mag += std::fabs(double(r.a[k]) * r.b[k]);
      ASSERT_NEAR(got[0], want, (r.a.size() + 2) * 0x1p-24 * (mag + 1.0) + 1e-30) << i;
      continue;
    }
    for (std::size_t k = 0; k < r.a.size(); ++k) {
      const double x = r.a[k];
      const double want = r.kernel == cube ? x * x * x + r.scalar : std::sqrt(x * x + double(r.b[k]) * r.b[k]) + r.scalar;
      ASSERT_NEAR(got[k], want, 4e-6 * (std::fabs(want) + std::fabs(x * x * x) + 1.0)) << i << "[" << k << "]";
    }
  }
  // The CPU reference says plainly that it cannot check user code.
  const auto message = reference::check(requests[0], *outcomes[0].result);
  ASSERT_TRUE(message);
  EXPECT_NE(message->find("custom"), std::string::npos) << *message;
  EXPECT_THROW(reference::run(requests[0]), Error);
}

TEST(CustomBatch, ElementwiseKernelsChain) {
  Device& device = test_device();
  auto cube = register_kernel(device, "batch_cube", KernelKind::elementwise, "return x * x * x + p;");
  std::mt19937 rng(22);
  std::vector<Request> requests;
  for (int i = 0; i < 50; ++i) {
    const std::size_t n = random_length(rng, 800);
    requests.push_back(chain(random_floats(n, rng)).relu().custom(cube, 1.0f).add(random_floats(n, rng)));
  }
  run_batch(device, requests);
  DeviceCounters delta;
  const auto outcomes = run_batch(device, requests, &delta);
  EXPECT_EQ(delta.dispatches, 1u);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(outcomes[i].result) << outcomes[i].error->what();
    const Request& r = requests[i];
    for (std::size_t k = 0; k < r.a.size(); ++k) {
      const double x = std::max(0.0f, r.a[k]);
      const double want = x * x * x + 1.0 + r.inputs[0][k];
      ASSERT_NEAR(outcomes[i].result->values[k], want, 4e-6 * (std::fabs(want) + x * x * x + 2.0)) << i;
    }
  }
  EXPECT_TRUE(reference::check(requests[0], *outcomes[0].result).has_value()) << "no reference for user code";
}

TEST(CustomBatch, PerSegmentKernelThroughTheSynchronousPath) {
  Device& device = test_device();
  auto sum = register_kernel(device, "batch_prefix", KernelKind::per_segment,
                             "float s = p;\nfor (uint i = 0; i < n; ++i) { s += a.v[i]; dst.v[i] = s; }");
  const Result got = device.run(Request::custom(sum, {1, 2, 3, 4}, {}, 10.0f));
  EXPECT_EQ(got.values, (std::vector<float>{11, 13, 16, 20}));
}

// ---- every element-wise op of the table chains ---------------------------------------------

// Each element-wise op as a step (after relu and before scale, so that it is fused with others),
// and all of them in one chain, batched at ragged lengths, against the step-by-step reference.
TEST(ChainOps, EveryElementwiseOpOfTheTableFusesAndBatches) {
  Device& device = test_device();
  std::mt19937 rng(77);
  std::vector<Request> requests;
  for (int rep = 0; rep < 3; ++rep) {
    const std::size_t n_all = random_length(rng, 2000);
    ChainBuilder all(random_floats(n_all, rng, -3.0f, 3.0f));
    for (Op op : elementwise_ops()) {
      const OpInfo& info = op_info(op);
      const std::size_t n = random_length(rng, 2000);
      Request one = sample_request(op, n, rng);
      std::vector<float> y = info.arity == 2 ? one.b : std::vector<float>{};
      requests.push_back(chain(one.a).relu().apply(op, y, one.scalar, one.scalar2).scale(0.5f));
      all.apply(op, info.arity == 2 ? random_floats(n_all, rng, -3.0f, 3.0f) : std::vector<float>{},
                info.sample_scalar[0], info.sample_scalar[1]);
    }
    requests.push_back(std::move(all).build());
  }
  const auto outcomes = run_batch(device, requests);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(outcomes[i].result) << describe_op(requests[i]) << ": " << outcomes[i].error->what();
    const auto mismatch = reference::check(requests[i], *outcomes[i].result);
    EXPECT_FALSE(mismatch) << *mismatch;
  }
}

// ---- failures stay within their group --------------------------------------------------------

TEST(GroupFailure, AChainThatDoesNotCompileFailsOnlyItsOwnRequests) {
  Device& device = test_device();
  // Compiles alone, but its #define breaks the fused kernel generated around it.
  auto leaky = register_kernel(device, "batch_leaky", KernelKind::elementwise, "return x + 1.0;\n#define k 0u oops");
  std::mt19937 rng(31);
  std::vector<Request> requests;
  for (int i = 0; i < 30; ++i) {
    const std::size_t n = random_length(rng, 300);
    requests.push_back(chain_a(n, 2.0f, rng));
    requests.push_back(chain(random_floats(n, rng)).relu().custom(leaky));
    requests.push_back(Request::relu(random_floats(n, rng)));
    requests.push_back(Request::custom(leaky, random_floats(n, rng)));  // alone it works
  }
  const auto outcomes = run_batch(device, requests);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    if (r.op == Op::chain && r.chain->steps().back().op == Op::custom) {
      ASSERT_TRUE(outcomes[i].error) << i;
      EXPECT_EQ(outcomes[i].error->code(), ErrorCode::compile_failed);
      EXPECT_NE(std::string(outcomes[i].error->what()).find("chain request (relu -> batch_leaky)"), std::string::npos)
          << outcomes[i].error->what();
      continue;
    }
    ASSERT_TRUE(outcomes[i].result) << i << ": " << outcomes[i].error->what();
    if (r.op == Op::custom) {
      for (std::size_t k = 0; k < r.a.size(); ++k) ASSERT_EQ(outcomes[i].result->values[k], r.a[k] + 1.0f);
    } else {
      ASSERT_FALSE(reference::check(r, *outcomes[i].result));
    }
  }
  // Device::run reports it as the request's error.
  try {
    device.run(requests[1]);
    ADD_FAILURE() << "ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::compile_failed) << e.what();
  }
}

TEST(GroupFailure, AHandBuiltKernelFailsOnlyItsOwnRequests) {
  Device& device = test_device();
  auto fake = std::make_shared<CustomKernelInfo>();
  fake->name = "not_registered";
  fake->key = "custom/not_registered/0";
  std::vector<Request> requests = {Request::relu({-1.0f, 2.0f}), Request::custom(fake, {1.0f}),
                                   Request::scale({3.0f}, 2.0f)};
  const auto outcomes = run_batch(device, requests);
  ASSERT_TRUE(outcomes[1].error);
  EXPECT_EQ(outcomes[1].error->code(), ErrorCode::invalid_argument);
  EXPECT_NE(std::string(outcomes[1].error->what()).find("register_kernel"), std::string::npos);
  ASSERT_TRUE(outcomes[0].result && outcomes[2].result);
  EXPECT_EQ(outcomes[0].result->values, (std::vector<float>{0.0f, 2.0f}));
  EXPECT_EQ(outcomes[2].result->values, (std::vector<float>{6.0f}));
}

TEST(GroupFailure, APipelineBuildFailureIsNotRemembered) {
  Device& device = test_device();
  std::mt19937 rng(32);
  auto fresh_shape = [&](std::size_t n) {  // a shape no other test builds
    return chain(random_floats(n, rng)).scale(3.0f).swish().scale(0.5f).sigmoid().add(random_floats(n, rng)).build();
  };
  std::vector<Request> requests = {fresh_shape(100), Request::relu(random_floats(50, rng)), fresh_shape(7)};
  run_batch(device, {requests[1]});  // relu's pipeline exists
  gpu::FaultInjector::arm(gpu::Fault::pipeline_build);
  const auto failed = run_batch(device, requests);
  gpu::FaultInjector::disarm_all();
  ASSERT_TRUE(failed[0].error && failed[2].error);
  EXPECT_EQ(failed[0].error->code(), ErrorCode::compile_failed);
  ASSERT_TRUE(failed[1].result);
  EXPECT_FALSE(reference::check(requests[1], *failed[1].result));
  expect_reference(requests, run_batch(device, requests));  // built on the next batch
}

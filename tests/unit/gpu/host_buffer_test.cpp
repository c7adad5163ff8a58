// HostBuffer: pinned host memory a request reads (Request::from_host) and writes
// (Request::deliver_to) in place, on the direct path (kernels use its device address) and on the
// copy-engine path (vkCmdCopyBuffer from and to it). Every result against the CPU reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <limits>
#include <random>

#include "gpubatch/batch_device.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"
#include "support/random_data.hpp"
#include "test_device.hpp"

using namespace gpubatch;

namespace {

HostBuffer filled(Device& device, std::size_t n, std::mt19937& rng) {
  HostBuffer buffer = device.allocate_host(n);
  const auto values = random_floats(n, rng);
  std::copy(values.begin(), values.end(), buffer.begin());
  return buffer;
}

template <typename F>
ErrorCode code_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::internal;  // "no error" reads as a failure in the tests below
}

class HostBufferPaths : public ::testing::TestWithParam<std::uint64_t> {};

}  // namespace

// Both paths: kernels read and write the host buffer directly (no copy engine), or through it.
INSTANTIATE_TEST_SUITE_P(Paths, HostBufferPaths,
                         both_paths(), path_name);

TEST_P(HostBufferPaths, InputsAndResultsInHostBuffersMatchTheReference) {
  Device device = open_with_threshold(GetParam());
  std::mt19937 rng(5);
  const std::size_t n = 70000;
  HostBuffer x = filled(device, n, rng), out = device.allocate_host(n), dot_out = device.allocate_host(1);
  std::vector<Request> requests;
  requests.push_back(Request::from_host(Op::relu, x));
  requests.push_back(Request::from_host(Op::scale, x, {}, -2.5f).deliver_to(out));
  requests.push_back(Request::from_host(Op::add, x, random_floats(n, rng)));
  requests.push_back(Request::from_host(Op::dot, x, random_floats(n, rng)).deliver_to(dot_out));
  requests.push_back(Request::relu(random_floats(1000, rng)));  // a plain vector request beside them
  Request chained = chain({}).relu().scale(3.0f).build();
  chained.host_a = x.memory();
  requests.push_back(std::move(chained));
  expect_batch_matches_reference(device, requests);
  for (std::size_t i = 0; i < n; i += 997) ASSERT_EQ(out[i], -2.5f * x[i]) << i;
}

// Ranges of host buffers (detail::HostMemoryView, what a device set cuts a large request into):
// each range's results land in the range of the result buffer, nothing outside it moves, on both
// paths; a batch of two ranges of the same buffers as well.
TEST_P(HostBufferPaths, RangesOfHostBuffersReadAndWriteTheirRangeOnly) {
  Device device = open_with_threshold(GetParam());
  std::mt19937 rng(7);
  const std::size_t n = 300'000;
  HostBuffer x = filled(device, n, rng), y = filled(device, n, rng), out = device.allocate_host(n);
  std::fill(out.begin(), out.end(), -7.0f);
  const auto view = [](const HostBuffer& b, std::size_t first, std::size_t count) {
    return HostBuffer(std::make_shared<detail::HostMemoryView>(b.memory(), first, count));
  };
  const std::size_t a0 = 1000, a1 = 150'000, b0 = 160'000, b1 = 299'000;  // two ranges, a gap between
  const Request first = Request::from_hosts(Op::add, view(x, a0, a1 - a0), view(y, a0, a1 - a0)).deliver_to(view(out, a0, a1 - a0));
  const Request second = Request::from_host(Op::relu, view(x, b0, b1 - b0)).deliver_to(view(out, b0, b1 - b0));
  const Request* both[] = {&first, &second};
  auto batch = device.batch_device()->submit(both);
  ASSERT_TRUE(batch->wait_for(std::chrono::seconds(60)));
  Result r0, r1;
  batch->take_result(0, r0);
  batch->take_result(1, r1);
  for (std::size_t i = 0; i < n; ++i) {
    const float want = i >= a0 && i < a1 ? x[i] + y[i] : i >= b0 && i < b1 ? std::max(0.0f, x[i]) : -7.0f;
    ASSERT_EQ(out[i], want) << i;
  }
}

// Both inputs in host buffers (Request::from_hosts, host_b): every op of two float inputs, matmul's
// B, a lone b beside a vector a, and the same buffer as both inputs.
TEST_P(HostBufferPaths, BothInputsInHostBuffersMatchTheReference) {
  Device device = open_with_threshold(GetParam());
  std::mt19937 rng(15);
  const std::size_t n = 50000;
  HostBuffer x = filled(device, n, rng), y = filled(device, n, rng), out = device.allocate_host(n);
  std::vector<Request> requests;
  for (Op op : {Op::add, Op::sub, Op::mul, Op::lerp, Op::dot})
    requests.push_back(Request::from_hosts(op, x, y, op == Op::lerp ? 0.3f : 0.0f));
  requests.push_back(Request::from_hosts(Op::mul, x, y).deliver_to(out));
  requests.push_back(Request::from_hosts(Op::add, y, y));
  Request vector_a = Request::sub(random_floats(n, rng), {});
  vector_a.host_b = y.memory();
  requests.push_back(std::move(vector_a));
  HostBuffer B = filled(device, 48 * 40, rng);
  Request mm = Request::matmul(random_floats(32 * 48, rng), {}, 32, 48, 40);
  mm.host_b = B.memory();
  requests.push_back(std::move(mm));
  expect_batch_matches_reference(device, requests);
  for (std::size_t i = 0; i < n; i += 997) ASSERT_EQ(out[i], x[i] * y[i]) << i;
}

TEST_P(HostBufferPaths, SynchronousRunDeliversIntoTheBuffer) {
  Device device = open_with_threshold(GetParam());
  std::mt19937 rng(6);
  HostBuffer x = filled(device, 300000, rng), out = device.allocate_host(300000);
  const Request request = Request::from_host(Op::gelu, x).deliver_to(out);
  const Result result = device.run(request);
  EXPECT_TRUE(result.values.empty());
  EXPECT_FALSE(reference::check(request, result));
}

TEST(HostBuffer, RequestKeepsItsBufferAliveAndBuffersOutliveTheirDevice) {
  std::mt19937 rng(7);
  HostBuffer survivor;
  {
    Device device = open_with_threshold(0);
    HostBuffer x = filled(device, 5000, rng);
    const std::vector<float> copy(x.begin(), x.end());
    Request request = Request::from_host(Op::relu, x);
    x = HostBuffer();  // the request still holds the memory
    const Result result = device.run(request);
    ASSERT_EQ(result.values.size(), copy.size());
    for (std::size_t i = 0; i < copy.size(); ++i) ASSERT_EQ(result.values[i], std::max(copy[i], 0.0f));
    survivor = filled(device, 1000, rng);
  }
  // The Device object is gone; its memory lives as long as the buffer, which stays usable.
  ASSERT_EQ(survivor.size(), 1000u);
  for (float& v : survivor) v = 1.0f;
  EXPECT_EQ(survivor[999], 1.0f);
  HostBuffer moved = std::move(survivor);
  EXPECT_TRUE(survivor.empty());
  EXPECT_EQ(moved.size(), 1000u);
}

TEST(HostBuffer, MisuseIsATypedInvalidArgument) {
  Device device;
  std::mt19937 rng(8);
  HostBuffer x = filled(device, 100, rng), small = device.allocate_host(99);
  EXPECT_EQ(code_of([&] { (void)device.allocate_host(0); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { device.run(Request::from_host(Op::relu, x).deliver_to(small)); }),
            ErrorCode::invalid_argument)
      << "a result buffer of the wrong size";
  EXPECT_EQ(code_of([&] { device.run(Request::from_host(Op::add, x, random_floats(50, rng))); }),
            ErrorCode::invalid_argument)
      << "b of another length than the host input";
  Request both = Request::relu(random_floats(100, rng));
  both.host_a = x.memory();
  EXPECT_EQ(code_of([&] { device.run(both); }), ErrorCode::invalid_argument) << "a and host_a at once";
  Request states = Request::gradients(random_states(2, rng));
  states.host_a = x.memory();
  EXPECT_EQ(code_of([&] { device.run(states); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { device.run(Request::from_hosts(Op::add, x, small)); }), ErrorCode::invalid_argument)
      << "host b of another length than host a";
  Request both_b = Request::from_hosts(Op::add, x, x);
  both_b.b = random_floats(100, rng);
  EXPECT_EQ(code_of([&] { device.run(both_b); }), ErrorCode::invalid_argument) << "b and host_b at once";
  Request unary_b = Request::from_host(Op::relu, x);
  unary_b.host_b = x.memory();
  EXPECT_EQ(code_of([&] { device.run(unary_b); }), ErrorCode::invalid_argument) << "host b for an op of one input";
  Request chain_b = chain(random_floats(100, rng)).relu().build();
  chain_b.host_b = x.memory();
  EXPECT_EQ(code_of([&] { device.run(chain_b); }), ErrorCode::invalid_argument) << "host b for a chain";
  Request states_b = Request::interpolate(random_states(2, rng), random_states(2, rng), 0.5f, InterpolationMode::lerp);
  states_b.host_b = x.memory();
  EXPECT_EQ(code_of([&] { device.run(states_b); }), ErrorCode::invalid_argument) << "host b for states";

  Device other = open_with_threshold(0);
  HostBuffer foreign = filled(other, 100, rng);
  EXPECT_EQ(code_of([&] { device.run(Request::from_host(Op::relu, foreign)); }), ErrorCode::invalid_argument)
      << "another device's buffer";
  EXPECT_EQ(code_of([&] { device.run(Request::from_hosts(Op::add, x, foreign)); }), ErrorCode::invalid_argument)
      << "another device's buffer as b";
  HostBuffer foreign_out = other.allocate_host(100);
  EXPECT_EQ(code_of([&] { device.run(Request::from_host(Op::relu, x).deliver_to(foreign_out)); }),
            ErrorCode::invalid_argument)
      << "a result buffer of another device";
}

TEST(HostBuffer, ForeignBufferFailsOnlyItsOwnRequestInABatch) {
  Device device = open_with_threshold(0), other;
  std::mt19937 rng(9);
  HostBuffer foreign = filled(other, 4000, rng), mine = filled(device, 4000, rng);
  std::vector<Request> requests;
  requests.push_back(Request::relu(random_floats(4000, rng)));
  requests.push_back(Request::from_host(Op::relu, foreign));
  requests.push_back(Request::from_host(Op::sigmoid, mine));
  std::vector<const Request*> pointers;
  for (const auto& r : requests) pointers.push_back(&r);
  auto batch = device.batch_device()->submit(pointers);
  ASSERT_TRUE(batch->wait_for(std::chrono::seconds(60)));
  for (std::size_t i : {0u, 2u}) {
    Result result;
    batch->take_result(i, result);
    EXPECT_FALSE(reference::check(requests[i], result)) << i;
  }
  Result result;
  EXPECT_EQ(code_of([&] { batch->take_result(1, result); }), ErrorCode::invalid_argument);
}

// GpuCommandBatch with the caller's pinned memory (HostBuffer): uploads and imports read in
// place, results delivered straight into a HostBuffer, in both transfer modes, against the CPU
// reference; buffers held while in flight; misuse refused with typed errors that leave the batch
// as it was; large span copies spread over threads (gpu/parallel_copy.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu/parallel_copy.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/graph.hpp"
#include "gpubatch/reference.hpp"
#include "support/random_data.hpp"
#include "test_device.hpp"

using namespace gpubatch;

namespace {

template <class F>
void expect_invalid(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error thrown (expected: " << fragment << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

void expect_reference(const Request& r, std::span<const float> got) {
  Result res;
  res.values.assign(got.begin(), got.end());
  const auto mismatch = reference::check(r, res);
  EXPECT_FALSE(mismatch.has_value()) << to_string(r.op) << ": " << *mismatch;
}

HostBuffer host_copy(const std::vector<float>& values) {
  HostBuffer b = test_device().allocate_host(values.size());
  std::copy(values.begin(), values.end(), b.begin());
  return b;
}

// relu -> scale(2) -> add(y), step by step on the CPU: the last step's request and its input.
Request chain_reference(const std::vector<float>& x, const std::vector<float>& y) {
  const auto relu = reference::run(Request::relu(x)).values;
  const auto scaled = reference::run(Request::scale(relu, 2.0f)).values;
  return Request::add(scaled, y);
}

class GraphHostBuffer : public testing::TestWithParam<Transfers> {};

}  // namespace

INSTANTIATE_TEST_SUITE_P(Modes, GraphHostBuffer, testing::Values(Transfers::copy, Transfers::direct),
                         [](const auto& info) { return info.param == Transfers::copy ? "copy" : "direct"; });

TEST_P(GraphHostBuffer, ChainFromAndIntoHostBuffersMatchesTheReference) {
  GpuCommandBatch g(test_device(), GraphOptions{.transfers = GetParam()});
  const std::size_t n = 70001;
  std::mt19937 rng(21);
  const auto xs = random_floats(n, rng), ys = random_floats(n, rng);
  HostBuffer x = host_copy(xs), y = host_copy(ys), out = test_device().allocate_host(n);
  auto r = g.add(g.scale(g.relu(g.upload(x)), 2.0f), g.upload(y));
  g.deliver_to(r, out);
  g.execute();
  expect_reference(chain_reference(xs, ys), out.span());
  const ExecuteStats& s = g.last_execute();
  EXPECT_EQ(s.direct, GetParam() == Transfers::direct);
  EXPECT_EQ(s.host_bytes, 3 * n * sizeof(float)) << "x and y read in place, the result written in place";
  EXPECT_EQ(s.bytes_down, n * sizeof(float));
  EXPECT_EQ(s.downloads, 1u);
  EXPECT_EQ(g.read(r), std::vector<float>(out.begin(), out.end())) << "read() copies from the HostBuffer";
  // Again, with new data in the same buffers: nothing stale.
  const auto xs2 = random_floats(n, rng);
  std::copy(xs2.begin(), xs2.end(), x.begin());
  auto r2 = g.add(g.scale(g.relu(g.upload(x)), 2.0f), g.upload(y));
  g.deliver_to(r2, out);
  g.execute();
  expect_reference(chain_reference(xs2, ys), out.span());
}

TEST_P(GraphHostBuffer, MixOfSpansHostBuffersAndImports) {
  GpuCommandBatch g(test_device(), GraphOptions{.transfers = GetParam()});
  const std::size_t n = 4099;
  std::mt19937 rng(22);
  const auto xs = random_floats(n, rng), ys = random_floats(n, rng), ws = random_floats(n, rng);
  HostBuffer x = host_copy(xs), w = host_copy(ws), mid_out = test_device().allocate_host(n),
             dot_out = test_device().allocate_host(1);
  auto iw = g.import_buffer(w);
  w = HostBuffer();  // the batch holds it until the import is on the device
  auto hx = g.upload(x);
  auto sy = g.upload(ys);
  auto mid = g.sigmoid(g.mul(hx, iw));  // consumed below, and delivered
  auto sum = g.add(mid, sy);            // read from readback
  auto d = g.dot(hx, sy);
  g.deliver_to(mid, mid_out);
  g.deliver_to(d, dot_out);
  g.execute();
  const auto mul = reference::run(Request::mul(xs, ws)).values;
  expect_reference(Request::sigmoid(mul), mid_out.span());
  // The sum's input is the GPU's sigmoid (within the op's tolerance of the CPU's).
  expect_reference(Request::add(std::vector<float>(mid_out.begin(), mid_out.end()), ys), g.read(sum));
  expect_reference(Request::dot(xs, ys), dot_out.span());
  EXPECT_EQ(g.last_execute().host_bytes, (3 * n + 1) * sizeof(float));
  // The import stays on the device; a span input next time.
  const auto zs = random_floats(n, rng);
  auto again = g.mul(g.upload(zs), iw);
  g.execute();
  expect_reference(Request::mul(zs, ws), g.read(again));
  EXPECT_EQ(g.last_execute().host_bytes, 0u);
}

TEST_P(GraphHostBuffer, BuffersStayAliveWhileInFlight) {
  GpuCommandBatch g(test_device(), GraphOptions{.transfers = GetParam()});
  const std::size_t n = 20000;
  std::mt19937 rng(23);
  const auto xs = random_floats(n, rng), ys = random_floats(n, rng);
  BufferId r;
  {
    HostBuffer x = host_copy(xs), y = host_copy(ys), out = test_device().allocate_host(n);
    r = g.add(g.scale(g.relu(g.upload(x)), 2.0f), g.upload(y));
    g.deliver_to(r, out);
  }  // every HostBuffer of the caller is gone before execute()
  // Other allocations of the same size would reuse the memory if the batch had not held it.
  std::vector<HostBuffer> others;
  for (int i = 0; i < 4; ++i) {
    others.push_back(test_device().allocate_host(n));
    std::fill(others.back().begin(), others.back().end(), 1e9f);
  }
  g.execute();
  expect_reference(chain_reference(xs, ys), g.read(r));
}

TEST(GraphHostBuffer, MisuseIsATypedErrorAndHarmsNothing) {
  GpuCommandBatch g(test_device());
  const std::size_t n = 1000;
  std::mt19937 rng(24);
  const auto xs = random_floats(n, rng);
  HostBuffer x = host_copy(xs), out = test_device().allocate_host(n), small = test_device().allocate_host(n - 1);
  HostBuffer empty;
  Device other;
  HostBuffer foreign = other.allocate_host(n);
  auto hx = g.upload(x);
  auto r = g.relu(hx);
  expect_invalid([&] { g.upload(empty); }, "empty HostBuffer");
  expect_invalid([&] { g.import_buffer(empty); }, "empty HostBuffer");
  expect_invalid([&] { g.upload(foreign); }, "another device");
  expect_invalid([&] { g.import_buffer(foreign); }, "another device");
  expect_invalid([&] { g.deliver_to(r, foreign); }, "another device");
  expect_invalid([&] { g.deliver_to(r, small); }, "size mismatch");
  expect_invalid([&] { g.deliver_to(r, empty); }, "empty HostBuffer");
  expect_invalid([&] { g.deliver_to(hx, out); }, "is an upload, not a result");
  expect_invalid([&] { g.deliver_to(r, x); }, "already uploaded");
  expect_invalid([&] { g.deliver_to(BufferId{}, out); }, "invalid");
  GpuCommandBatch h(test_device());
  auto elsewhere = h.relu(h.upload(xs));
  expect_invalid([&] { g.deliver_to(elsewhere, out); }, "another GpuCommandBatch");
  g.deliver_to(r, out);
  expect_invalid([&] { g.deliver_to(r, out); }, "already delivered");
  expect_invalid([&] { g.upload(out); }, "delivery target");
  // None of that changed what is queued.
  g.execute();
  expect_reference(Request::relu(xs), out.span());
  EXPECT_EQ(g.last_execute().operations, 1u);
  expect_invalid([&] { g.deliver_to(r, out); }, "has run");  // too late: before execute() only
}

TEST(GraphHostBuffer, LargeSpanCopiesAreSplitOverThreads) {
  GpuCommandBatch g(test_device());
  const std::size_t n = 600000;  // 2.4 MB each way
  std::mt19937 rng(25);
  const auto xs = random_floats(n, rng), ys = random_floats(n, rng);
  auto r = g.add(g.scale(g.relu(g.upload(xs)), 2.0f), g.upload(ys));
  g.execute();
  std::vector<float> got(n);
  g.read_into(r, got);
  expect_reference(chain_reference(xs, ys), got);
  expect_reference(chain_reference(xs, ys), g.read(r));
}

TEST(GraphHostBuffer, ParallelCopyCopiesEveryByte) {
  gpu::ParallelCopy copier(4);
  std::mt19937 rng(26);
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, gpu::ParallelCopy::kParallelBytes - 1,
                            gpu::ParallelCopy::kParallelBytes, gpu::ParallelCopy::kParallelBytes * 3 + 13,
                            4 * gpu::ParallelCopy::kMinPartBytes + 3}) {
    std::vector<unsigned char> src(bytes), dst(bytes + 1, 0xab);
    for (auto& b : src) b = static_cast<unsigned char>(rng());
    const auto before = copier.parallel_copies();
    copier.copy(dst.data(), src.data(), bytes);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << bytes;
    EXPECT_EQ(dst[bytes], 0xab) << bytes << ": wrote past the end";
    EXPECT_EQ(copier.parallel_copies() - before, bytes >= gpu::ParallelCopy::kParallelBytes ? 1u : 0u) << bytes;
  }
  // Many jobs in a row: no part of one is lost to or run by the next.
  std::vector<float> src(1 << 20), dst(1 << 20);
  for (int round = 0; round < 50; ++round) {
    std::fill(src.begin(), src.end(), static_cast<float>(round));
    copier.copy(dst.data(), src.data(), src.size() * sizeof(float));
    ASSERT_TRUE(std::all_of(dst.begin(), dst.end(), [&](float v) { return v == static_cast<float>(round); })) << round;
  }
}

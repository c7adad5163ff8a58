// A well-formed request too big for a kernel (a matmul whose result would hold 2^32 floats or
// more, from small inputs) is refused with request_too_large, as docs/RELIABILITY.md promises,
// on every path: validate(), Device::run, the executor and the graph.
#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/graph.hpp"
#include "gpubatch/ops.hpp"

using namespace gpubatch;

namespace {

// 65536 x 1 * 1 x 65537: 131073 input floats, 2^32 + 65536 output floats.
constexpr std::uint32_t kM = 65536, kK = 1, kN = 65537;

Request huge_matmul() {
  return Request::matmul(std::vector<float>(std::size_t{kM} * kK, 1.0f), std::vector<float>(std::size_t{kK} * kN, 1.0f),
                         kM, kK, kN);
}

template <typename F>
ErrorCode code_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::internal;  // "no error" is never the expected code
}

}  // namespace

TEST(RequestTooLarge, MatmulWhoseResultExceeds2To32Floats) {
  Device device;
  const Request r = huge_matmul();
  EXPECT_EQ(code_of([&] { validate(r); }), ErrorCode::request_too_large);
  EXPECT_EQ(code_of([&] { device.run(r); }), ErrorCode::request_too_large);
  BatchExecutor executor(device);
  auto gpu = executor.handle();
  auto f = gpu.submit(r);
  EXPECT_EQ(code_of([&] { f.get(); }), ErrorCode::request_too_large);
  GpuCommandBatch graph(device);
  const auto a = graph.upload(r.a);
  const auto b = graph.upload(r.b);
  EXPECT_EQ(code_of([&] { graph.matmul(a, b, kM, kK, kN); }), ErrorCode::request_too_large);
  // Malformed stays invalid_argument: A of the wrong size.
  EXPECT_EQ(code_of([&] { validate(Request::matmul({1.0f}, {1.0f, 2.0f}, 2, 1, 2)); }), ErrorCode::invalid_argument);
}

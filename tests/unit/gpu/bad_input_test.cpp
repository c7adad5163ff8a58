// Bad input gets a typed gpubatch::Error whose message names the cause.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "gpubatch/batch_device.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "test_device.hpp"

using namespace gpubatch;

namespace {

void expect_error(const Request& r, ErrorCode code, const std::string& needle) {
  try {
    test_device().run(r);
    ADD_FAILURE() << "expected " << to_string(code) << " for " << to_string(r.op);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' should mention '" << needle << "'";
  }
}

}  // namespace

TEST(BadInput, EmptyInput) {
  expect_error(Request::relu({}), ErrorCode::invalid_argument, "empty");
  expect_error(Request::add({}, {}), ErrorCode::invalid_argument, "empty");
  expect_error(Request::gradients({}), ErrorCode::invalid_argument, "empty");
}

TEST(BadInput, MismatchedLengths) {
  expect_error(Request::add({1, 2}, {1}), ErrorCode::invalid_argument, "differ in length");
  expect_error(Request::dot({1, 2, 3}, {1, 2}), ErrorCode::invalid_argument, "differ in length");
  expect_error(Request::lerp({1}, {1, 2}, 0.5f), ErrorCode::invalid_argument, "differ in length");
}

TEST(BadInput, MatmulDimensions) {
  expect_error(Request::matmul({1, 2, 3, 4}, {1, 2}, 2, 2, 2), ErrorCode::invalid_argument, "B has 2");
  expect_error(Request::matmul({1, 2, 3}, {1, 2, 3, 4}, 2, 2, 2), ErrorCode::invalid_argument, "A has 3");
  expect_error(Request::matmul({}, {}, 0, 2, 2), ErrorCode::invalid_argument, "zero");
  expect_error(Request::matmul({1}, {}, 1, 1, 0), ErrorCode::invalid_argument, "zero");
}

TEST(BadInput, StatesNotWholeAndLayersOutOfRange) {
  expect_error(Request::gradients(std::vector<std::uint8_t>(17)), ErrorCode::invalid_argument, "16-byte");
  expect_error(Request::interpolate(std::vector<std::uint8_t>(16), std::vector<std::uint8_t>(32), 0.5f,
                                    InterpolationMode::lerp),
               ErrorCode::invalid_argument, "states");
  // Every packed byte is a valid layer; out-of-range nibbles are refused where layers are packed.
  EXPECT_THROW(pack_layer({8, 0}), Error);
  EXPECT_THROW(pack_layer({-9, 0}), Error);
  EXPECT_THROW(pack_layer({0, 16}), Error);
  EXPECT_THROW(pack_layer({0, -1}), Error);
  try {
    pack_layer({0, 16});
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("theta 16"), std::string::npos);
  }
  EXPECT_EQ(pack_layer({7, 15}), 0xFF);
  EXPECT_EQ(pack_layer({-8, 0}), 0x00);
}

TEST(BadInput, InterpolateTOutsideUnitIntervalOrNan) {
  const std::vector<std::uint8_t> s(16, 0x88);
  for (float t : {-0.01f, 1.01f, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::infinity()})
    expect_error(Request::interpolate(s, s, t, InterpolationMode::slerp), ErrorCode::invalid_argument, "not in [0, 1]");
}

TEST(BadInput, RequestLargerThanTheDeviceTakesIsRefused) {
  DeviceOptions options;
  options.max_request_bytes = 1 << 20;
  Device small(options);
  try {
    small.run(Request::relu(std::vector<float>(300000)));
    ADD_FAILURE() << "expected request_too_large";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::request_too_large);
    EXPECT_NE(std::string(e.what()).find("split it"), std::string::npos) << e.what();
  }
  EXPECT_EQ(small.run(Request::relu(std::vector<float>(1000, -1.0f))).values[999], 0.0f)
      << "a request under the limit still runs";
  EXPECT_LT(test_device().batch_device()->max_request_bytes(), test_device().info().max_buffer_bytes);
}

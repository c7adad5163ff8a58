// The built-in element-wise kernels in both forms (shaders/op_kernel.glsl): one element per
// invocation, and sixteen as four vec4 loads (GPUBATCH_EW_VECTOR=on; unset, on for a device of
// host cores), whose workgroup covers sixteen blocks and which falls back to one element at a time
// at a segment's end, for a segment that starts off a multiple of four, and for memory that is not 16-byte aligned. Every result is checked against
// the CPU reference, on both data paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <tuple>

#include "gpu/context.hpp"
#include "gpu/kernels.hpp"
#include "gpu/vulkan_batch_device.hpp"
#include "gpubatch/batch_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"
#include "support/random_data.hpp"
#include "test_device.hpp"

using namespace gpubatch;

namespace {

// Sets GPUBATCH_EW_VECTOR for the scope, then restores what was there.
class VectorSetting {
 public:
  explicit VectorSetting(const char* value) {
    if (const char* old = std::getenv("GPUBATCH_EW_VECTOR")) old_ = old;
    ::setenv("GPUBATCH_EW_VECTOR", value, 1);
  }
  ~VectorSetting() {
    if (old_) ::setenv("GPUBATCH_EW_VECTOR", old_->c_str(), 1);
    else ::unsetenv("GPUBATCH_EW_VECTOR");
  }
  VectorSetting(const VectorSetting&) = delete;
  VectorSetting& operator=(const VectorSetting&) = delete;

 private:
  std::optional<std::string> old_;
};

std::vector<const Request*> pointers_to(const std::vector<Request>& requests) {
  std::vector<const Request*> p;
  for (const Request& r : requests) p.push_back(&r);
  return p;
}

::testing::AssertionResult all_match(detail::InFlightBatch& batch, const std::vector<Request>& requests,
                                     std::vector<Result>* results = nullptr) {
  if (!batch.wait_for(std::chrono::seconds(60))) return ::testing::AssertionFailure() << "batch did not complete";
  for (std::size_t i = 0; i < requests.size(); ++i) {
    Result r;
    batch.take_result(i, r);
    if (auto bad = reference::check(requests[i], r))
      return ::testing::AssertionFailure() << describe_op(requests[i]) << " #" << i << " (" << requests[i].a.size()
                                           << " floats): " << *bad;
    if (results) results->push_back(std::move(r));
  }
  return ::testing::AssertionSuccess();
}

// Lengths around every edge of the four-wide form: under four, one past and one short of a
// multiple of four, a block (256) and a workgroup of the four-wide form (1024), and large ones.
// In this order the segments of one op start on and off multiples of four.
constexpr std::size_t kLengths[] = {1,    2,    3,    4,    5,    7,    8,    15,   16,   17,   31,    33,
                                    255,  256,  257,  1000, 1023, 1024, 1025, 4096, 4099, 4108, 70000};

using Param = std::tuple<const char*, std::uint64_t>;  // GPUBATCH_EW_VECTOR, copy-engine line

class EwVector : public ::testing::TestWithParam<Param> {};

}  // namespace

// Every element-wise op, a batch of all the edge lengths (ragged, so segments start both on and
// off multiples of four, and several share a workgroup), then the same lengths each in a batch
// of its own (one segment: the table-free path of find_segment).
TEST_P(EwVector, EveryOpAtEveryEdgeLengthMatchesTheReference) {
  VectorSetting setting(std::get<0>(GetParam()));
  Device device = open_with_threshold(std::get<1>(GetParam()));
  auto batch_device = device.batch_device();
  std::mt19937 rng(7);
  for (Op op : elementwise_ops()) {
    std::vector<Request> requests;
    for (std::size_t n : kLengths) requests.push_back(sample_request(op, n, rng));
    std::shuffle(requests.begin(), requests.end(), rng);
    ASSERT_TRUE(all_match(*batch_device->submit(pointers_to(requests)), requests)) << op_info(op).name;
  }
  for (std::size_t n : kLengths) {
    std::vector<Request> lone{sample_request(Op::add, n, rng)};
    ASSERT_TRUE(all_match(*batch_device->submit(pointers_to(lone)), lone)) << n << " floats alone";
  }
  // The form asked for is the one that ran: only it was built.
  const bool four = std::string(std::get<0>(GetParam())) == "on";
  auto& kernels = device.context()->kernels();
  EXPECT_EQ(kernels.has("add_v4"), four);
  EXPECT_EQ(kernels.has("add"), !four);
}

// Host buffers read and written in place: aligned starts with lengths on and off multiples of
// four, beside vector requests in the same batch.
TEST_P(EwVector, HostBuffersInPlaceMatchTheReference) {
  VectorSetting setting(std::get<0>(GetParam()));
  Device device = open_with_threshold(std::get<1>(GetParam()));
  std::mt19937 rng(11);
  std::vector<Request> requests;
  std::vector<HostBuffer> outs;
  for (std::size_t n : {std::size_t{4096}, std::size_t{1001}, std::size_t{3}}) {
    HostBuffer in = device.allocate_host(n);
    const std::vector<float> x = random_floats(n, rng);
    std::copy(x.begin(), x.end(), in.begin());
    outs.push_back(device.allocate_host(n));
    requests.push_back(Request::from_host(Op::relu, in).deliver_to(outs.back()));
    requests.push_back(sample_request(Op::mul, n + 1, rng));
  }
  auto batch = device.batch_device()->submit(pointers_to(requests));
  ASSERT_TRUE(batch->wait_for(std::chrono::seconds(60)));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    Result r;
    batch->take_result(i, r);
    if (i % 2 == 0) {
      const HostBuffer& out = outs[i / 2];
      r.values.assign(out.begin(), out.end());
    }
    const auto bad = reference::check(requests[i], r);
    EXPECT_FALSE(bad) << "#" << i << ": " << *bad;
  }
}

// A lone request of every op, batch after batch on one device: lengths that repeat (the frame's
// command buffer submitted again; in the one-wide form its push constants hold the inputs'
// addresses and length, op_kernel.glsl lone_segment) and lengths that change; between them a
// batch of several (the segment table again), a lone request from a host buffer (its address in
// the table, not pushed), one whose result goes to a host buffer, and one with other scalars.
TEST_P(EwVector, ALoneRequestOfEveryOpMatchesTheReferenceBatchAfterBatch) {
  VectorSetting setting(std::get<0>(GetParam()));
  Device device = open_with_threshold(std::get<1>(GetParam()));
  auto batch_device = device.batch_device();
  std::mt19937 rng(13);
  auto check = [&](std::vector<Request> requests) { return all_match(*batch_device->submit(pointers_to(requests)), requests); };
  for (Op op : elementwise_ops()) {
    for (std::size_t n : {256, 256, 1, 4099, 4099, 256, 70000}) ASSERT_TRUE(check({sample_request(op, n, rng)})) << n;
    ASSERT_TRUE(check({sample_request(op, 256, rng), sample_request(op, 256, rng), sample_request(op, 7, rng)}));
    ASSERT_TRUE(check({sample_request(op, 256, rng)})) << "after a batch of three";
  }
  HostBuffer in = device.allocate_host(256), out = device.allocate_host(256);
  const std::vector<float> x = random_floats(256, rng);
  std::copy(x.begin(), x.end(), in.begin());
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(check({Request::from_host(Op::relu, in)})) << "from a host buffer";
    ASSERT_TRUE(check({Request::relu(random_floats(256, rng))})) << "from a vector again";
  }
  std::fill(out.begin(), out.end(), -1.0f);
  Request to_host = Request::relu(random_floats(256, rng));
  to_host.deliver_to(out);
  auto batch = batch_device->submit(std::vector<const Request*>{&to_host});
  ASSERT_TRUE(batch->wait_for(std::chrono::seconds(60)));
  Result r;
  batch->take_result(0, r);
  r.values.assign(out.begin(), out.end());
  EXPECT_FALSE(reference::check(to_host, r)) << "into a host buffer";
  for (float factor : {2.0f, -0.5f, 3.0f}) {
    std::vector<Request> scaled{Request::scale(random_floats(256, rng), factor)};
    ASSERT_TRUE(check(scaled)) << "scale by " << factor;
  }
}

INSTANTIATE_TEST_SUITE_P(FormsAndPaths, EwVector,
                         ::testing::Combine(::testing::Values("on", "off"), both_paths()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::string(std::strcmp(std::get<0>(info.param), "on") == 0 ? "FourWide" : "OneWide") +
                                  (std::get<1>(info.param) == 0 ? "CopyEngine" : "Direct");
                         });

// Both forms compute the same function: bit-identical results for the same batch.
TEST(EwVectorForms, FourWideAndOneWideAgreeBitForBit) {
  std::mt19937 rng(3);
  std::vector<Request> requests;
  for (Op op : elementwise_ops())
    for (std::size_t n : {std::size_t{4097}, std::size_t{8192}}) requests.push_back(sample_request(op, n, rng));
  std::vector<Result> results[2];
  const char* forms[2] = {"on", "off"};
  for (int f = 0; f < 2; ++f) {
    VectorSetting setting(forms[f]);
    Device device;
    ASSERT_TRUE(all_match(*device.batch_device()->submit(pointers_to(requests)), requests, &results[f]));
  }
  for (std::size_t i = 0; i < requests.size(); ++i)
    ASSERT_EQ(0, std::memcmp(results[0][i].values.data(), results[1][i].values.data(),
                             results[0][i].values.size() * sizeof(float)))
        << describe_op(requests[i]) << " differs between the forms";
}

// Unset, the form follows the device: four-wide on host cores (lavapipe, whose per-lane loads are
// scalar gathers), one-wide on a GPU (wider loads across the bus lost 10-20 % on the H100).
TEST(EwVectorForms, TheDefaultFormFollowsTheDevice) {
  std::optional<std::string> old;
  if (const char* v = std::getenv("GPUBATCH_EW_VECTOR")) old = v;
  ::unsetenv("GPUBATCH_EW_VECTOR");
  {
    Device device;
    std::mt19937 rng(5);
    std::vector<Request> requests{sample_request(Op::add, 1000, rng)};
    ASSERT_TRUE(all_match(*device.batch_device()->submit(pointers_to(requests)), requests));
    const bool host_cores = device.info().type == "cpu";
    EXPECT_EQ(device.context()->kernels().has("add_v4"), host_cores) << device.info().type;
    EXPECT_EQ(device.context()->kernels().has("add"), !host_cores) << device.info().type;
  }
  if (old) ::setenv("GPUBATCH_EW_VECTOR", old->c_str(), 1);
}

TEST(EwVectorForms, ABadSettingIsATypedError) {
  VectorSetting setting("sometimes");
  try {
    Device device;
    device.batch_device();
    ADD_FAILURE() << "GPUBATCH_EW_VECTOR=sometimes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_config);
    EXPECT_NE(std::string(e.what()).find("GPUBATCH_EW_VECTOR"), std::string::npos) << e.what();
  }
}

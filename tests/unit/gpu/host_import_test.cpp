// Device::import_host: the caller's own aligned memory (VK_EXT_external_memory_host) used in place
// as a HostBuffer, on the direct path (kernels use its device address) and the copy-engine path
// (vkCmdCopyBuffer from and to it), in the graph, against the CPU reference; the rules refused
// with typed errors; a device without import; a failed import; nothing held once it is done.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu/fault_injection.hpp"
#include "gpubatch/batch_device.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/graph.hpp"
#include "gpubatch/reference.hpp"
#include "support/caller_memory.hpp"
#include "support/random_data.hpp"
#include "test_device.hpp"

using namespace gpubatch;

namespace {

template <class F>
void expect_error(ErrorCode code, F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error thrown (expected: " << fragment << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

#define SKIP_WITHOUT_IMPORT(device) \
  if ((device).host_import_alignment() == 0) GTEST_SKIP() << "the device cannot import host memory"

class HostImportPaths : public ::testing::TestWithParam<std::uint64_t> {};

}  // namespace

INSTANTIATE_TEST_SUITE_P(Paths, HostImportPaths,
                         both_paths(), path_name);

TEST(HostImport, AlignmentIsAPowerOfTwo) {
  const std::size_t align = test_device().host_import_alignment();
  SKIP_WITHOUT_IMPORT(test_device());
  EXPECT_EQ(align & (align - 1), 0u) << align;
  if (test_device().info().name.find("llvmpipe") != std::string::npos) EXPECT_EQ(align, 4096u);
}

// A relu reads an imported buffer and delivers into another; 70,000 floats is no multiple of the
// alignment, so the buffers are the first 70,000 floats of their memory: past them, nothing moves.
TEST_P(HostImportPaths, ReluFromAndIntoImportedMemoryMatchesTheReference) {
  Device device = open_with_threshold(GetParam());
  SKIP_WITHOUT_IMPORT(device);
  const std::size_t n = 70000;
  std::mt19937 rng(31);
  CallerMemory in_memory = caller_memory(device, n), out_memory = caller_memory(device, n, -7.0f);
  const auto xs = random_floats(n, rng);
  std::copy(xs.begin(), xs.end(), in_memory.span.begin());
  HostBuffer in = device.import_host(in_memory.span, n), out = device.import_host(out_memory.span, n);
  ASSERT_EQ(in.data(), in_memory.span.data()) << "the caller's memory itself, no copy";
  ASSERT_EQ(out.size(), n);

  const Request request = Request::from_host(Op::relu, in).deliver_to(out);
  const Result result = device.run(request);
  EXPECT_TRUE(result.values.empty()) << "delivered in place";
  EXPECT_FALSE(reference::check(request, result));
  for (std::size_t i = 0; i < n; i += 997) ASSERT_EQ(out_memory.span[i], std::max(xs[i], 0.0f)) << i;
  for (std::size_t i = n; i < out_memory.span.size(); ++i) ASSERT_EQ(out_memory.span[i], -7.0f) << i;
  EXPECT_EQ(device.counters().copy_submissions > 0, GetParam() == 0) << "the path asked for";
}

// Imported and allocated buffers and plain vectors side by side in one batch.
TEST_P(HostImportPaths, ImportedBesideAllocatedBuffersInOneBatch) {
  Device device = open_with_threshold(GetParam());
  SKIP_WITHOUT_IMPORT(device);
  std::mt19937 rng(32);
  const std::size_t n = 4096;  // exactly 16 KiB: the whole memory
  CallerMemory a_memory = caller_memory(device, n), out_memory = caller_memory(device, n);
  const auto xs = random_floats(n, rng);
  std::copy(xs.begin(), xs.end(), a_memory.span.begin());
  HostBuffer a = device.import_host(a_memory.span), out = device.import_host(out_memory.span);
  HostBuffer allocated = device.allocate_host(n);
  std::vector<Request> requests;
  requests.push_back(Request::from_host(Op::scale, a, {}, -1.5f).deliver_to(allocated));
  requests.push_back(Request::from_host(Op::add, a, random_floats(n, rng)).deliver_to(out));
  requests.push_back(Request::from_host(Op::sigmoid, a));
  requests.push_back(Request::relu(random_floats(999, rng)));
  expect_batch_matches_reference(device, requests);
}

// Nothing of the import is held once the request, the buffer and the run are gone: the caller
// may free its memory then.
TEST_P(HostImportPaths, NothingHoldsTheImportOnceItIsDone) {
  Device device = open_with_threshold(GetParam());
  SKIP_WITHOUT_IMPORT(device);
  CallerMemory memory = caller_memory(device, 2048, 3.0f);
  std::weak_ptr<detail::HostMemory> held;
  {
    HostBuffer x = device.import_host(memory.span);
    held = x.memory();
    const Result result = device.run(Request::from_host(Op::relu, x));
    ASSERT_EQ(result.values.size(), 2048u);
    EXPECT_EQ(result.values[2047], 3.0f);
  }
  EXPECT_TRUE(held.expired()) << "the batch's frame still holds the import";
}

// The graph reads imported memory in place (upload, import_buffer) and delivers into it, in both
// transfer modes. The memory is declared before the batch: the batch holds the imports until it
// is destroyed.
TEST(HostImport, GraphUploadsImportsAndDeliversInPlace) {
  Device& device = test_device();
  SKIP_WITHOUT_IMPORT(device);
  const std::size_t n = 5000;
  for (Transfers transfers : {Transfers::copy, Transfers::direct}) {
    std::mt19937 rng(33);
    CallerMemory x_memory = caller_memory(device, n), w_memory = caller_memory(device, n),
                 out_memory = caller_memory(device, n);
    const auto xs = random_floats(n, rng), ws = random_floats(n, rng);
    std::copy(xs.begin(), xs.end(), x_memory.span.begin());
    std::copy(ws.begin(), ws.end(), w_memory.span.begin());
    GpuCommandBatch g(device, GraphOptions{.transfers = transfers});
    HostBuffer x = device.import_host(x_memory.span, n), w = device.import_host(w_memory.span, n),
               out = device.import_host(out_memory.span, n);
    const auto r = g.add(g.relu(g.upload(x)), g.import_buffer(w));
    g.deliver_to(r, out);
    g.execute();
    const Request last = Request::add(reference::run(Request::relu(xs)).values, ws);
    Result got;
    got.values.assign(out.begin(), out.end());
    const auto mismatch = reference::check(last, got);
    EXPECT_FALSE(mismatch) << (transfers == Transfers::copy ? "copy: " : "direct: ") << *mismatch;
    EXPECT_EQ(g.read(r), got.values) << "read() copies from the imported memory";
  }
}

TEST(HostImport, BrokenRulesAreInvalidArgumentsNamingTheAlignment) {
  Device& device = test_device();
  SKIP_WITHOUT_IMPORT(device);
  const std::size_t align = device.host_import_alignment();
  const std::string named = std::to_string(align) + " bytes";
  CallerMemory memory = caller_memory(device, 2 * align / sizeof(float));
  const std::size_t page = align / sizeof(float);
  expect_error(ErrorCode::invalid_argument, [&] { (void)device.import_host(memory.span.subspan(1, page)); },
               "address is not a multiple of the device's import alignment of " + named);
  expect_error(ErrorCode::invalid_argument, [&] { (void)device.import_host(memory.span.first(page - 24)); },
               "size of " + std::to_string(align - 96) + " bytes is not a multiple of the device's import alignment of " + named);
  expect_error(ErrorCode::invalid_argument, [&] { (void)device.import_host(std::span<float>()); }, "empty");
  expect_error(ErrorCode::invalid_argument, [&] { (void)device.import_host(memory.span.first(0)); }, "empty");
  expect_error(ErrorCode::invalid_argument, [&] { (void)device.import_host(memory.span, memory.span.size() + 1); },
               "floats asked of a span of");
  expect_error(ErrorCode::invalid_argument, [&] { (void)device.import_host(memory.span, 0); },
               "0 floats asked");
  // After all that, the same memory imports fine.
  HostBuffer fine = device.import_host(memory.span);
  EXPECT_EQ(fine.size(), memory.span.size());
}

// `values` into x, then `op` from x into out on each device in turn: what each device wrote.
static std::vector<std::vector<float>> run_on_each(const std::vector<Device>& devices, Op op, const std::vector<float>& values,
                                                   HostBuffer& x, HostBuffer& out) {
  std::copy(values.begin(), values.end(), x.begin());
  std::vector<std::vector<float>> got;
  for (Device device : devices) {
    std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
    (void)device.run(Request::from_host(op, x).deliver_to(out));
    got.emplace_back(out.begin(), out.end());
  }
  return got;
}

// gpubatch::allocate_host over several devices: one allocation imported into each, read and
// written in place by either (on both paths), against the reference.
TEST_P(HostImportPaths, ABufferSharedByTwoDevicesIsReadAndWrittenByEach) {
  SKIP_WITHOUT_IMPORT(test_device());
  const std::vector<Device> both{open_with_threshold(GetParam()), open_with_threshold(GetParam())};
  ASSERT_NE(both[0].identity(), both[1].identity());
  HostBuffer x = allocate_host(both, 70'000), out = allocate_host(both, 70'000);
  ASSERT_EQ(x.size(), 70'000u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(x.data()) % both[0].host_import_alignment(), 0u);
  std::mt19937 rng(41);
  const auto values = random_floats(x.size(), rng);
  const auto expected = reference::run(Request::unary(Op::relu, values)).values;
  const auto got = run_on_each(both, Op::relu, values, x, out);
  for (std::size_t d = 0; d < got.size(); ++d) EXPECT_EQ(got[d], expected) << "on device " << d;
}

// The caller's own memory imported into both devices (gpubatch::import_host over a list): read
// and written in place by either; misaligned memory refused as Device::import_host refuses it.
TEST_P(HostImportPaths, CallerMemoryImportedIntoTwoDevicesIsReadAndWrittenByEach) {
  SKIP_WITHOUT_IMPORT(test_device());
  const std::vector<Device> both{open_with_threshold(GetParam()), open_with_threshold(GetParam())};
  CallerMemory in_memory = caller_memory(both[0], 70'000), out_memory = caller_memory(both[0], 70'000);
  HostBuffer x = import_host(both, in_memory.span, 70'000), out = import_host(both, out_memory.span, 70'000);
  ASSERT_EQ(x.size(), 70'000u);
  EXPECT_EQ(x.data(), in_memory.span.data()) << "in place: no copy";
  std::mt19937 rng(43);
  const auto values = random_floats(x.size(), rng);
  const auto expected = reference::run(Request::unary(Op::gelu, values)).values;
  for (const std::vector<float>& got : run_on_each(both, Op::gelu, values, x, out)) {
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], 1e-4f * (1 + std::abs(expected[i]))) << i;
  }
  expect_error(ErrorCode::invalid_argument,
               [&] { (void)import_host(both, in_memory.span.subspan(1, 1024)); }, "address");
  expect_error(ErrorCode::invalid_argument, [&] { (void)import_host(std::span<const Device>{}, in_memory.span); },
               "no devices");
}

// What a shared buffer needs: devices, floats, and import on every device; one device (or one
// listed twice) gets that device's own allocate_host memory.
TEST(HostImport, ASharedBufferSaysWhatItNeeds) {
  SKIP_WITHOUT_IMPORT(test_device());
  expect_error(ErrorCode::invalid_argument, [] { (void)allocate_host(std::span<const Device>{}, 4); }, "no devices");
  const std::vector<Device> twice{test_device(), test_device()};
  expect_error(ErrorCode::invalid_argument, [&] { (void)allocate_host(twice, 0); }, "at least one float");
  gpu::FaultInjector::arm(gpu::Fault::host_import_unavailable);
  Device no_import;
  gpu::FaultInjector::disarm_all();
  expect_error(ErrorCode::invalid_argument,
               [&] { (void)allocate_host(std::vector<Device>{test_device(), no_import}, 16); },
               "device 1 (" + no_import.info().name + ") cannot import host memory");
  HostBuffer one = allocate_host(twice, 16);
  ASSERT_EQ(one.size(), 16u);
  std::fill(one.begin(), one.end(), -2.0f);
  EXPECT_EQ(test_device().run(Request::from_host(Op::relu, one)).values, std::vector<float>(16, 0.0f));
}

// A device opened as one without VK_EXT_external_memory_host (the fault seam).
TEST(HostImport, DeviceWithoutImportSaysSo) {
  gpu::FaultInjector::arm(gpu::Fault::host_import_unavailable);
  Device device;
  gpu::FaultInjector::disarm_all();
  EXPECT_EQ(device.host_import_alignment(), 0u);
  alignas(4096) static float memory[1024];
  expect_error(ErrorCode::invalid_argument, [&] { (void)device.import_host(memory); },
               "cannot import host memory");
}

// A Vulkan failure while importing: the codebase's mapping (out of memory); the next import works.
TEST(HostImport, FailedImportIsTypedAndTheNextOneWorks) {
  Device& device = test_device();
  SKIP_WITHOUT_IMPORT(device);
  CallerMemory memory = caller_memory(device, 1024, 2.0f);
  gpu::FaultInjector::arm(gpu::Fault::device_out_of_memory);
  expect_error(ErrorCode::out_of_memory, [&] { (void)device.import_host(memory.span); }, "importing");
  gpu::FaultInjector::disarm_all();
  HostBuffer x = device.import_host(memory.span);
  const Result result = device.run(Request::from_host(Op::scale, x, {}, 0.5f));
  ASSERT_EQ(result.values.size(), 1024u);
  EXPECT_EQ(result.values[0], 1.0f);
}

TEST(HostImport, AnotherDevicesImportFailsItsRequest) {
  Device& device = test_device();
  SKIP_WITHOUT_IMPORT(device);
  Device other;
  CallerMemory memory = caller_memory(other, 1024);
  HostBuffer foreign = other.import_host(memory.span);
  expect_error(ErrorCode::invalid_argument, [&] { device.run(Request::from_host(Op::relu, foreign)); },
               "another device");
}

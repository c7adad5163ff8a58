// The Vulkan BatchDevice on its own: many requests of different kernels and lengths in one
// submission, each result checked against the CPU reference.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <random>
#include <thread>

#include "gpu/context.hpp"
#include "gpu/vulkan_batch_device.hpp"
#include "gpubatch/batch_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"
#include "support/random_data.hpp"
#include "test_device.hpp"

using namespace gpubatch;

namespace {



// Takes every result of a finished batch and checks it against the CPU reference.
::testing::AssertionResult every_result_matches(detail::InFlightBatch& in_flight,
                                                 const std::vector<Request>& requests) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    Result result;
    in_flight.take_result(i, result);
    if (const auto mismatch = reference::check(requests[i], result))
      return ::testing::AssertionFailure() << "request " << i << ": " << *mismatch;
  }
  return ::testing::AssertionSuccess();
}

Request random_request(std::mt19937& rng) {
  std::uniform_int_distribution<int> op_pick(0, static_cast<int>(kBuiltinOpCount) - 1);
  std::uniform_int_distribution<int> len_pick(1, 3000);
  const auto op = static_cast<Op>(op_pick(rng));
  const std::size_t n = static_cast<std::size_t>(len_pick(rng));
  switch (op) {
    case Op::matmul: {
      std::uniform_int_distribution<std::uint32_t> dim(1, 40);
      const auto m = dim(rng), k = dim(rng), nn = dim(rng);
      return Request::matmul(random_floats(m * k, rng), random_floats(k * nn, rng), m, k, nn);
    }
    case Op::gradients: return Request::gradients(random_states(n / 16 + 1, rng));
    case Op::interpolate:
      return Request::interpolate(random_states(n / 16 + 1, rng), random_states(n / 16 + 1, rng),
                                  std::uniform_real_distribution<float>(0, 1)(rng),
                                  n % 2 ? InterpolationMode::slerp : InterpolationMode::lerp);
    default: return sample_request(op, n, rng);  // element-wise ops and dot, as the table samples them
  }
}

}  // namespace

TEST(BatchDevice, MixedKernelsAndRaggedLengthsInOneSubmission) {
  Device& device = test_device();
  auto batch_device = device.batch_device();
  std::mt19937 rng(42);
  for (int round = 0; round < 3; ++round) {
    std::vector<Request> requests;
    for (int i = 0; i < 300; ++i) requests.push_back(random_request(rng));
    // Several dot requests long enough for the two-pass reduction, beside short ones.
    requests.push_back(Request::dot(random_floats(5000, rng), random_floats(5000, rng)));
    requests.push_back(Request::dot(random_floats(1025, rng), random_floats(1025, rng)));
    std::vector<const Request*> pointers;
    for (auto& r : requests) pointers.push_back(&r);

    const auto before = device.counters();
    auto in_flight = batch_device->submit(pointers);
    ASSERT_TRUE(in_flight->wait_for(std::chrono::seconds(60)));
    const auto after = device.counters();
    EXPECT_EQ(after.submissions - before.submissions, 1u) << "one batch, one vkQueueSubmit";
    EXPECT_EQ(after.uploads - before.uploads, 1u);
    EXPECT_EQ(after.downloads - before.downloads, 1u);
    EXPECT_LE(after.dispatches - before.dispatches, kOpCount + 1) << "one dispatch per kernel (dot: two)";

    ASSERT_TRUE(every_result_matches(*in_flight, requests));
  }
}

TEST(BatchDevice, ManyTinySegmentsShareWorkgroups) {
  // Segments of 1..7 elements: one workgroup spans dozens of segments (binary search path).
  Device& device = test_device();
  std::mt19937 rng(5);
  std::vector<Request> requests;
  for (int i = 0; i < 2000; ++i) requests.push_back(Request::scale(random_floats(1 + i % 7, rng), float(i)));
  std::vector<const Request*> pointers;
  for (auto& r : requests) pointers.push_back(&r);
  auto in_flight = device.batch_device()->submit(pointers);
  ASSERT_TRUE(in_flight->wait_for(std::chrono::seconds(60)));
  ASSERT_TRUE(every_result_matches(*in_flight, requests));
}

TEST(BatchDevice, FramesAreReusedAcrossBatches) {
  Device& device = test_device();
  auto vulkan = std::dynamic_pointer_cast<gpu::VulkanBatchDevice>(device.batch_device());
  ASSERT_TRUE(vulkan);
  std::mt19937 rng(3);
  Request r = Request::relu(random_floats(1000, rng));
  const Request* one[] = {&r};
  device.run(r);  // warm: kernels built, a frame made
  const auto before = device.counters();
  const std::size_t frames = vulkan->frames_made();
  ASSERT_GE(frames, 1u);
  for (int i = 0; i < 20; ++i) {
    auto b = device.batch_device()->submit(one);
    ASSERT_TRUE(b->wait_for(std::chrono::seconds(30)));
    ASSERT_TRUE(every_result_matches(*b, {r}));
  }  // each batch gives its frame back before the next one takes one (a 1,000-float result is
     // taken as it lands, early_results.hpp: its frame may still be settling, so a few more may be made)
  EXPECT_LE(vulkan->frames_made(), frames + 2) << "sequential batches reuse their frames";
  EXPECT_EQ(device.counters().pipelines_created, before.pipelines_created) << "no pipeline is built per batch";
}

namespace {
// Runs the parts on `threads` threads, last part first, and counts them.
class ThreadedRunner final : public detail::ParallelRunner {
 public:
  explicit ThreadedRunner(std::size_t threads) : threads_(threads) {}
  std::size_t width() const override { return threads_; }
  void run(std::size_t parts, const std::function<void(std::size_t)>& work) override {
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < threads_; ++t)
      pool.emplace_back([&] {
        for (std::size_t i; (i = next.fetch_add(1)) < parts;) work(parts - 1 - i);
      });
    for (auto& t : pool) t.join();
    parts_run += parts;
  }
  std::size_t parts_run = 0;

 private:
  std::size_t threads_;
};
}  // namespace

TEST(BatchDevice, InputsCopiedOnSeveralThreadsLandWhereTheyBelong) {
  // Enough input bytes to be cut into byte ranges: one input (600,000 floats) spans several
  // ranges, small ones sit on range edges; every result must still match.
  Device& device = test_device();
  std::mt19937 rng(11);
  std::vector<Request> requests;
  requests.push_back(Request::relu(random_floats(600000, rng)));
  for (int i = 0; i < 500; ++i) {
    const std::size_t n = 1 + (i * 37) % 900;
    if (i % 3 == 0) requests.push_back(Request::add(random_floats(n, rng), random_floats(n, rng)));
    else if (i % 3 == 1) requests.push_back(Request::gradients(random_states(1 + n / 16, rng)));
    else requests.push_back(Request::scale(random_floats(n, rng), 0.5f));
  }
  requests.push_back(chain(random_floats(70000, rng)).relu().add(random_floats(70000, rng)));
  std::vector<const Request*> pointers;
  for (auto& r : requests) pointers.push_back(&r);
  ThreadedRunner runner(4);
  auto in_flight = device.batch_device()->submit(pointers, runner);
  EXPECT_EQ(runner.parts_run, 4u) << "about 3.5 MB of input: one range per thread";
  ASSERT_TRUE(in_flight->wait_for(std::chrono::seconds(60)));
  ASSERT_TRUE(every_result_matches(*in_flight, requests));
}

// GPUBATCH_COPY_PART_BYTES (read when a device opens) sets the smallest share of a batch's input
// copy a helper thread gets: 200 KiB of inputs stay on the submitting thread with the default
// 256 KiB and go out in three parts at 64 KiB, with the same results; a bad value is typed.
TEST(BatchDevice, CopyPartBytesSetsHowTheInputCopyIsShared) {
  std::mt19937 rng(13);
  std::vector<Request> requests;
  for (int i = 0; i < 200; ++i) requests.push_back(Request::relu(random_floats(256, rng)));
  std::vector<const Request*> pointers;
  for (auto& r : requests) pointers.push_back(&r);
  for (const char* part : {"", "65536"}) {
    if (*part) ::setenv("GPUBATCH_COPY_PART_BYTES", part, 1);
    Device device;
    ThreadedRunner runner(4);
    auto in_flight = device.batch_device()->submit(pointers, runner);
    EXPECT_EQ(runner.parts_run, *part ? 3u : 0u) << "GPUBATCH_COPY_PART_BYTES=" << part;
    ASSERT_TRUE(in_flight->wait_for(std::chrono::seconds(60)));
    EXPECT_TRUE(every_result_matches(*in_flight, requests)) << "GPUBATCH_COPY_PART_BYTES=" << part;
  }
  for (const char* bad : {"1024", "never", "lots"}) {
    ::setenv("GPUBATCH_COPY_PART_BYTES", bad, 1);
    try {
      Device device;
      ADD_FAILURE() << "GPUBATCH_COPY_PART_BYTES=" << bad << " was accepted";
    } catch (const gpubatch::Error& e) {
      EXPECT_EQ(e.code(), gpubatch::ErrorCode::invalid_config) << bad;
    }
  }
  ::unsetenv("GPUBATCH_COPY_PART_BYTES");
}

TEST(BatchDevice, LargeResultsCopiedOnSeveralThreadsMatch) {
  // A result of 1 MiB and more whose buffer already has its size (the executor hands over the
  // request's input vector) is copied out of readback in parts on the runner's threads; one
  // landing in an empty buffer, and small ones, are copied whole. Every value must match.
  Device& device = test_device();
  std::mt19937 rng(12);
  std::vector<Request> requests;
  requests.push_back(Request::relu(random_floats(600001, rng)));
  requests.push_back(Request::add(random_floats(262144, rng), random_floats(262144, rng)));
  requests.push_back(chain(random_floats(300000, rng)).relu().scale(2.0f));
  requests.push_back(Request::relu(random_floats(400000, rng)));  // taken into an empty buffer
  for (int i = 0; i < 20; ++i) requests.push_back(Request::scale(random_floats(1 + i * 41, rng), 0.5f));
  std::vector<const Request*> pointers;
  for (auto& r : requests) pointers.push_back(&r);
  auto in_flight = device.batch_device()->submit(pointers);
  ASSERT_TRUE(in_flight->wait_for(std::chrono::seconds(60)));
  ThreadedRunner runner(4);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    Result out;
    if (i != 3) out.values.assign(requests[i].a.size(), -1.0f);  // as the input vector handed over
    in_flight->take_result(i, out, runner);
    EXPECT_FALSE(reference::check(requests[i], out)) << "request " << i;
  }
  EXPECT_EQ(runner.parts_run, 12u) << "the first three results, four parts each";
}

// GPU timestamps around a batch cost a lone request's round trip (a bottom-of-pipe timestamp
// waits for the work) and nothing in the library reads them: device_time() is negative unless
// GPUBATCH_GPU_TIMESTAMPS=on, and then it is the batch's positive execution time.
TEST(BatchDevice, GpuTimestampsOnlyWhenAskedFor) {
  std::mt19937 rng(8);
  Request r = Request::relu(random_floats(4096, rng));
  const Request* one[] = {&r};
  auto device_time_of_one_batch = [&] {
    Device device;
    auto b = device.batch_device()->submit(one);
    EXPECT_TRUE(b->wait_for(std::chrono::seconds(30)));
    EXPECT_TRUE(every_result_matches(*b, {r}));
    return b->device_time();
  };
  EXPECT_LT(device_time_of_one_batch().count(), 0) << "off by default";
  ::setenv("GPUBATCH_GPU_TIMESTAMPS", "on", 1);
  const auto measured = device_time_of_one_batch();
  ::unsetenv("GPUBATCH_GPU_TIMESTAMPS");
  if (!test_device().context()->timestamps_supported()) GTEST_SKIP() << "the device has no timestamps";
  EXPECT_GT(measured.count(), 0);
}

// Nothing recorded on a lone caller's path: a frame whose command buffer already holds a batch's
// dispatches submits it again as it is (each of the frames a lone caller alternates between records
// once); a batch of another shape records anew, and the results stay right either way (the tables
// and inputs it reads are rewritten in place).
TEST(BatchDevice, ALoneCallersNextBatchReusesItsFramesCommandBuffer) {
  Device& device = test_device();
  std::mt19937 rng(21);
  auto run_one = [&](Request r) {
    const Request* one[] = {&r};
    auto b = device.batch_device()->submit(one);
    ASSERT_TRUE(b->wait_for(std::chrono::seconds(30)));
    ASSERT_TRUE(every_result_matches(*b, {r}));
  };
  run_one(Request::relu(random_floats(256, rng)));  // warm: a frame recorded for this shape
  const auto before = device.counters();
  for (int i = 0; i < 10; ++i) run_one(Request::relu(random_floats(256, rng)));
  const auto same = device.counters();
  EXPECT_EQ(same.submissions - before.submissions, 10u);
  EXPECT_EQ(same.dispatches - before.dispatches, 10u) << "a reused command buffer still counts its dispatch";
  // A lone relu's result is taken as it lands (early_results.hpp), and its frame settles until the
  // counter passes: the next batch may take a second frame, which records once. Per batch: nothing.
  EXPECT_LE(same.batch_recordings - before.batch_recordings, 2u) << "the same op and size: nothing recorded per batch";
  run_one(Request::sigmoid(random_floats(256, rng)));            // another kernel
  run_one(Request::relu(random_floats(300000, rng)));            // more blocks (and more memory)
  run_one(Request::dot(random_floats(5000, rng), random_floats(5000, rng)));  // two dispatches
  run_one(Request::dot(random_floats(5000, rng), random_floats(5000, rng)));
  const auto after = device.counters();
  EXPECT_GE(after.batch_recordings - same.batch_recordings, 3u);
  EXPECT_LE(after.batch_recordings - same.batch_recordings, 4u);
  EXPECT_EQ(after.dispatches - same.dispatches, 1u + 1u + 2u + 2u);
}

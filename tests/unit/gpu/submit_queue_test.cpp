// The lanes' SubmitQueue (src/gpu/submit_queue.hpp): a request submitted alone (submit_alone, the
// executor's direct and bulk lanes) signals the lanes' timeline, not the batches', and both run
// at once. On lavapipe (one queue in all) the lanes share the batches' VkQueue with a timeline of
// their own; on a GPU with a third queue in the family they have a VkQueue of their own.
#include <gtest/gtest.h>

#include <cstdlib>
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

void expect_matches(detail::InFlightBatch& batch, const Request& request) {
  Result result;
  batch.take_result(0, result);
  const auto mismatch = reference::check(request, result);
  EXPECT_FALSE(mismatch) << *mismatch;
}

}  // namespace

TEST(SubmitQueue, ARequestSubmittedAloneSignalsTheLanesTimelineNotTheBatches) {
  Device& device = test_device();
  auto ctx = device.context();
  ASSERT_NE(&ctx->lanes(), &ctx->batches()) << "the lanes have a timeline of their own by default";
  std::mt19937 rng(7);
  const Request request = sample_request(Op::relu, 5000, rng);
  const Request* one[] = {&request};
  const auto batches_before = ctx->batches().last_submitted();
  const auto lanes_before = ctx->lanes().last_submitted();
  auto batch = device.batch_device()->submit_alone(one);
  ASSERT_TRUE(batch->wait_for(std::chrono::seconds(60)));
  EXPECT_EQ(ctx->lanes().last_submitted(), lanes_before + 1);
  EXPECT_EQ(ctx->batches().last_submitted(), batches_before);
  EXPECT_GE(ctx->lanes().completed_value(), lanes_before + 1);
  expect_matches(*batch, request);
}

// Batches and lone requests interleaved, several in flight on both timelines at once, awaited in
// the reverse order of their submission: every result right, every frame given back (the device
// makes no more frames than were ever in flight at once).
TEST(SubmitQueue, BatchesAndLoneRequestsInFlightTogetherAllComplete) {
  Device& device = test_device();
  auto batch_device = device.batch_device();
  std::mt19937 rng(11);
  for (int round = 0; round < 3; ++round) {
    std::vector<Request> requests;
    for (int i = 0; i < 8; ++i) requests.push_back(sample_request(i % 2 ? Op::relu : Op::sigmoid, 1000 + 3000 * i, rng));
    std::vector<std::unique_ptr<detail::InFlightBatch>> in_flight;
    for (auto& r : requests) {
      const Request* one[] = {&r};
      in_flight.push_back(in_flight.size() % 2 ? batch_device->submit_alone(one) : batch_device->submit(one));
    }
    for (std::size_t i = in_flight.size(); i-- > 0;) {
      ASSERT_TRUE(in_flight[i]->wait_for(std::chrono::seconds(60))) << "request " << i;
      expect_matches(*in_flight[i], requests[i]);
    }
  }
  auto ctx = device.context();
  EXPECT_EQ(ctx->lanes().completed_value(), ctx->lanes().last_submitted());
  EXPECT_EQ(ctx->batches().completed_value(), ctx->batches().last_submitted());
}

// A lone request's poll() reads the lanes' timeline: it finishes without a blocking wait.
TEST(SubmitQueue, ALoneRequestIsPolledOnItsOwnTimeline) {
  Device& device = test_device();
  std::mt19937 rng(3);
  const Request request = sample_request(Op::relu, 256, rng);
  const Request* one[] = {&request};
  auto batch = device.batch_device()->submit_alone(one);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!batch->poll()) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << batch->pending_state();
    std::this_thread::yield();
  }
  expect_matches(*batch, request);
}

TEST(SubmitQueue, LaneQueueOffPutsTheLanesOnTheBatchesTimeline) {
  ::setenv("GPUBATCH_LANE_QUEUE", "off", 1);
  Device device;
  ::unsetenv("GPUBATCH_LANE_QUEUE");
  auto ctx = device.context();
  EXPECT_EQ(&ctx->lanes(), &ctx->batches());
  EXPECT_FALSE(ctx->dedicated_lane_queue());
  std::mt19937 rng(5);
  const Request request = sample_request(Op::relu, 700, rng);
  const Request* one[] = {&request};
  const auto before = ctx->batches().last_submitted();
  auto batch = device.batch_device()->submit_alone(one);
  ASSERT_TRUE(batch->wait_for(std::chrono::seconds(60)));
  EXPECT_EQ(ctx->batches().last_submitted(), before + 1);
  expect_matches(*batch, request);
}

TEST(SubmitQueue, ABadLaneQueueSettingIsATypedErrorNamingIt) {
  ::setenv("GPUBATCH_LANE_QUEUE", "maybe", 1);
  try {
    Device device;
    ADD_FAILURE() << "opened with GPUBATCH_LANE_QUEUE=maybe";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_config);
    EXPECT_NE(std::string(e.what()).find("GPUBATCH_LANE_QUEUE"), std::string::npos) << e.what();
  }
  ::unsetenv("GPUBATCH_LANE_QUEUE");
}

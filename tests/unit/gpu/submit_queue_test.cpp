// The express batches' SubmitQueue (src/gpu/submit_queue.hpp): an express batch (submit_express,
// the executor's batches of requests above priority level 0) signals the express timeline, not
// the batches', and both run at once. On lavapipe (one queue in all) express batches share the
// batches' VkQueue with a timeline of their own; on a GPU with a third queue in the family they
// have a VkQueue of their own.
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

TEST(SubmitQueue, AnExpressBatchSignalsTheExpressTimelineNotTheBatches) {
  Device& device = test_device();
  auto ctx = device.context();
  ASSERT_NE(&ctx->express(), &ctx->batches()) << "express batches have a timeline of their own by default";
  std::mt19937 rng(7);
  const Request request = sample_request(Op::relu, 5000, rng);
  const Request* one[] = {&request};
  const auto batches_before = ctx->batches().last_submitted();
  const auto express_before = ctx->express().last_submitted();
  auto batch = device.batch_device()->submit_express(one, detail::inline_runner());
  ASSERT_TRUE(batch->wait_for(std::chrono::seconds(60)));
  EXPECT_EQ(ctx->express().last_submitted(), express_before + 1);
  EXPECT_EQ(ctx->batches().last_submitted(), batches_before);
  EXPECT_GE(ctx->express().completed_value(), express_before + 1);
  expect_matches(*batch, request);
}

// Regular and express batches interleaved, several in flight on both timelines at once, awaited
// in the reverse order of their submission: every result right, both timelines complete.
TEST(SubmitQueue, RegularAndExpressBatchesInFlightTogetherAllComplete) {
  Device& device = test_device();
  auto batch_device = device.batch_device();
  std::mt19937 rng(11);
  for (int round = 0; round < 3; ++round) {
    std::vector<Request> requests;
    for (int i = 0; i < 8; ++i) requests.push_back(sample_request(i % 2 ? Op::relu : Op::sigmoid, 1000 + 3000 * i, rng));
    std::vector<std::unique_ptr<detail::InFlightBatch>> in_flight;
    for (auto& r : requests) {
      const Request* one[] = {&r};
      in_flight.push_back(in_flight.size() % 2 ? batch_device->submit_express(one, detail::inline_runner()) : batch_device->submit(one));
    }
    for (std::size_t i = in_flight.size(); i-- > 0;) {
      ASSERT_TRUE(in_flight[i]->wait_for(std::chrono::seconds(60))) << "request " << i;
      expect_matches(*in_flight[i], requests[i]);
    }
  }
  auto ctx = device.context();
  EXPECT_EQ(ctx->express().completed_value(), ctx->express().last_submitted());
  EXPECT_EQ(ctx->batches().completed_value(), ctx->batches().last_submitted());
}

// An express batch's poll() reads the express timeline: it finishes without a blocking wait.
TEST(SubmitQueue, AnExpressBatchIsPolledOnItsOwnTimeline) {
  Device& device = test_device();
  std::mt19937 rng(3);
  const Request request = sample_request(Op::relu, 256, rng);
  const Request* one[] = {&request};
  auto batch = device.batch_device()->submit_express(one, detail::inline_runner());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!batch->poll()) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << batch->pending_state();
    std::this_thread::yield();
  }
  expect_matches(*batch, request);
}

TEST(SubmitQueue, ExpressQueueOffPutsExpressBatchesOnTheBatchesTimeline) {
  ::setenv("GPUBATCH_EXPRESS_QUEUE", "off", 1);
  Device device;
  ::unsetenv("GPUBATCH_EXPRESS_QUEUE");
  auto ctx = device.context();
  EXPECT_EQ(&ctx->express(), &ctx->batches());
  EXPECT_FALSE(ctx->dedicated_express_queue());
  std::mt19937 rng(5);
  const Request request = sample_request(Op::relu, 700, rng);
  const Request* one[] = {&request};
  const auto before = ctx->batches().last_submitted();
  auto batch = device.batch_device()->submit_express(one, detail::inline_runner());
  ASSERT_TRUE(batch->wait_for(std::chrono::seconds(60)));
  EXPECT_EQ(ctx->batches().last_submitted(), before + 1);
  expect_matches(*batch, request);
}

TEST(SubmitQueue, ABadExpressQueueSettingIsATypedErrorNamingIt) {
  ::setenv("GPUBATCH_EXPRESS_QUEUE", "maybe", 1);
  try {
    Device device;
    ADD_FAILURE() << "opened with GPUBATCH_EXPRESS_QUEUE=maybe";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_config);
    EXPECT_NE(std::string(e.what()).find("GPUBATCH_EXPRESS_QUEUE"), std::string::npos) << e.what();
  }
  ::unsetenv("GPUBATCH_EXPRESS_QUEUE");
}

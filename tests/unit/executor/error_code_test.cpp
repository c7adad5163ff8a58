// gpubatch::error_code_of: the code a completion handler's exception_ptr holds, without the
// caller rethrowing it; and, from an executor, the shared exception of requests refused together.
#include <gtest/gtest.h>

#include <exception>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gpubatch/error.hpp"

namespace gpubatch::testing {
namespace {

std::exception_ptr error_of(ErrorCode code) { return std::make_exception_ptr(Error(code, "test")); }

TEST(ErrorCodeOf, ReadsEveryKindOfException) {
  EXPECT_EQ(error_code_of(nullptr), std::nullopt);
  EXPECT_EQ(error_code_of(error_of(ErrorCode::deadline_exceeded)), ErrorCode::deadline_exceeded);
  EXPECT_EQ(error_code_of(error_of(ErrorCode::queue_full)), ErrorCode::queue_full);
  EXPECT_EQ(error_code_of(std::make_exception_ptr(std::bad_alloc())), ErrorCode::out_of_memory);
  EXPECT_EQ(error_code_of(std::make_exception_ptr(std::runtime_error("x"))), ErrorCode::internal);
  EXPECT_EQ(error_code_of(std::make_exception_ptr(42)), ErrorCode::internal);
}

// The per-thread memory is by identity: many distinct exceptions, each read more than once and
// interleaved past the memory's size, keep their own codes.
TEST(ErrorCodeOf, DistinctExceptionsKeepTheirOwnCodes) {
  const ErrorCode codes[] = {ErrorCode::invalid_argument, ErrorCode::queue_full, ErrorCode::deadline_exceeded,
                             ErrorCode::shut_down, ErrorCode::device_lost, ErrorCode::cancelled,
                             ErrorCode::out_of_memory};
  std::vector<std::exception_ptr> errors;
  for (int i = 0; i < 20; ++i) errors.push_back(error_of(codes[i % 7]));
  for (int round = 0; round < 3; ++round)
    for (int i = 0; i < 20; ++i) EXPECT_EQ(error_code_of(errors[static_cast<std::size_t>(i)]), codes[i % 7]) << i;
  for (int i = 19; i >= 0; --i) EXPECT_EQ(error_code_of(errors[static_cast<std::size_t>(i)]), codes[i % 7]) << i;
}

// One shared exception read on many threads at once (the deadline watch's helpers resolve a round
// of expired requests that share one).
TEST(ErrorCodeOf, OneExceptionReadOnManyThreads) {
  const auto shared = error_of(ErrorCode::deadline_exceeded);
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i)
        if (error_code_of(shared) != ErrorCode::deadline_exceeded) ++wrong[static_cast<std::size_t>(t)];
    });
  for (auto& th : threads) th.join();
  for (int w : wrong) EXPECT_EQ(w, 0);
}

}  // namespace
}  // namespace gpubatch::testing

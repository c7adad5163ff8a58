#pragma once
// Submits requests through a handle and checks every result against the CPU reference, counting
// mismatches and errors (shared by callers' threads of the integration tests; the counts are
// atomics so that many threads tally into one).
#include <atomic>
#include <exception>
#include <future>
#include <vector>

#include "gpubatch/executor.hpp"
#include "gpubatch/reference.hpp"

namespace gpubatch::testing {

struct ReferenceTally {
  std::atomic<int> mismatches{0}, errors{0};

  // One result (or the error its call threw).
  template <typename Get>
  void check(const Request& request, Get&& get) {
    try {
      if (reference::check(request, get())) ++mismatches;
    } catch (const std::exception&) {
      ++errors;
    }
  }

  // All of `requests` as futures at once, then each result.
  void submit_and_check(BatchedGpuHandle& gpu, const std::vector<Request>& requests) {
    std::vector<std::future<Result>> futures;
    futures.reserve(requests.size());
    for (const auto& r : requests) futures.push_back(gpu.submit(r));
    for (std::size_t i = 0; i < requests.size(); ++i) check(requests[i], [&] { return futures[i].get(); });
  }
};

}  // namespace gpubatch::testing

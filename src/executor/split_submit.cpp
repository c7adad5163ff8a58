// Out of memory on a large batch: halve it and submit each half again, down to single requests,
// so that only a request that cannot fit alone fails. The parts run as separate device batches;
// the executor sees one InFlightBatch over all of them (SplitInFlight).
#include <algorithm>
#include <chrono>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "log.hpp"

#include "executor/split_submit.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::detail {
namespace {

struct Part {
  std::size_t first = 0;
  std::size_t count = 0;
  std::unique_ptr<InFlightBatch> inflight;  // null when `error` is set
  std::exception_ptr error;                 // the request (count == 1) could not be submitted
  bool done = false;
};

class SplitInFlight final : public InFlightBatch {
 public:
  explicit SplitInFlight(std::vector<Part> parts) : parts_(std::move(parts)) {}

  bool wait_for(std::chrono::nanoseconds timeout) override {
    const auto limit = std::chrono::steady_clock::now() + timeout;
    for (Part& p : parts_) {
      if (p.done || !p.inflight) continue;
      const auto left = std::max<std::chrono::nanoseconds>(
          std::chrono::nanoseconds(0), limit - std::chrono::steady_clock::now());
      if (!p.inflight->wait_for(left)) return false;
      p.done = true;
    }
    return true;
  }

  void take_result(std::size_t index, Result& out) override { take_result(index, out, inline_runner()); }
  void take_result(std::size_t index, Result& out, ParallelRunner& parallel) override {
    auto it = std::upper_bound(parts_.begin(), parts_.end(), index,
                               [](std::size_t i, const Part& p) { return i < p.first; });
    if (it == parts_.begin()) throw Error(ErrorCode::internal, "split batch: no such request");
    Part& p = *--it;
    if (p.error) std::rethrow_exception(p.error);
    p.inflight->take_result(index - p.first, out, parallel);
  }

  std::chrono::nanoseconds device_time() const override {
    std::chrono::nanoseconds sum{0};
    for (const Part& p : parts_) {
      if (!p.inflight) continue;
      const auto t = p.inflight->device_time();
      if (t.count() < 0) return std::chrono::nanoseconds(-1);
      sum += t;
    }
    return sum;
  }

 private:
  std::vector<Part> parts_;  // in request order, covering every request once
};

// True when the exception being handled means "out of memory".
bool out_of_memory_now(std::string& why) {
  try {
    throw;
  } catch (const Error& e) {
    why = e.message();
    return e.code() == ErrorCode::out_of_memory;
  } catch (const std::bad_alloc& e) {
    why = e.what();
    return true;
  } catch (...) {
    return false;
  }
}

void submit_range(BatchDevice& device, ParallelRunner& parallel, std::span<const Request* const> all,
                  std::size_t first, std::size_t count, std::vector<Part>& parts, int depth) {
  std::string why;
  try {
    parts.push_back(Part{first, count, device.submit(all.subspan(first, count), parallel), nullptr});
    return;
  } catch (...) {
    if (!out_of_memory_now(why)) throw;
  }
  if (count == 1) {
    parts.push_back(Part{first, 1, nullptr,
                         std::make_exception_ptr(Error(
                             ErrorCode::out_of_memory,
                             "it does not fit in memory even alone (the batch was split " +
                                 std::to_string(depth) + " times): " + why))});
    return;
  }
  const std::size_t half = count / 2;
  submit_range(device, parallel, all, first, half, parts, depth + 1);
  submit_range(device, parallel, all, first + half, count - half, parts, depth + 1);
}

}  // namespace

std::unique_ptr<InFlightBatch> submit_splitting_on_oom(BatchDevice& device,
                                                       std::span<const Request* const> requests,
                                                       ParallelRunner& parallel) {
  std::string why;
  try {
    return device.submit(requests, parallel);
  } catch (...) {
    if (requests.size() <= 1 || !out_of_memory_now(why)) throw;
  }
  log::warn("gpubatch executor: a batch of {} requests ran out of memory ({}); splitting it",
               requests.size(), why);
  std::vector<Part> parts;
  const std::size_t half = requests.size() / 2;
  submit_range(device, parallel, requests, 0, half, parts, 1);
  submit_range(device, parallel, requests, half, requests.size() - half, parts, 1);
  return std::make_unique<SplitInFlight>(std::move(parts));
}

}  // namespace gpubatch::detail

#pragma once
// One accepted request as it waits in the queue, the forming batch and a batch in flight: a small
// handle (Pending) that the strand moves, and the large part (PendingBody: the Request and its
// Completion) that stays where its producer put it until the batch is resolved.
//
// Why the split: the strand moves every request twice by value (out of the queue's slot into the
// forming batch; the slot's moved-from husk destroyed), and the strand alone caps the crowd's rate
// (issue 11). As one 304-byte struct, Pending's move constructor was a third of the strand's time
// on the H100 (16 threads of 256-float relu; bench/results/profile-h100-2026-11-25-s2-strand.txt),
// and its move and destructor together half of it over a null device
// (bench/executor_cost.cpp): five cache lines written by a producer's core read, five written,
// five torn down. The handle holds everything the strand decides with (times, bytes, level,
// cancellation and expiry state), 56 bytes: with the slot's sequence number one cache line, and
// the strand touches the body only through the device's submit. The body is allocated by the
// producer and freed by the completion thread that resolves it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "executor/deadline_watch.hpp"
#include "gpubatch/detail/completion.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch::detail {

struct PendingBody {
  Request request;
  Completion completion;  // empty when `expiry` holds it
  // A request with a deadline: its completion lives in the cell instead, taken by the strand or
  // expired by the deadline watch (deadline_watch.hpp). Pending::expiry points at it.
  std::shared_ptr<ExpiryCell> expiry;
};

struct Pending {
  using Clock = std::chrono::steady_clock;

  std::unique_ptr<PendingBody> body;  // null only once moved from
  Clock::time_point enqueued{};
  Clock::time_point deadline = Clock::time_point::max();
  std::size_t bytes = 0;  // input + output bytes
  // A handler with a connected cancellation slot: claimed by flush(), or cancelled first.
  RequestCancel* cancel = nullptr;
  ExpiryCell* expiry = nullptr;  // body->expiry's cell, read without touching the body
  std::uint8_t priority = 0;     // its level (SubmitOptions::priority)
  bool resolved = false;  // already failed while still in the queue (deadline): skip it

  Request& request() noexcept { return body->request; }
  const Request& request() const noexcept { return body->request; }
};
static_assert(sizeof(Pending) <= 56, "a queue slot (8-byte sequence + Pending) fits one cache line");

// A handle around a new body holding `request` and `completion` (moved from only once the body is
// allocated: when the allocation throws, both are left to the caller).
inline Pending make_pending(Request&& request, Completion&& completion) {
  Pending p;
  p.body = std::make_unique<PendingBody>(std::move(request), std::move(completion), nullptr);
  return p;
}

inline Completion& completion_of(Pending& p) noexcept {
  return p.expiry ? p.expiry->completion : p.body->completion;
}
// Resolved already: failed in the queue by the strand, or expired by the deadline watch.
inline bool gone(const Pending& p) noexcept { return p.resolved || (p.expiry && p.expiry->expired()); }

}  // namespace gpubatch::detail

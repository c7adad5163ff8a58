// The caller's express batch (DESIGN.md "Priorities"): a request above level 0, made while the
// device's regular slots are taken or a crowd of level-0 requests waits, is submitted at once in
// an express batch of its own by its caller's thread, and the completion threads complete it as
// they complete the strand's express batches (first).
//
// Why: the strand, one thread, forms every batch. Behind a saturated device it spends its time
// packing full batches of level-0 requests, and an express batch waited for its next look: on the
// H200 at 3 M requests/s offered with 10 % at level 1, the express batches' formation (enqueue to
// submit) had p99 7.1 ms and their device stage 476 us (BENCHMARKS.md, fifth session of
// 2026-11-27). Here the caller pays one small submit (its input copied, the frame's command
// buffer, vkQueueSubmit) instead.
//
// Order within a level stays arrival order: a caller submits only when no request above level 0
// waits in a queue or in the strand's former (upper_waiting); otherwise its request queues behind
// them as before.
#include <memory>
#include <span>
#include <utility>

#include "executor/executor_core.hpp"

namespace gpubatch::detail {

bool ExecutorCore::upper_waiting() const noexcept {
  for (const auto& queue : upper_queues_)
    if (queue->pushed_approx() != queue->popped_approx()) return true;
  // Pairs with publish_upper_held()'s fence: a position freed by the strand's pull shows the
  // "pulling" count (or a later one) here.
  std::atomic_thread_fence(std::memory_order_acquire);
  return upper_held_.load(std::memory_order_relaxed) != 0;
}

bool ExecutorCore::try_express(Request& request, Completion& completion, Clock::time_point now,
                               Clock::time_point deadline, std::size_t bytes, std::uint8_t level) noexcept {
  // Only where the strand would send an express batch too (express_ready): on an idle executor
  // one batch of both levels is as quick, and a lone caller has its own inline pass.
  if (slot_free() && level_queue(0).size_approx() < kExpressBeside) return false;
  if (upper_waiting() || !claim_express_slot()) return false;
  std::unique_ptr<Batch> batch;
  Pending p{std::move(request), std::move(completion), now, deadline, bytes, level, false, nullptr, nullptr};
  try {
    batch = take_batch_from_pool();
    batch->items.clear();
    batch->items.push_back(std::move(p));
    batch->requests.assign(1, &batch->items.front().request);
  } catch (...) {  // std::bad_alloc: the request is still the caller's (in p, or in the batch)
    Pending& back = batch && !batch->items.empty() ? batch->items.front() : p;
    request = std::move(back.request);
    completion = std::move(back.completion);
    release_express_slot();
    wake_if_waiting_for_slot();
    return false;
  }
  batch->reason = FlushReason::idle;
  batch->express = true;
  batch->slot_halves = 0;  // a slot of its own, as the strand's express batches
  batch->bytes = bytes;
  batch->error = nullptr;
  inflight_slots_.fetch_add(1, std::memory_order_seq_cst);
  batch->submitted = Clock::now();
  // Counted unresolved (and refused once shutdown began) as the lanes' submissions are.
  batch->inflight = lane_submit([&] { return device_->submit(std::span<const Request* const>(batch->requests)); });
  if (!batch->inflight) {
    // Shutdown began, or the device refused it: the queue (closed, or the strand's recovery)
    // meets that as it does for any request.
    inflight_slots_.fetch_sub(1, std::memory_order_seq_cst);
    request = std::move(batch->items.front().request);
    completion = std::move(batch->items.front().completion);
    batch->items.clear();
    release_express_slot();
    wake_if_waiting_for_slot();
    return false;
  }
  batch->submit_returned = Clock::now();
  // Ids apart from the strand's (next_batch_id_ is the strand's own): the trace names them.
  batch->id = kCallerBatchIds + express_inline_batches_.fetch_add(1, std::memory_order_relaxed);
  express_batches_.fetch_add(1, std::memory_order_relaxed);
  hand_to_completion(std::move(batch));
  return true;
}

}  // namespace gpubatch::detail

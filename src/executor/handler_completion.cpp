// The executor's side of Asio completion handlers (include/gpubatch/detail/completion.hpp):
// per-request cancellation (the strand takes cancelled requests out before they are submitted)
// and handlers that throw on an executor thread (caught, logged, counted).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <string>

#include "log.hpp"

#include "executor/executor_core.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::detail {

// ---------------------------------------------------------------------------------------------
// Hooks called from the handler plumbing.

void notify_cancelled(ExecutorCore* core) noexcept {
  if (core) core->on_request_cancelled();
}

std::shared_ptr<ExecutorCore> share(ExecutorCore* core) noexcept {
  if (!core) return nullptr;
  try {
    return core->shared_from_this();
  } catch (...) {
    return nullptr;  // not owned by a shared_ptr (cannot happen for an executor's core)
  }
}

namespace {

std::string what_of_current() noexcept {
  try {
    try {
      throw;
    } catch (const std::exception& e) {
      return e.what();
    } catch (...) {
      return "an exception not derived from std::exception";
    }
  } catch (...) {
    return {};
  }
}

// One log line per second at most: a handler that throws on every call must not flood the log
// (or slow its thread down with formatting); the lines say how many went unlogged.
std::atomic<std::int64_t> g_last_log_ns{std::numeric_limits<std::int64_t>::min()};
std::atomic<std::uint64_t> g_unlogged{0};
constexpr std::int64_t kLogIntervalNs = 1'000'000'000;

}  // namespace

void handler_threw(ExecutorCore* core) noexcept {
  if (!core) core = this_thread_core();
  const std::uint64_t count = core ? core->note_handler_exception() : 0;
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  std::int64_t last = g_last_log_ns.load(std::memory_order_relaxed);
  if ((last != std::numeric_limits<std::int64_t>::min() && now - last < kLogIntervalNs) ||
      !g_last_log_ns.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    g_unlogged.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::uint64_t unlogged = g_unlogged.exchange(0, std::memory_order_relaxed);
  try {
    log::error(
        "gpubatch executor: a completion handler threw on an executor thread; caught, the thread "
        "goes on (bind the handler to an executor of yours to have it thrown there): {} "
        "[{} on this executor so far; {} more since the last such line]",
        what_of_current(), count, unlogged);
  } catch (...) {
  }
}

// ---------------------------------------------------------------------------------------------
// Cancellation on the strand.

void ExecutorCore::on_request_cancelled() noexcept {
  cancels_.store(true, std::memory_order_relaxed);
  // The fence pairs with run_strand()'s last look (strand_has_work reads cancels_).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  post_if_idle();
}

bool ExecutorCore::drop_cancelled(Pending& p) noexcept {
  std::string why;
  try {
    why = describe(p.request) +
          ": its cancellation slot was signalled before it was submitted (operation_aborted)";
  } catch (...) {
  }
  return fail_pending(p, ErrorCode::cancelled, why, strand_stats_.cancelled);
}

// Takes every request whose slot was signalled out of the former and the queues (the part
// behind a full former: the rest is pulled, and checked, anyway).
// Runs once per strand run after a signal; signals that arrive meanwhile set cancels_ again.
void ExecutorCore::sweep_cancelled() {
  const auto is_cancelled = [](const Pending& p) { return p.cancel && p.cancel->cancelled(); };
  if (former_.any_of(is_cancelled)) {
    former_.remove_if([&](Pending& p) {
      if (!is_cancelled(p)) return false;
      drop_cancelled(p);
      return true;
    });
  }
  for (std::size_t level = 0; level < level_count(); ++level) {
    auto& q = level_queue(level);
    const std::uint64_t head = q.head_position();
    for (std::uint64_t pos = head; pos < head + q.capacity(); ++pos) {
      Pending* p = q.peek(pos);
      if (!p) break;
      if (gone(*p) || !is_cancelled(*p)) continue;
      drop_cancelled(*p);
      p->resolved = true;  // skipped when popped
    }
  }
}

// A batch about to be submitted: each request with a slot is claimed (a later signal leaves it
// in: it completes normally); one whose slot was signalled first leaves the batch.
void ExecutorCore::claim_or_drop(Batch& b) {
  std::vector<Pending>& items = b.items;
  b.requests.clear();
  b.requests.reserve(items.size());
  b.bytes = 0;
  std::size_t w = 0;
  for (std::size_t r = 0; r < items.size(); ++r) {
    Pending& p = items[r];
    if (p.expiry && !p.expiry->take()) continue;  // the deadline watch failed it first
    if (p.cancel && !p.cancel->claim()) {
      drop_cancelled(p);
      continue;
    }
    if (w != r) items[w] = std::move(p);
    // Erasing the tail below moves nothing before it: the pointer stays good.
    b.requests.push_back(&items[w].request);
    b.bytes += items[w].bytes;
    ++w;
  }
  items.erase(items.begin() + static_cast<std::ptrdiff_t>(w), items.end());
}

}  // namespace gpubatch::detail

// BatchExecutor: producers, the strand that forms batches, completion threads, shutdown.
// See executor_core.hpp for the picture and DESIGN.md for the contracts.
#include <pthread.h>

#include <algorithm>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "executor/executor_core.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch {
namespace detail {

namespace {

thread_local ExecutorCore* tl_core = nullptr;

void name_thread(const char* name) noexcept { pthread_setname_np(pthread_self(), name); }

template <typename A>
void bump(std::atomic<A>& counter, A by = 1) noexcept {  // single writer
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

std::exception_ptr make_error(ErrorCode code, const std::string& message) {
  return std::make_exception_ptr(Error(code, message));
}

// A new exception equal to the one being handled. Handing a caught exception's own object to
// another thread would leave its last release to whichever thread is last, inside libstdc++
// where ThreadSanitizer cannot see the reference count; a fresh object avoids that (error paths
// only).
std::exception_ptr fresh_current_exception() noexcept {
  try {
    try {
      throw;
    } catch (const Error& e) {
      return std::make_exception_ptr(Error(e.code(), std::string(e.message())));
    } catch (const std::bad_alloc&) {
      return std::make_exception_ptr(std::bad_alloc());
    } catch (const std::exception& e) {
      return std::make_exception_ptr(Error(ErrorCode::internal, e.what()));
    } catch (...) {
      return std::make_exception_ptr(Error(ErrorCode::internal, "unknown exception"));
    }
  } catch (...) {
    return std::current_exception();
  }
}

std::pair<ErrorCode, std::string> explain(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return {x.code(), std::string(x.message())};  // what() without its code: the caller adds it
  } catch (const std::bad_alloc& x) {
    return {ErrorCode::out_of_memory, x.what()};
  } catch (const std::exception& x) {
    return {ErrorCode::internal, x.what()};
  } catch (...) {
    return {ErrorCode::internal, "unknown exception"};
  }
}

template <typename T>
struct PromiseValue;
template <typename T>
struct PromiseValue<std::promise<T>> {
  using type = T;
};
template <typename H>
struct HandlerValue;
template <typename T>
struct HandlerValue<HandlerCompletion<T>> {
  using type = T;
};
template <typename T>
constexpr bool is_promise_v = requires { typename PromiseValue<T>::type; };

// Result -> the value type a call returns. Throws Error(internal) when the device's result does
// not have the expected shape.
template <typename T>
T extract(Result&& r) {
  if constexpr (std::is_same_v<T, std::vector<float>>) {
    return std::move(r.values);
  } else if constexpr (std::is_same_v<T, float>) {
    if (r.values.size() != 1)
      throw Error(ErrorCode::internal,
                  "dot result has " + std::to_string(r.values.size()) + " values, expected 1");
    return r.values[0];
  } else if constexpr (std::is_same_v<T, std::vector<std::uint8_t>>) {
    return std::move(r.states);
  } else {
    static_assert(std::is_same_v<T, Result>);
    return std::move(r);
  }
}

// A request whose result is as large as its first input gets that input's buffer for the result
// (the device has read the input by now): one allocation and one free fewer per request.
void reuse_input_buffer(Request& request, Result& result) noexcept {
  if (request.op == Op::interpolate) {
    if (result.states.capacity() == 0 && request.states_a.size() == output_bytes(request))
      result.states = std::move(request.states_a);
  } else if (result.values.capacity() == 0 && request.a.size() * sizeof(float) == output_bytes(request)) {
    result.values = std::move(request.a);
  }
}

}  // namespace

ExecutorCore* this_thread_core() noexcept { return tl_core; }

void resolve_value(Completion& completion, Result&& result, ExecutorCore* core) noexcept {
  std::visit(
      [&](auto& alt) {
        using A = std::decay_t<decltype(alt)>;
        if constexpr (std::is_same_v<A, std::monostate>) {
          return;
        } else if constexpr (is_promise_v<A>) {
          using T = typename PromiseValue<A>::type;
          try {
            alt.set_value(extract<T>(std::move(result)));
          } catch (...) {
            try {
              alt.set_exception(fresh_current_exception());
            } catch (...) {
            }
          }
        } else {
          using T = typename HandlerValue<A>::type;
          if (!alt) return;
          std::exception_ptr error;
          T value{};
          try {
            value = extract<T>(std::move(result));
          } catch (...) {
            error = fresh_current_exception();
          }
          alt.release()->complete(std::move(error), std::move(value),
                                  Delivery{false, core ? core : tl_core});
        }
      },
      completion);
  completion.emplace<std::monostate>();
}

void resolve_error(Completion& completion, std::exception_ptr error, bool from_initiation,
                   ExecutorCore* core) noexcept {
  std::visit(
      [&](auto& alt) {
        using A = std::decay_t<decltype(alt)>;
        if constexpr (std::is_same_v<A, std::monostate>) {
          return;
        } else if constexpr (is_promise_v<A>) {
          try {
            // Moved: this thread keeps no reference, so the exception is freed where it is read.
            alt.set_exception(std::move(error));
          } catch (...) {
          }
        } else {
          using T = typename HandlerValue<A>::type;
          if (alt)
            alt.release()->complete(std::move(error), T{},
                                    Delivery{from_initiation, core ? core : tl_core});
        }
      },
      completion);
  completion.emplace<std::monostate>();
}

std::string describe(const Request& r) {
  std::string s(to_string(r.op));
  s += " request (";
  switch (r.op) {
    case Op::matmul:
      s += std::to_string(r.m) + "x" + std::to_string(r.k) + " times " + std::to_string(r.k) +
           "x" + std::to_string(r.n);
      break;
    case Op::gradients:
    case Op::interpolate:
      s += std::to_string(r.states_a.size() / kLayersPerState) + " states";
      break;
    default:
      s += std::to_string(r.a.size()) + " floats";
      break;
  }
  s += ")";
  return s;
}

// ---------------------------------------------------------------------------------------------
// Construction, threads.

namespace {
std::shared_ptr<BatchDevice> require_device(std::shared_ptr<BatchDevice> device) {
  if (!device) throw Error(ErrorCode::invalid_argument, "BatchExecutor: the device is null");
  return device;
}
BatchConfig validated(BatchConfig config) {
  config.validate();
  return config;
}
}  // namespace

ExecutorCore::ExecutorCore(std::shared_ptr<BatchDevice> device, BatchConfig config)
    : config_(validated(std::move(config))),
      device_(require_device(std::move(device))),
      max_request_bytes_(device_->max_request_bytes()),
      big_request_bytes_(config_.max_batch_bytes / config_.max_batch_size),
      max_inflight_(config_.max_inflight_batches * std::max<std::size_t>(1, device_->inflight_multiplier())),
      watchdog_(std::chrono::duration_cast<Clock::duration>(config_.batch_timeout) *
                static_cast<long>(std::max<std::size_t>(1, device_->watchdog_periods()))),
      await_width_(std::clamp<std::size_t>(device_->inflight_multiplier(), 1, config_.completion_threads)),
      queue_(config_.queue_capacity),
      strand_(io_.get_executor()),
      timer_(strand_) {
  forming_.reserve(std::min<std::size_t>(config_.max_batch_size, 4096));
  for (std::size_t i = 0; i < config_.completion_threads; ++i)
    completion_stats_.push_back(std::make_unique<CompletionStats>());
}

ExecutorCore::~ExecutorCore() {
  // Normally every thread was joined by shutdown(). When the executor was destroyed from one of
  // its own threads, the threads ended on their own and the last one destroys this.
  const auto me = std::this_thread::get_id();
  auto finish = [me](std::thread& t) {
    if (!t.joinable()) return;
    if (t.get_id() == me) t.detach();
    else t.join();
  };
  finish(io_thread_);
  finish(resident_thread_);
  for (auto& t : completion_threads_) finish(t);
}

void ExecutorCore::start() {
  start_resident();  // src/executor/resident_lane.cpp
  work_.emplace(io_.get_executor());
  auto self = shared_from_this();
  io_thread_ = std::thread([self] {
    tl_core = self.get();
    name_thread("gpubatch-strand");
    for (;;) {
      try {
        self->io_.run();
        return;
      } catch (const std::exception& e) {
        spdlog::error("gpubatch executor: strand handler threw: {}", e.what());
      }
    }
  });
  for (std::size_t i = 0; i < config_.completion_threads; ++i) {
    completion_threads_.emplace_back([self, i] {
      tl_core = self.get();
      name_thread("gpubatch-done");
      self->completion_loop(i);
    });
  }
}

bool ExecutorCore::on_internal_thread() const noexcept { return tl_core == this; }

// ---------------------------------------------------------------------------------------------
// Producers.

void ExecutorCore::reject(Completion& completion, ErrorCode code, const std::string& message) noexcept {
  rejected_.fetch_add(1, std::memory_order_relaxed);
  try {
    resolve_error(completion, make_error(code, message), true, this);
  } catch (...) {
    resolve_error(completion, std::current_exception(), true, this);
  }
}

void ExecutorCore::enqueue(Request&& request, const SubmitOptions& options,
                           Completion&& completion) noexcept {
  try {
    validate(request);
  } catch (...) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    resolve_error(completion, fresh_current_exception(), true, this);
    return;
  }
  try {
    const std::size_t bytes = input_bytes(request) + output_bytes(request);
    if (bytes > max_request_bytes_) {
      reject(completion, ErrorCode::request_too_large,
             describe(request) + " needs " + std::to_string(bytes) + " bytes; " + device_->name() +
                 " takes at most " + std::to_string(max_request_bytes_) + " per request");
      return;
    }
    const auto now = Clock::now();
    if (options.deadline <= now) {
      reject(completion, ErrorCode::deadline_exceeded,
             describe(request) + ": its deadline had passed when it was submitted");
      return;
    }
    if (resident_on_ && try_resident(request, completion, now)) return;
    Pending p{std::move(request), std::move(completion), now, options.deadline, bytes};
    RequestCancel* const cancel = p.cancel = cancel_state_of(p.completion);
    PushResult r = PushResult::full;
    std::uint64_t pos = 0;
    bool deadline_first = false;  // the wait for room ended at the request's own deadline
    switch (config_.overflow) {
      case OverflowPolicy::reject:
        r = queue_.try_push(std::move(p), pos);
        break;
      case OverflowPolicy::block:
        if (options.deadline == Clock::time_point::max()) {
          r = queue_.push_wait(std::move(p), pos);
        } else {
          r = queue_.push_until(std::move(p), options.deadline, pos);
          deadline_first = true;
        }
        break;
      case OverflowPolicy::block_for: {
        auto limit = now + std::chrono::duration_cast<Clock::duration>(config_.block_timeout);
        if (options.deadline < limit) {
          limit = options.deadline;
          deadline_first = true;
        }
        r = queue_.push_until(std::move(p), limit, pos);
        break;
      }
    }
    if (r == PushResult::ok) {
      // Wake the strand only when it is idle and needs this request (see wake_position()).
      const bool urgent = options.deadline != Clock::time_point::max();
      if (urgent) urgent_.store(true, std::memory_order_relaxed);
      // Cancelled while it was being pushed: its signal found nothing to take out yet.
      const bool cancelled = cancel && cancel->cancelled();
      if (cancelled) cancels_.store(true, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (urgent || cancelled || bytes > big_request_bytes_ ||
          pos >= wake_pos_.load(std::memory_order_relaxed))
        post_if_idle();
      return;
    }
    // A failed push moved nothing: p still owns the request and its completion.
    if (r == PushResult::closed) {
      reject(p.completion, ErrorCode::shut_down,
             describe(p.request) + ": the executor has shut down");
    } else if (deadline_first) {
      reject(p.completion, ErrorCode::deadline_exceeded,
             describe(p.request) + ": its deadline passed while it waited for room in the queue");
    } else {
      reject(p.completion, ErrorCode::queue_full,
             describe(p.request) + ": the queue is full (" + std::to_string(queue_.capacity()) +
                 " requests, overflow = " + std::string(to_string(config_.overflow)) + ")");
    }
  } catch (...) {
    // Only std::bad_alloc can get here (the request was not queued).
    rejected_.fetch_add(1, std::memory_order_relaxed);
    resolve_error(completion, std::current_exception(), true, this);
  }
}

// After a slot was freed. Only a strand that went idle waiting for a slot is woken, not one
// after every batch: a lone caller's completion would pay a post, and the strand a run that finds
// nothing, before the caller's future resolves. Pairs with run_strand(), which publishes
// wants_slot_, fences, then reads the slots: it sees the freed slot, or we see wants_slot_.
void ExecutorCore::wake_if_waiting_for_slot() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (wants_slot_.load(std::memory_order_relaxed)) post_if_idle();
}

void ExecutorCore::post_if_idle() noexcept {
  if (strand_awake_.load(std::memory_order_relaxed)) return;
  if (strand_awake_.exchange(true, std::memory_order_seq_cst)) return;
  try {
    boost::asio::post(strand_, [this] { run_strand(); });
  } catch (...) {
    strand_awake_.store(false, std::memory_order_seq_cst);
  }
}

// ---------------------------------------------------------------------------------------------
// The strand.

void ExecutorCore::run_strand() {
  for (;;) {
    bump(strand_stats_.runs);
    try {
      process();
    } catch (const std::exception& e) {
      spdlog::error("gpubatch executor: batch formation failed: {}", e.what());
    }
    wake_pos_.store(wake_position(), std::memory_order_relaxed);
    wants_slot_.store(blocked_on_slot_, std::memory_order_relaxed);
    strand_awake_.store(false, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!strand_has_work()) return;
    if (strand_awake_.exchange(true, std::memory_order_seq_cst)) return;  // another run is posted
  }
}

// Where in the queue the strand next needs to look, as a push position: the first request of
// an empty batch (to start its max_wait timer, or to flush it at once with the adaptive policy),
// the request that makes the batch full, or the one that fills half the queue (so that a full
// queue never waits for a sleeping strand). kNever when only a free slot can help.
std::uint64_t ExecutorCore::wake_position() const noexcept {
  if (strand_finished_) return kNever;
  if (forming_.size() >= config_.max_batch_size || carry_) return kNever;
  const std::uint64_t head = queue_.popped_approx();
  if (forming_.empty()) return head;
  const std::uint64_t room = config_.max_batch_size - forming_.size();
  const std::uint64_t half = std::max<std::uint64_t>(1, queue_.capacity() / 2);
  return head + std::min(room, half) - 1;
}

bool ExecutorCore::strand_has_work() const noexcept {
  if (strand_finished_) return false;
  if (blocked_on_slot_ && slot_free()) return true;
  if (urgent_.load(std::memory_order_relaxed)) return true;
  if (cancels_.load(std::memory_order_relaxed)) return true;
  const std::uint64_t w = wake_position();
  return w != kNever && queue_.published(w);
}

// On the strand, for events that are not pushes (timer, shutdown): process through run_strand()
// so that the wake-up state is republished when the strand goes idle again. When a run is
// already posted, it will do the processing.
void ExecutorCore::kick() {
  if (!strand_awake_.exchange(true, std::memory_order_seq_cst)) run_strand();
}

void ExecutorCore::on_shutdown_requested() {
  closing_seen_ = true;
  if (cancel_.load(std::memory_order_acquire)) cancel_seen_ = true;
  kick();
}

void ExecutorCore::process() {
  if (strand_finished_) return;
  const bool urgent = urgent_.exchange(false, std::memory_order_relaxed);
  const bool cancels = cancels_.exchange(false, std::memory_order_relaxed);
  if (cancel_seen_) {
    cancel_everything();
  } else {
    auto now = Clock::now();
    blocked_on_slot_ = false;
    if (cancels) sweep_cancelled();
    for (;;) {
      pull(now);
      if (next_deadline() <= now && now - last_sweep_ >= kSweepInterval) {
        last_sweep_ = now;
        expire_forming(now);
        scan_queue_deadlines(now, true);
      }
      const auto reason = flush_reason(now);
      if (!reason) break;
      if (!slot_free()) {
        blocked_on_slot_ = true;
        break;
      }
      flush(*reason, now);
      now = Clock::now();
    }
    // Requests with a deadline that wait in the queue behind a full forming batch still fail
    // promptly: look at them in place.
    const bool full = forming_.size() >= config_.max_batch_size || carry_;
    if (!full) queue_deadline_ = Clock::time_point::max();  // pull() emptied the queue
    else if (urgent) scan_queue_deadlines(now, false);       // only what arrived since last time
    queue_.notify_space();
  }
  if (closing_seen_ && forming_.empty() && !carry_ && queue_.drained()) {
    strand_finished_ = true;
    timer_target_ = Clock::time_point::max();
    timer_.cancel();
    strand_done_.store(true, std::memory_order_seq_cst);
    maybe_done();
    return;
  }
  schedule_timer(Clock::now());
}

bool ExecutorCore::pull(Clock::time_point now) {
  std::uint64_t n = 0;
  while (forming_.size() < config_.max_batch_size && !carry_) {
    const bool got =
        queue_.try_consume_quiet([&](Pending&& p) { accept_into_forming(std::move(p), now); });
    if (!got) {
      // After the close every claimed position gets published promptly; wait for it so that the
      // drain cannot finish with an accepted request left behind.
      if (closing_seen_ && queue_.has_claimed()) {
        queue_.notify_space();  // the claimer may be waiting for a slot this round freed
        std::this_thread::yield();
        continue;
      }
      break;
    }
    ++n;
  }
  if (n) bump(strand_stats_.pulled, n);
  return n != 0;
}

void ExecutorCore::accept_into_forming(Pending&& p, Clock::time_point now) {
  if (p.resolved) return;  // expired in the queue, already counted and resolved
  if (p.cancel && p.cancel->cancelled()) {
    drop_cancelled(p);
    return;
  }
  if (p.deadline <= now) {
    bump(strand_stats_.expired);
    fail_pending(p, ErrorCode::deadline_exceeded,
                 describe(p.request) + ": its deadline passed while it waited in the queue");
    return;
  }
  if (!forming_.empty() && forming_bytes_ + p.bytes > config_.max_batch_bytes) {
    carry_.emplace(std::move(p));
    return;
  }
  forming_bytes_ += p.bytes;
  if (p.deadline < earliest_deadline_) earliest_deadline_ = p.deadline;
  forming_.push_back(std::move(p));
}

void ExecutorCore::expire_forming(Clock::time_point now) {
  compact_forming([&](Pending& p) {
    if (p.deadline > now) return false;
    bump(strand_stats_.expired);
    fail_pending(p, ErrorCode::deadline_exceeded,
                 describe(p.request) + ": its deadline passed while it waited for its batch");
    return true;
  });
  if (carry_) {
    if (carry_->deadline <= now) {
      bump(strand_stats_.expired);
      fail_pending(*carry_, ErrorCode::deadline_exceeded,
                   describe(carry_->request) + ": its deadline passed while it waited for its batch");
      carry_.reset();
    } else if (forming_.empty() || forming_bytes_ + carry_->bytes <= config_.max_batch_bytes) {
      Pending p = std::move(*carry_);
      carry_.reset();
      accept_into_forming(std::move(p), now);
    }
  }
}

// Requests still in the queue (behind a full forming batch): fail the expired ones in place
// (they are skipped when popped) and note the earliest deadline for the timer. `from_head`
// rescans everything; otherwise only positions not scanned before are looked at.
void ExecutorCore::scan_queue_deadlines(Clock::time_point now, bool from_head) {
  auto& q = queue_;
  const std::uint64_t head = q.head_position();
  std::uint64_t pos = from_head ? head : std::max(head, scanned_upto_);
  auto earliest = from_head ? Clock::time_point::max() : queue_deadline_;
  for (; pos < head + q.capacity(); ++pos) {
    Pending* p = q.peek(pos);
    if (!p) break;
    if (p->resolved || p->deadline == Clock::time_point::max()) continue;
    if (p->deadline <= now) {
      bump(strand_stats_.expired);
      fail_pending(*p, ErrorCode::deadline_exceeded,
                   describe(p->request) + ": its deadline passed while it waited in the queue");
      p->resolved = true;
    } else {
      earliest = std::min(earliest, p->deadline);
    }
  }
  scanned_upto_ = pos;
  queue_deadline_ = earliest;
}

// The earliest request deadline among those the strand holds or has seen in the queue.
Clock::time_point ExecutorCore::next_deadline() const noexcept {
  auto t = std::min(earliest_deadline_, queue_deadline_);
  if (carry_) t = std::min(t, carry_->deadline);
  return t;
}

std::optional<FlushReason> ExecutorCore::flush_reason(Clock::time_point now) const {
  if (forming_.empty()) return std::nullopt;
  if (forming_.size() >= config_.max_batch_size || carry_) return FlushReason::size;
  if (closing_seen_) return FlushReason::shutdown;
  if (now - forming_.front().enqueued >= config_.max_wait) return FlushReason::deadline;
  if (config_.policy == FlushPolicy::adaptive) return FlushReason::idle;
  return std::nullopt;
}

void ExecutorCore::flush(FlushReason reason, Clock::time_point now) {
  // No request whose deadline has passed reaches the device (the sweep may be rate-limited).
  if (earliest_deadline_ <= now) {
    expire_forming(now);
    if (forming_.empty()) return;
  }
  std::unique_ptr<Batch> batch = take_batch_from_pool();
  batch->id = next_batch_id_++;
  batch->reason = reason;
  batch->items.swap(forming_);  // forming_ takes the pooled (empty) vector
  forming_.clear();
  forming_bytes_ = 0;
  earliest_deadline_ = Clock::time_point::max();
  if (carry_) {
    Pending p = std::move(*carry_);
    carry_.reset();
    forming_bytes_ = p.bytes;
    earliest_deadline_ = p.deadline;
    forming_.push_back(std::move(p));
  }
  claim_or_drop(batch->items);  // from here a cancellation no longer takes a request out
  const std::size_t n = batch->items.size();
  if (n == 0) {  // every request of it was cancelled
    --next_batch_id_;
    return_batch_to_pool(std::move(batch));
    return;
  }
  batch->requests.clear();
  batch->requests.reserve(n);
  for (const Pending& p : batch->items) batch->requests.push_back(&p.request);

  inflight_slots_.fetch_add(1, std::memory_order_seq_cst);
  unresolved_batches_.fetch_add(1, std::memory_order_seq_cst);
  bump(strand_stats_.batches);
  bump(strand_stats_.flushes[static_cast<int>(reason)]);
  bump(strand_stats_.dispatched, static_cast<std::uint64_t>(n));

  batch->submitted = Clock::now();
  try {
    batch->inflight = submit_splitting_on_oom(*device_, std::span<const Request* const>(batch->requests),
                                              strand_runner_);
    if (!batch->inflight)
      batch->error = make_error(ErrorCode::internal, device_->name() + " returned no batch");
  } catch (...) {
    batch->error = std::current_exception();
  }
  batch->submit_returned = Clock::now();
  {
    std::lock_guard<std::mutex> lock(inflight_mutex_);
    inflight_queue_.push_back(std::move(batch));
  }
  inflight_cv_.notify_one();
}

void ExecutorCore::fail_pending(Pending& p, ErrorCode code, const std::string& why) noexcept {
  // Runs on the strand: handlers are posted (never run inline here).
  try {
    resolve_error(p.completion, make_error(code, why), true);
  } catch (...) {
    resolve_error(p.completion, std::current_exception(), true);
  }
}

void ExecutorCore::cancel_everything() {
  auto cancel = [this](Pending& p) {
    bump(strand_stats_.cancelled);
    fail_pending(p, ErrorCode::shut_down,
                 describe(p.request) + ": cancelled by shutdown before it was submitted");
  };
  for (Pending& p : forming_) cancel(p);
  forming_.clear();
  if (carry_) {
    cancel(*carry_);
    carry_.reset();
  }
  forming_bytes_ = 0;
  earliest_deadline_ = Clock::time_point::max();
  for (;;) {
    const bool got = queue_.try_consume_quiet([&](Pending&& p) {
      bump(strand_stats_.pulled);
      if (!p.resolved) cancel(p);
    });
    if (got) continue;
    if (queue_.has_claimed()) {
      queue_.notify_space();  // the claimer may be waiting for a slot this round freed
      std::this_thread::yield();
      continue;
    }
    break;
  }
  queue_.notify_space();
}

void ExecutorCore::schedule_timer(Clock::time_point now) {
  auto target = Clock::time_point::max();
  if (!forming_.empty()) {
    if (!blocked_on_slot_ && config_.policy == FlushPolicy::deadline) {
      const auto due =
          forming_.front().enqueued + std::chrono::duration_cast<Clock::duration>(config_.max_wait);
      // Already due (the strand took longer than max_wait since it looked): fire at once, or
      // the batch would wait for the next push or shutdown (seen under ASan: 30 s).
      target = std::max(due, now);
    }
  }
  if (const auto d = next_deadline(); d != Clock::time_point::max())
    target = std::min(target, std::max(d, last_sweep_ + kSweepInterval));
  if (!forming_.empty() && config_.policy == FlushPolicy::adaptive && !blocked_on_slot_) {
    // Adaptive flushes on a free slot; the oldest request's max_wait still bounds the wait.
    const auto due =
        forming_.front().enqueued + std::chrono::duration_cast<Clock::duration>(config_.max_wait);
    target = std::min(target, std::max(due, now));
  }
  if (target == timer_target_) return;
  timer_target_ = target;
  if (target == Clock::time_point::max()) {
    timer_.cancel();
    return;
  }
  timer_.expires_at(target);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec == boost::asio::error::operation_aborted) return;
    timer_target_ = Clock::time_point::max();
    bump(strand_stats_.timer_wakeups);
    kick();
  });
}

// ---------------------------------------------------------------------------------------------
// Completion.

std::unique_ptr<Batch> ExecutorCore::take_batch_from_pool() {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (!pool_.empty()) {
      auto b = std::move(pool_.back());
      pool_.pop_back();
      return b;
    }
  }
  return std::make_unique<Batch>();
}

void ExecutorCore::return_batch_to_pool(std::unique_ptr<Batch> batch) {
  batch->items.clear();
  batch->requests.clear();
  batch->inflight.reset();
  batch->error = nullptr;
  std::lock_guard<std::mutex> lock(pool_mutex_);
  if (pool_.size() < max_inflight_ + 2) pool_.push_back(std::move(batch));
}

// The strand runs parts itself too, so it never waits for a part nobody has claimed: a completion
// thread that is waiting for the device simply does not help.
void ExecutorCore::run_parallel(std::size_t parts, const std::function<void(std::size_t)>& work) {
  if (parts <= 1 || completion_stats_.empty()) {
    for (std::size_t i = 0; i < parts; ++i) work(i);
    return;
  }
  ParallelJob job;
  job.work = &work;
  job.parts = parts;
  job.left.store(parts, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(inflight_mutex_);
    parallel_job_ = &job;
  }
  inflight_cv_.notify_all();
  for (;;) {
    std::size_t part;
    {
      std::lock_guard<std::mutex> lock(inflight_mutex_);
      if (job.next == job.parts) break;
      part = job.next++;
      if (job.next == job.parts) parallel_job_ = nullptr;
    }
    work(part);
    job.left.fetch_sub(1, std::memory_order_release);
  }
  // Parts other threads claimed are running now (each a short copy).
  while (job.left.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

void ExecutorCore::completion_loop(std::size_t index) {
  std::unique_lock<std::mutex> lock(inflight_mutex_);
  for (;;) {
    // The strand waits for its parallel job: help there first. Then with a finished batch
    // (oldest first), else wait for the next one.
    if (parallel_job_) {
      ParallelJob* job = parallel_job_;
      const std::size_t part = job->next++;
      if (job->next == job->parts) parallel_job_ = nullptr;
      lock.unlock();
      (*job->work)(part);
      job->left.fetch_sub(1, std::memory_order_release);  // `job` may be gone after this
      lock.lock();
      continue;
    }
    if (!ready_.empty()) {
      Batch* b = ready_.front();
      const std::uint32_t chunk = b->next_chunk++;
      if (b->next_chunk == b->chunks) ready_.pop_front();
      lock.unlock();
      complete_chunk(*b, chunk, index);
      lock.lock();
      continue;
    }
    if (awaiting_ < await_width_ && !inflight_queue_.empty()) {
      std::unique_ptr<Batch> owned = std::move(inflight_queue_.front());
      inflight_queue_.pop_front();
      ++awaiting_;
      lock.unlock();
      Batch* b = owned.release();  // from here owned by its chunks; the last one pools it
      await_batch(*b, index);
      lock.lock();
      --awaiting_;
      // This thread takes the first chunk; the others go to whoever is idle.
      b->next_chunk = 1;
      if (b->chunks > 1) ready_.push_back(b);
      const bool more_to_wait_for = !inflight_queue_.empty();
      lock.unlock();
      if (b->chunks > 1 || more_to_wait_for) inflight_cv_.notify_all();
      complete_chunk(*b, 0, index);
      lock.lock();
      continue;
    }
    if (stop_completion_ && inflight_queue_.empty() && awaiting_ == 0) return;
    inflight_cv_.wait(lock);
  }
}

void ExecutorCore::await_batch(Batch& b, std::size_t thread_index) {
  CompletionStats& st = *completion_stats_[thread_index];
  const std::size_t n = b.items.size();
  std::exception_ptr error = b.error;
  if (!error) {
    try {
      const auto limit = b.submitted + watchdog_;
      // Poll for up to completion_spin first (never past the watchdog's limit): a lone request
      // is back without the blocking wait's wake-up. Only this thread, while it awaits a
      // submitted batch, polls: an idle executor spins not at all.
      bool finished = false;
      if (config_.completion_spin.count() > 0)
        finished = poll_until(*b.inflight,
                              std::min(limit, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                                 config_.completion_spin)));
      while (!finished) {
        const auto now = Clock::now();
        if (now >= limit) {
          error = make_error(ErrorCode::device_lost,
                             "batch " + std::to_string(b.id) + " of " + std::to_string(n) +
                                 " requests did not complete within " +
                                 std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(watchdog_).count()) + " ms");
          break;
        }
        const auto slice = std::min<Clock::duration>(limit - now, std::chrono::milliseconds(100));
        finished = b.inflight->wait_for(slice);
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) recover_if_device_lost(error);  // src/executor/recovery.cpp
  b.done = Clock::now();
  b.error = error;
  if (error) {
    auto [code, what] = explain(error);
    spdlog::warn("gpubatch executor: batch {} ({} requests) failed: {}", b.id, n, what);
    b.error_code = code;
    b.error_what = std::move(what);
  } else {
    st.device_time.record(b.done - b.submitted);
  }
  const std::size_t helpers = completion_stats_.size();
  b.chunks = static_cast<std::uint32_t>(std::clamp<std::size_t>(n / kMinChunk, 1, helpers));
  b.next_chunk = 0;
  b.chunks_taking.store(b.chunks, std::memory_order_relaxed);
  b.chunks_resolving.store(b.chunks, std::memory_order_relaxed);
}

void ExecutorCore::complete_chunk(Batch& b, std::uint32_t chunk, std::size_t thread_index) {
  CompletionStats& st = *completion_stats_[thread_index];
  const std::size_t n = b.items.size();
  const std::size_t first = n * chunk / b.chunks, last = n * (chunk + 1) / b.chunks;

  // Take the chunk's results while the device's memory is still the batch's; the last chunk to
  // finish taking gives the device slot back (the strand can submit the next batch meanwhile).
  thread_local std::vector<Result> results;
  thread_local std::vector<std::pair<std::size_t, std::exception_ptr>> item_errors;
  item_errors.clear();
  if (!b.error) {
    if (results.size() < last - first) results.resize(last - first);
    for (std::size_t i = first; i < last; ++i) {
      try {
        reuse_input_buffer(b.items[i].request, results[i - first]);
        b.inflight->take_result(i, results[i - first]);
      } catch (...) {
        item_errors.emplace_back(i, fresh_current_exception());
      }
    }
  }
  if (b.chunks_taking.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    b.inflight.reset();
    inflight_slots_.fetch_sub(1, std::memory_order_seq_cst);
    wake_if_waiting_for_slot();
  }

  // Statistics first, so that whoever sees a result also sees it counted.
  const std::uint64_t bad = b.error ? last - first : item_errors.size();
  for (std::size_t i = first; i < last; ++i) {
    st.queue_wait.record(b.submitted - b.items[i].enqueued);
    st.submit_latency.record(b.submit_returned - b.items[i].enqueued);
    st.end_to_end.record(b.done - b.items[i].enqueued);
  }
  bump(st.completed, static_cast<std::uint64_t>(last - first) - bad);
  bump(st.failed, bad);

  // Newest first: a caller waiting for its oldest request then wakes once, to find its later
  // ones (most often in the same batch) already resolved, instead of once per request.
  if (b.error) {
    const std::string suffix =
        " in batch " + std::to_string(b.id) + " of " + std::to_string(n) + " requests: " + b.error_what;
    for (std::size_t i = last; i-- > first;) {
      Pending& p = b.items[i];
      std::exception_ptr e;
      try {
        e = make_error(b.error_code, describe(p.request) + suffix);
      } catch (...) {
        e = b.error;
      }
      resolve_error(p.completion, std::move(e), false);
    }
  } else {
    std::size_t errors_left = item_errors.size();  // in ascending index order
    for (std::size_t i = last; i-- > first;) {
      if (errors_left > 0 && item_errors[errors_left - 1].first == i) {
        --errors_left;
        resolve_error(b.items[i].completion, std::move(item_errors[errors_left].second), false);
      } else {
        resolve_value(b.items[i].completion, std::move(results[i - first]));
        results[i - first] = Result{};
      }
    }
  }
  if (b.chunks_resolving.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The batch's last chunk: every request of it has resolved.
  if (trace_.on()) record_trace(b);
  std::unique_ptr<Batch> owned(&b);
  b.items.clear();
  b.error = nullptr;
  b.error_what.clear();
  unresolved_batches_.fetch_sub(1, std::memory_order_seq_cst);
  return_batch_to_pool(std::move(owned));
  maybe_done();
}

// ---------------------------------------------------------------------------------------------
// Shutdown.

void ExecutorCore::maybe_done() {
  if (!strand_done_.load(std::memory_order_seq_cst)) return;
  if (unresolved_batches_.load(std::memory_order_seq_cst) != 0) return;
  std::lock_guard<std::mutex> lock(shutdown_mutex_);
  if (done_) return;
  done_ = true;
  stop_threads_locked();
  shutdown_cv_.notify_all();
}

void ExecutorCore::stop_threads_locked() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(inflight_mutex_);
    stop_completion_ = true;
  }
  inflight_cv_.notify_all();
  if (resident_on_) wake_resident_locked();
  work_.reset();  // the strand thread ends once its last handler has run
}

void ExecutorCore::shutdown(ShutdownMode mode) {
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(shutdown_mutex_);
    if (!done_) {
      if (mode == ShutdownMode::cancel && !cancel_.exchange(true)) post = true;
      if (!closing_) {
        closing_ = true;
        resident_closed_.store(true, std::memory_order_seq_cst);
        queue_.close();
        post = true;
      }
    }
  }
  if (post) boost::asio::post(strand_, [this] { on_shutdown_requested(); });
  if (on_internal_thread()) return;  // cannot wait for ourselves
  {
    std::unique_lock<std::mutex> lock(shutdown_mutex_);
    shutdown_cv_.wait(lock, [&] { return done_; });
  }
  std::lock_guard<std::mutex> lock(join_mutex_);
  if (io_thread_.joinable()) io_thread_.join();
  if (resident_thread_.joinable()) resident_thread_.join();
  for (auto& t : completion_threads_)
    if (t.joinable()) t.join();
  if (trace_.on()) trace_.stop();  // every batch has been recorded: write the file
}

// ---------------------------------------------------------------------------------------------
// Statistics.

Stats ExecutorCore::stats() const {
  Stats s;
  const auto load = [](const std::atomic<std::uint64_t>& a) {
    return a.load(std::memory_order_relaxed);
  };
  s.submitted = queue_.pushed_approx();
  s.rejected = load(rejected_);
  s.handler_exceptions = load(handler_exceptions_);
  s.expired = load(strand_stats_.expired);
  s.cancelled = load(strand_stats_.cancelled);
  const std::uint64_t dispatched = load(strand_stats_.dispatched);
  s.batches = load(strand_stats_.batches);
  s.flushes.size = load(strand_stats_.flushes[0]);
  s.flushes.deadline = load(strand_stats_.flushes[1]);
  s.flushes.idle = load(strand_stats_.flushes[2]);
  s.flushes.shutdown = load(strand_stats_.flushes[3]);
  LatencyHistogram::Snapshot qw, sl, dt, e2e;
  for (const auto& c : completion_stats_) {
    s.completed += load(c->completed);
    s.device_errors += load(c->failed);
    qw += c->queue_wait;
    sl += c->submit_latency;
    dt += c->device_time;
    e2e += c->end_to_end;
  }
  // Resident requests (resident_lane.cpp) never enter the queue: they count as accepted and
  // as having left it at once.
  const std::uint64_t resident = load(resident_accepted_);
  s.submitted += resident;
  s.resident = load(resident_stats_.completed);
  s.completed += s.resident;
  s.device_errors += load(resident_stats_.failed);
  s.cancelled += load(resident_stats_.cancelled);
  e2e += resident_stats_.end_to_end;
  s.failed = s.expired + s.cancelled + s.device_errors;
  const std::uint64_t left = dispatched + s.expired + s.cancelled - load(resident_stats_.cancelled) + resident;
  s.queue_depth = s.submitted > left ? s.submitted - left : 0;
  s.inflight_batches = inflight_slots_.load(std::memory_order_relaxed);
  s.max_batch_size = config_.max_batch_size;
  s.mean_batch_size = s.batches ? static_cast<double>(dispatched) / static_cast<double>(s.batches) : 0.0;
  s.mean_fill = s.mean_batch_size / static_cast<double>(config_.max_batch_size);
  s.queue_wait = qw.summary();
  s.submit_latency = sl.summary();
  s.strand_runs = load(strand_stats_.runs);
  s.timer_wakeups = load(strand_stats_.timer_wakeups);
  s.device_time = dt.summary();
  s.end_to_end = e2e.summary();
  try {
    const TransferTotals t = device_->transfers();
    s.transfers = {t.uploads, t.downloads, t.bytes_up, t.bytes_down, t.dispatches, t.submissions};
  } catch (...) {
  }
  s.devices = device_stats_of(*device_, s, dispatched);  // src/executor/device_stats.cpp
  return s;
}

// ---------------------------------------------------------------------------------------------

void enqueue(ExecutorCore* core, Request&& request, const SubmitOptions& options,
             Completion&& completion) noexcept {
  if (core) {
    core->enqueue(std::move(request), options, std::move(completion));
    return;
  }
  try {
    resolve_error(completion,
                  make_error(ErrorCode::shut_down,
                             describe(request) + ": the handle is not attached to an executor"),
                  true);
  } catch (...) {
    resolve_error(completion, std::current_exception(), true);
  }
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// BatchExecutor.

BatchExecutor::BatchExecutor(std::shared_ptr<detail::BatchDevice> device, BatchConfig config)
    : core_(std::make_shared<detail::ExecutorCore>(std::move(device), std::move(config))) {
  start_trace_from_environment(*core_);
  core_->start();
}

BatchExecutor::~BatchExecutor() {
  if (core_) core_->shutdown(ShutdownMode::drain);
}

BatchExecutor& BatchExecutor::operator=(BatchExecutor&& other) noexcept {
  if (this != &other) {
    if (core_) core_->shutdown(ShutdownMode::drain);
    core_ = std::move(other.core_);
  }
  return *this;
}

BatchedGpuHandle BatchExecutor::handle() const { return BatchedGpuHandle(core_); }

void BatchExecutor::shutdown(ShutdownMode mode) {
  if (core_) core_->shutdown(mode);
}

Stats BatchExecutor::stats() const { return core_ ? core_->stats() : Stats{}; }

const BatchConfig& BatchExecutor::config() const noexcept { return core_->config(); }

}  // namespace gpubatch

#pragma once
// The executor's shared state (handles hold it by shared pointer) and its three parts:
//   producers   enqueue(): validate, timestamp, push into the bounded MPSC queue, wake the strand
//               only when it is idle (one flag); the push's own post runs the strand, which
//               flushes an arrival at an idle adaptive executor at once (no timer in between);
//   strand      whoever holds strand_awake_: the io_context thread, or for one pass a synchronous
//               caller that found it idle (run_strand); drains the queues into the forming batch,
//               decides when to flush, submits to the device (at most max_inflight_batches at a
//               time, twice that once saturated, large-request batches at half a slot), keeps
//               one timer for the oldest request's max_wait and the earliest request deadline;
//   completion  threads: one at a time (a device set: one per member) waits for the oldest
//               submitted batch (polling a lone caller's or a full one for completion_spin, then
//               blocking); a finished batch
//               is cut into chunks that every idle completion thread helps with (take the chunk's
//               results, then resolve its futures or handlers); the last chunk to have taken its
//               results frees the batch's device slot (waking the strand if it waits for one).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "executor/batch_former.hpp"
#include "executor/backlog_trend.hpp"
#include "executor/cost_model.hpp"
#include "executor/count_cap.hpp"
#include "executor/deadline_watch.hpp"
#include "executor/pull_loop.hpp"
#include "executor/drain_rate.hpp"
#include "executor/helper_pool.hpp"
#include "executor/split_submit.hpp"
#include "gpubatch/batch_device.hpp"
#include "executor/histogram.hpp"
#include "executor/mpsc_queue.hpp"
#include "executor/trace.hpp"
#include "gpubatch/config.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/stats.hpp"

namespace gpubatch::detail {

using Clock = std::chrono::steady_clock;

// One accepted request as it waits in the queue and the forming batch.
struct Pending {
  Request request;
  Completion completion;
  Clock::time_point enqueued{};
  Clock::time_point deadline = Clock::time_point::max();
  std::size_t bytes = 0;  // input + output bytes
  std::uint8_t priority = 0;  // its level (SubmitOptions::priority)
  bool resolved = false;  // already failed while still in the queue (deadline): skip it
  // A handler with a connected cancellation slot: claimed by flush(), or cancelled first.
  RequestCancel* cancel = nullptr;
  // A request with a deadline: its completion lives here instead, taken by the strand or expired
  // by the deadline watch (deadline_watch.hpp).
  std::shared_ptr<ExpiryCell> expiry;
  std::size_t in_place = 0;  // of `bytes`, those of its HostBuffers (weight_of, batch_former.hpp)
};

inline Completion& completion_of(Pending& p) noexcept { return p.expiry ? p.expiry->completion : p.completion; }
// Resolved already: failed in the queue by the strand, or expired by the deadline watch.
inline bool gone(const Pending& p) noexcept { return p.resolved || (p.expiry && p.expiry->expired()); }

struct Batch {
  std::uint64_t id = 0;
  FlushReason reason = FlushReason::size;
  std::vector<Pending> items;
  std::vector<const Request*> requests;
  std::unique_ptr<InFlightBatch> inflight;
  std::exception_ptr error;  // submit() failed, or the batch failed as a whole
  std::size_t bytes = 0;  // input + output bytes of its requests
  Clock::time_point submitted{};
  Clock::time_point submit_returned{};  // the device's submit() returned (or threw); the trace
  // Completion, once the device has finished it: requests [chunk * n / chunks, ...) per chunk.
  Clock::time_point done{};
  std::chrono::nanoseconds gpu_time{-1};  // the GPU's own time, for the trace (timestamps on)
  ErrorCode error_code = ErrorCode::internal;  // with `error`: its code and message
  std::string error_what;
  std::uint32_t slot_halves = 2;  // of the in-flight slots (ExecutorCore::slot_halves)
  bool express = false;  // levels above 0 only, in the express slot (ExecutorCore::express_ready)
  std::uint32_t chunks = 1;
  std::uint32_t next_chunk = 0;                   // guarded by inflight_mutex_
  std::atomic<std::uint32_t> chunks_taking{0};    // chunks still taking results (device memory)
  std::atomic<std::uint32_t> chunks_resolving{0};  // chunks not yet done resolving
};

// Resolving one request (any Completion alternative). Never throw. A handler that throws on an
// executor thread is counted in `core` (null: the executor whose thread this is).
void resolve_value(Completion& completion, Result&& result, ExecutorCore* core = nullptr) noexcept;
void resolve_error(Completion& completion, std::exception_ptr error, bool from_initiation,
                   ExecutorCore* core = nullptr) noexcept;
// Moves the request's first input into `result` when the result has its size (after the device
// has read it; completion.cpp).
void reuse_input_buffer(Request& request, Result& result) noexcept;
// "relu request (256 floats)"
std::string describe(const Request& request);
std::string describe(const RequestShape& shape);
RequestShape shape_of(const Request& request) noexcept;
// One exception shared by requests of one shape that fail one after another for one reason (the
// deadline watch's expiries, deadline admission's refusals): formatted and allocated once instead
// of per request (gpubatch-expiry-rate: DESIGN.md "Deadlines"). Keep one per thread and call site
// (thread_local): the text names nothing of an executor. May throw (std::bad_alloc).
struct SharedError {
  std::exception_ptr error;
  RequestShape shape;
  const std::exception_ptr& get(const RequestShape& s, ErrorCode code, std::string_view why);
};
// The executor whose strand or completion thread this is (null on any other thread).
ExecutorCore* this_thread_core() noexcept;
// Makes this thread count as `core`'s (or none) for a while; returns what it was.
ExecutorCore* exchange_thread_core(ExecutorCore* core) noexcept;

// A job the strand (or a thread taking large results) spreads over the completion threads
// (ParallelRunner, ExecutorCore::run_parallel): parts are claimed under inflight_mutex_; `left`
// counts those not yet finished.
struct ParallelJob {
  const std::function<void(std::size_t)>* work = nullptr;
  std::size_t parts = 0;
  std::size_t next = 0;
  std::atomic<std::size_t> left{0};
};

// GPUBATCH_INLINE_SUBMIT is not "off" (ExecutorCore::post_if_idle).
bool inline_submit_enabled() noexcept;
// GPUBATCH_CALLER_AWAITS is not "off" (ExecutorCore::complete_own_batch).
bool caller_awaits_enabled() noexcept;
// GPUBATCH_FUTURE_INLINE is not "off" (ExecutorCore::lone_future_pass).
bool future_inline_enabled() noexcept;
bool handler_inline_enabled() noexcept;
bool express_enabled() noexcept;  // GPUBATCH_EXPRESS is not "off" (ExecutorCore::express_ready)
// GPUBATCH_EXPRESS_BESIDE is not "off": an express batch is awaited beside the regular waiters
// (ExecutorCore::completion_loop).
bool express_beside_enabled() noexcept;
// GPUBATCH_UPPER_LOOK is not "off": a long pull of level 0 looks for requests above it
// (ExecutorCore::pull_level).
bool upper_look_enabled() noexcept;
// GPUBATCH_WATCH_BEFORE_PUSH is not "off": a request's deadline goes to the watch before its push
// (ExecutorCore::queue_request); "off" hands it over after, as before (side-by-side runs).
bool watch_before_push_enabled() noexcept;
// GPUBATCH_IN_PLACE_LIGHT=off: HostBuffer bytes weigh in full against max_batch_bytes, as before
// the twenty-first session (weight_of, batch_former.hpp), for side-by-side runs.
bool in_place_light_enabled() noexcept;
// Whether an executor of `priority_levels` uses the packer (ExecutorCore::pack_elsewhere):
// GPUBATCH_PACKER=off none, =levels only one with levels, else every one.
bool packer_enabled(std::size_t priority_levels) noexcept;
std::size_t packer_min_requests() noexcept;  // GPUBATCH_PACKER_MIN, else 1024
// Express batches in flight at once: GPUBATCH_EXPRESS_DEPTH (1 .. 8), else 2 (ExecutorCore::express_busy).
std::uint32_t express_depth() noexcept;
std::chrono::microseconds express_hold() noexcept;  // GPUBATCH_EXPRESS_HOLD_US, else 50 us
// GPUBATCH_SATURATED_AFTER_US: full batches in a row for this long raise the count cap (10 ms).
std::chrono::microseconds saturated_after() noexcept;
// In-flight batches while saturated (the count cap raised), from max_inflight_batches' count.
std::size_t saturated_inflight(std::size_t max_inflight) noexcept;
std::size_t host_small_batch() noexcept;  // GPUBATCH_HOST_SMALL_BATCH (executor.cpp)
// GPUBATCH_EXPRESS_SPLIT: level-0 requests held beside which a regular batch leaves the levels
// above 0 to an express batch sent ahead of it (ExecutorCore::express_splits); "off" or 0 never.
std::size_t express_split() noexcept;
bool lanes_busy_batches_only() noexcept;  // GPUBATCH_LANES_BUSY=batches (ExecutorCore::lanes_busy)
bool lanes_for_host_buffers() noexcept;   // GPUBATCH_LANES_FOR_HOST_BUFFERS=on (ExecutorCore::lanes_for)
bool strand_spin_enabled() noexcept;  // GPUBATCH_STRAND_SPIN=on (ExecutorCore::linger)
std::chrono::steady_clock::duration wait_slice() noexcept;  // GPUBATCH_WAIT_SLICE_US
// GPUBATCH_POLL_ALL=on: the completion threads poll every batch for completion_spin (not only
// lone and full ones): a diagnostic that tells a batch whose end the driver's wait reported late
// from one the GPU finished late (the timeline counter is read directly).
bool poll_all_batches() noexcept;
// GPUBATCH_HOST_SPIN is not "off": on a device of host cores (lavapipe) the completion threads
// poll a lone caller's batch too (ExecutorCore::polls_batch).
bool host_spin_enabled() noexcept;

// Around the call of a caller that waits for its own result (BatchedGpuHandle::run): if its
// request finds the strand idle, that caller runs the strand itself (post_if_idle). A call that
// returns a future does so only on an idle executor (lone_future_pass); one that takes a handler
// never does: its initiation must not wait for a submit (it may run on an io_context's thread).
bool caller_waits() noexcept;  // inside a CallerWaitsScope on this thread
// The future this thread's last waiting call completed (lone_future_waits) has been destroyed, or
// there is none; and: note this thread's newest future as completed by its call
// (src/executor/future_state.cpp).
bool last_waited_future_released() noexcept;
void note_waited_future() noexcept;

class CallerWaitsScope {
 public:
  CallerWaitsScope() noexcept;
  ~CallerWaitsScope();
  CallerWaitsScope(const CallerWaitsScope&) = delete;
  CallerWaitsScope& operator=(const CallerWaitsScope&) = delete;

 private:
  bool previous_;
};

struct ShardGroup;  // src/executor/set_shard.hpp

class ExecutorCore : public std::enable_shared_from_this<ExecutorCore> {
 public:
  ExecutorCore(std::shared_ptr<BatchDevice> device, BatchConfig config);
  ~ExecutorCore();
  ExecutorCore(const ExecutorCore&) = delete;
  ExecutorCore& operator=(const ExecutorCore&) = delete;

  // Starts the strand and completion threads (they hold a reference to *this).
  void start();
  // Gives the calling thread (one of the executor's) config().thread_nice.
  void apply_thread_nice() noexcept;
  // ... and config().thread_slice (Linux 6.12+; logged once where refused or ignored).
  void apply_thread_slice() noexcept;
  // What every executor thread does first: apply_thread_nice(), apply_thread_slice() and a
  // timer slack of 1 ns.
  void prepare_thread() noexcept;

  void enqueue(Request&& request, const SubmitOptions& options, Completion&& completion) noexcept;
  // Stops accepting and starts the drain (or cancel) without waiting for it.
  void begin_shutdown(ShutdownMode mode);
  // begin_shutdown(), then waits until every accepted request has resolved and the threads have
  // ended (not on one of its own threads: there it returns at once).
  void shutdown(ShutdownMode mode);
  // This core's statistics, with those of the other shards when it leads a group (set_shard.hpp).
  Stats stats() const;
  // The shards of a device set that this core leads (set_shard.hpp), or null. Set once, before
  // the executor's first handle is given out.
  ShardGroup* shard_group() const noexcept { return shard_group_.get(); }
  void lead_shards(std::shared_ptr<ShardGroup> group) noexcept { shard_group_ = std::move(group); }
  const BatchConfig& config() const noexcept { return config_; }
  // How long a caller that awaits its own batch (BatchedGpuHandle::run) polls before it blocks:
  // config().completion_spin, or 0 on a device that runs on the host's cores (a caller that polls
  // there takes the core the device's threads need: lavapipe, lone --sync p50 46-60 us polling
  // against 41-42 us blocking, development machine, 2026-11-26).
  std::chrono::microseconds caller_spin() const noexcept {
    return device_->runs_on_host_cpu() ? std::chrono::microseconds(0) : completion_spin_;
  }
  void start_trace(const std::filesystem::path& path, std::uint32_t sample_every) {
    trace_.start(path, sample_every);
  }
  bool stop_trace() { return trace_.stop(); }
  // A pending request's cancellation slot was signalled (any thread): wake the strand.
  void on_request_cancelled() noexcept;
  // After a caller's enqueue (detail::enqueue; BatchedGpuHandle::run, or a future with
  // lone_future_waits): if its inline strand pass kept a lone batch for it (keep_for_caller),
  // wait for that batch (poll, then block) and complete it on this thread, with no completion
  // thread woken. No-op otherwise.
  void complete_own_batch() noexcept;
  // A completion handler threw on an executor thread (caught); returns the count so far.
  std::uint64_t note_handler_exception() noexcept {
    return handler_exceptions_.fetch_add(1, std::memory_order_relaxed) + 1;
  }

 private:
  // ---- producers (enqueue.cpp) ----
  std::optional<Clock::time_point> admit(const Request& request, const SubmitOptions& options,
                                         Completion& completion, std::size_t bytes, Clock::time_point now);
  bool take_by_lane(Request& request, Completion& completion, std::size_t priority, std::size_t bytes,
                    Clock::time_point deadline, Clock::time_point now) noexcept;
  void queue_request(Request&& request, Completion&& completion, std::size_t priority, std::size_t bytes,
                     Clock::time_point deadline, Clock::time_point now);
  PushResult push_by_policy(BlockingMpscQueue<Pending>& queue, Pending&& p, Clock::time_point deadline,
                            Clock::time_point now, std::uint64_t& pos, bool& deadline_first);
  bool note_pushed(bool urgent, bool upper, const RequestCancel* cancel, std::size_t bytes) noexcept;
  void refuse_unqueued(Pending& p, PushResult r, bool deadline_first) noexcept;
  void reject(Completion& completion, ErrorCode code, const std::string& message) noexcept;
  // Admission (deadline_admission): whether the backlog at `level` and above would outlast a
  // request's deadline at the strand's measured drain rate; and the refusal of such a request.
  bool backlog_outlasts(Clock::time_point deadline, Clock::time_point now, std::size_t level) noexcept;
  void shed(Completion& completion, const Request& request) noexcept;
  // A producer's offer to run the strand's pass itself: its queue and push position (a caller of
  // a std::future, or of a completion handler; none for everyone else), and whether it returns a
  // future (whose caller may then keep its lone batch: keep_for_caller; a handler's never does).
  struct InlineAsk {
    const BlockingMpscQueue<Pending>* queue = nullptr;
    std::uint64_t position = 0;
    bool future = false;
  };
  void post_if_idle(InlineAsk ask) noexcept;  // post run_strand() if the strand is idle
  void post_if_idle() noexcept { post_if_idle(InlineAsk{}); }
  bool lone_future_pass(const InlineAsk& ask) const noexcept;
  void wake_if_waiting_for_slot() noexcept;  // fence, then post_if_idle() if it waits for a slot

  // ---- strand ----
  void run_strand(bool on_io_thread);
  void trace_strand_run(TraceRecorder::StrandRun& run, bool on_io_thread);
  bool post_strand_run() noexcept;
  void kick();
  void process();
  void form_and_flush(bool cancels);
  void after_forming(bool urgent);
  bool finish_if_drained();
  bool pull(Clock::time_point now);
  PullEnd pull_level(std::size_t level, Clock::time_point now, std::uint64_t& n);
  void note_upper_left() noexcept;  // after a pass that spent its budget (strand.cpp)
  bool express_due(Clock::time_point now, std::uint64_t& n);
  static constexpr std::uint64_t kUpperLook = 64;  // pull_level: requests between looks up
  // Requests one pass of the strand takes at most, dropped ones too (pull_loop.hpp says why): a
  // batch at the count limit and kDropBudget more. Set by form_and_flush, spent by pull().
  static constexpr std::uint64_t kDropBudget = 1024;
  void accept_into_forming(Pending&& p, Clock::time_point now);
  BatchFormer<Pending>::Decision decide(Clock::time_point now) const;
  void apply_latency_target(Clock::time_point now);
  void note_taken(std::size_t n, Clock::time_point now) noexcept;
  struct QueueCounts {
    std::uint64_t positions = 0, depth = 0;
  };
  QueueCounts queue_counts() noexcept;
  void note_arrivals(Clock::time_point now, QueueCounts queues);
  // express: an express batch (take_upper); level0_only: a regular batch of level 0 alone.
  void flush(FlushReason reason, Clock::time_point now, bool express = false, bool level0_only = false);
  void expire_forming(Clock::time_point now);
  void scan_queue_deadlines(Clock::time_point now, bool from_head);
  void scan_level_deadlines(std::size_t level, Clock::time_point now, bool from_head);
  Clock::time_point next_deadline() const noexcept;
  // Expiry sweeps (forming batch and queue) run at most this often, so that many requests with
  // staggered deadlines cost one pass per interval, not one pass per request.
  static constexpr Clock::duration kSweepInterval = std::chrono::microseconds(200);
  // Counts p in `counter` and resolves it with the error; false (nothing done) when the deadline
  // watch resolved it first.
  bool fail_pending(Pending& p, ErrorCode code, const std::string& why,
                    std::atomic<std::uint64_t>& counter) noexcept;
  void on_deadline(ExpiryCell& cell) noexcept;  // the deadline watch's thread
  bool leave_to_watch(Pending& p) noexcept;       // an expired request the watch will fail
  std::string strand_expiry_text(const Pending& p, const char* where) const;  // when it will not
  void spread_expiry(std::size_t n, const std::function<void(std::size_t)>& each);
  void start_expiry_thread() noexcept;  // the watch's thread and its helpers, first thing
  void watch_deadline(std::shared_ptr<ExpiryCell> cell) noexcept;
  // Requests whose cancellation slot was signalled leave the strand (src/executor/cancel.cpp).
  bool drop_cancelled(Pending& p) noexcept;
  void sweep_cancelled();
  // Takes the batch's requests out of cancellation's and the deadline watch's reach, drops those
  // already taken, and lists the rest (Batch::requests, Batch::bytes) in the same pass.
  void claim_or_drop(Batch& b);
  void cancel_everything();
  void schedule_timer(Clock::time_point now);
  // In-flight slots are counted in halves: a batch of large requests (at least kLargeRequest
  // bytes each on average) takes one half, any other both. Large requests pipeline (upload,
  // compute and download of different batches overlap), and more of them in flight is what
  // carries them: on the H200, 16 threads of 65,536-float relu, 8 MiB batches moved 8.7 GB/s of
  // input with 2 in flight and 13.9 GB/s with 4; 1,048,576 floats 6.1 and 9.6 GB/s
  // (bench/results/session-h200-2026-11-23-s3.jsonl). Batches of small requests keep
  // max_inflight_batches: a deeper queue on the device only makes each request wait behind more
  // of them (with 8 MiB batches of 256-float requests at half a slot, a high-priority request
  // waited p99 17.7 ms at saturation; sched-h200-2026-11-23-s3c).
  // Not on a device of host cores (large_half_slot_ false): there nothing overlaps (the "device"
  // runs its batches one after another on the cores that copy them), and four 8 MiB batches in
  // flight only spread the copies of each over more memory than the cache holds: on the 2-core
  // machine, 2 threads x 8 outstanding of 1,048,576-float relu (BENCHMARKS.md, thirty-fifth
  // session). GPUBATCH_HOST_LARGE_SLOT=half keeps the half slot there, for side-by-side runs.
  static constexpr std::size_t kLargeRequest = std::size_t{256} << 10;
  std::uint32_t slot_halves(std::size_t batch_bytes, std::size_t requests) const noexcept {
    return large_half_slot_ && requests > 0 && batch_bytes / requests >= kLargeRequest ? 1 : 2;
  }
  bool slot_free() const noexcept {
    std::size_t limit = inflight_limit_.load(std::memory_order_relaxed);
    if (small_batch_forming_.load(std::memory_order_relaxed)) limit = std::min(limit, host_small_inflight_);
    return inflight_halves_.load(std::memory_order_seq_cst) < 2 * limit;
  }
  // The strand notes whether the batch it forms is small for a device of host cores (below).
  void note_forming_size() noexcept {
    if (host_small_inflight_ != 0)
      small_batch_forming_.store(former_.size() < host_small_batch_ && last_taken_ >= kHostStream,
                                 std::memory_order_relaxed);
  }
  // Priorities (DESIGN.md "Priorities"): requests of levels above 0 go out at once in an express
  // batch of their own, in one in-flight slot kept for such batches beside max_inflight_batches.
  // Behind a saturated device a high-priority request otherwise waited for the slots' batches
  // and then rode in a full batch of low-priority ones (packed, run and resolved with it): on the
  // H200 at saturation its p99 was 9-19 ms against 0.3 ms idle (BENCHMARKS.md, 2026-11-23).
  // Level 0 keeps every other slot, so its wait stays bounded as before (aging, take()).
  // Only when it helps: with a regular slot free and few level-0 requests held, the next regular
  // batch (higher levels first) is as quick, and one batch costs less than two (with the express
  // batch always taken, the idle 10 % mix on the H100 had p99 295-303 us against 237-265 us).
  static constexpr std::size_t kExpressBeside = 64;  // level-0 requests held that make it pay
  // Every express slot is taken. Two by default: the next express batch goes while one is on the
  // device instead of waiting for its round trip (DESIGN.md "Priorities").
  bool express_busy() const noexcept {
    return express_inflight_.load(std::memory_order_seq_cst) >= express_depth_;
  }
  // Even where it helps, the requests above level 0 wait express_hold_ (50 us) first, and go at
  // the head of the next regular batch if that comes sooner: an express batch for every arrival
  // took the device's queue from level 0. On the H200, 16 threads with 10 % at level 1,
  // interleaved against no hold: level 0's p99 0.26-0.48 ms against 3.2-17.7 at 500,000/s,
  // 0.49-0.51 ms (9.1 in a round with host stalls) against 4.7-9.4 at 1,000,000/s (one level:
  // 0.49), the high level's p99 0.25-0.32 against 0.68-0.84 and 0.37-1.9 against 1.2-2.8 ms, with
  // 0.2-4 % of the express batches; at 3 M/s the high level's p99 5.3 and 10.2 ms against 4.4 and
  // 6.4 (BENCHMARKS.md, 2026-11-29, call 9).
  // The hold stays beside a crowd too, where express_splits() means no regular batch carries
  // them: without it there (the twentieth session of 2026-11-29, call 4, interleaved, 3 M/s) the
  // express batches rose from 9,100-10,500 to 13,000-13,500 a run, their formation p50 fell from
  // 405 to 279 us, but the high level's p99 rose from 4.3-5.4 to 5.1-12.7 ms and level 0's from
  // 19-42 to 64-86 ms.
  // 50 us since the twenty-third session (100 before): with latency_batch_size and this
  // session's generator, at 3 M/s the high level's p99 526 · 540 · 561 · 965 · 1,149 · 601 us
  // against 1,580 · 528 · 477 · 1,403 · 1,617 · 705 (calls 4-5, interleaved; idle 234-357), at
  // 1 M/s 356-905 against 367-565, at 500,000/s 322-394 against 229-327 (level 0 0.37-0.46 ms
  // against 0.23-0.44).
  bool express_ready(Clock::time_point now) const noexcept { return express_hold_ends() <= now; }
  // When an express batch is due (the strand's timer wakes it then): its hold's end, where one
  // pays and the express slot is free; else time_point::max().
  Clock::time_point express_hold_ends() const noexcept {
    if (!express_slot_for_upper()) return Clock::time_point::max();
    if (slot_free() && level0_held() < kExpressBeside) return Clock::time_point::max();
    return former_.oldest_upper() + express_hold_;
  }
  // Requests above level 0 are held and an express slot is free for them.
  bool express_slot_for_upper() const noexcept {
    return express_on_ && level_count() > 1 && !express_busy() && former_.upper_size() > 0;
  }
  std::size_t level0_held() const noexcept { return former_.size() - former_.upper_size(); }
  // A regular batch about to go beside a large crowd (express_split_ level-0 requests, 1,024 by
  // default) sends the levels above 0 ahead of it in an express batch, before the hold ends: at
  // its head they would wait for the whole batch's pack (thousands of requests: on the H200 at
  // 3 M/s offered, 4,077 requests a batch at p50, its submit p50 495 us), its run and its
  // completion. Such batches come a few hundred times a second, so the express batches they
  // bring do not take the queue from level 0 as one per arrival did.
  bool express_splits() const noexcept {
    return express_split_ != 0 && express_slot_for_upper() && level0_held() >= express_split_;
  }
  // A regular batch leaves the levels above 0 to the express batch in flight when it would carry
  // them behind a crowd (kExpressBeside level-0 requests or more): such a batch's pack, run and
  // chunked completion took longer than the express batch's round trip (H100, 16 threads at 3 M/s
  // with 10 % at level 1, trace: regular submit p50 79 us p90 466 us, device 314 us, completion
  // 537 us; express submit to resolved p50 369 us). With few level-0 requests held the regular
  // batch is as quick, and they ride in it as before.
  bool upper_waits_for_express() const noexcept {
    if (!express_on_ || level_count() < 2 || !express_busy()) return false;
    return level0_held() >= kExpressBeside;
  }
  // The strand's state its last look needs (run_strand), read while it still holds the strand.
  struct StrandLook {
    bool finished, wants_slot, closing_seen, cancel_seen;
    std::uint64_t wake;
    Clock::time_point timer_at;  // the strand's timer, if armed (else max)
    bool lone;                   // the last kLoneStreak flushes had at most kLoneBatch requests each
    bool wants_express;          // requests above level 0 wait for the express slot
  };
  // Polling (completion threads for a batch, the strand for the next arrival) pays only for a
  // lone caller: a batch of many requests shares one wake-up, and under load the polling threads
  // take cores from the callers. On the H200, 16 threads of 256-float relu in open loop at
  // 360,000/s: p99 63.7 ms with both polling, 1.3 ms with only the completion threads polling,
  // 0.45 ms with neither (bench/results/session-h200-2026-11-23-s3b.jsonl).
  static constexpr std::size_t kLoneBatch = 2;
  // A future's caller submits inline (lone_future_pass) only a request up to this size (input
  // and output): the direct line. It was 64 KiB, and a lone caller of 16,384-float relu waited
  // 59-61 us at p50 for the io thread's and a completion thread's wake-ups where Device::run took
  // 26 us (262,144 floats: 305-354 against 219-239; H100, BENCHMARKS.md third session of
  // 2026-11-27). The caller's pass spreads its copies over the helpers as the strand's thread does.
  static constexpr std::size_t kLoneFutureBytes = std::size_t{4} << 20;
  // A handler's call runs the pass only on an executor that finished no batch for this long: a
  // sparse caller (on the H100 its call-to-submit went from 27-58 us to 9-19 us at 500-2,000
  // requests/s), not an open loop whose batches keep finishing (at 250,000/s, 16 senders, the
  // pass on every idle moment had p99 7.1 · 26.8 · 2.7 · 6.4 ms against 2.9 · 8.5 · 3.3 · 2.4
  // without it on a noisy machine: a sender thread holding the strand competes for the cores;
  // BENCHMARKS.md third session of 2026-11-27).
  static constexpr std::chrono::microseconds kHandlerPassGap{200};
  // Completion threads poll a lone caller's batch, and a batch at least half of max_batch_size:
  // the former was full, the device is the bottleneck, and a wake-up's delay leaves it idle
  // (with only lone batches polled, 16 threads of 256-float relu on the H200 ran 7 % slower).
  bool polls_batch(std::size_t n) const noexcept {
    // A device of host cores (lavapipe) gets no poll of a full batch: the poll would take a core
    // its own threads need while callers keep it busy. A lone caller sleeps in its future, so
    // its batch's poll takes a core nobody wants (and yields after 5 us).
    return poll_all_ || n <= kLoneBatch ||
           (!device_->runs_on_host_cpu() && 2 * n >= count_limit_.load(std::memory_order_relaxed));
  }
  static constexpr std::uint32_t kLoneStreak = 8;
  void linger(const StrandLook& look) noexcept;
  bool strand_has_work(const StrandLook& look) const noexcept;
  std::uint64_t wake_position() const noexcept;
  static constexpr std::uint64_t kNever = ~std::uint64_t{0};

  // ---- helpers: completion threads run parts of the strand's device work and of large results ----
  class HelperRunner final : public ParallelRunner {
   public:
    explicit HelperRunner(ExecutorCore& core) : core_(core) {}
    std::size_t width() const override { return core_.config_.completion_threads + 1; }
    void run(std::size_t parts, const std::function<void(std::size_t)>& work) override {
      core_.run_parallel(parts, work);
    }

   private:
    ExecutorCore& core_;
  };
  void run_parallel(std::size_t parts, const std::function<void(std::size_t)>& work);

  // ---- completion ----
  void completion_loop(std::size_t index);
  void help_parallel_job(std::unique_lock<std::mutex>& lock);
  void complete_ready_chunk(std::unique_lock<std::mutex>& lock, std::size_t index);
  void await_front_batch(std::unique_lock<std::mutex>& lock, std::size_t index, bool beside);
  // Flush's last step: the batch goes to the completion threads (woken), or, in a synchronous
  // caller's inline pass, a lone batch stays with that caller (complete_own_batch).
  void hand_to_completion(std::unique_ptr<Batch> batch);
  bool keep_for_caller(const Batch& batch) const noexcept;
  // complete_own_batch()'s stats: a few slots after the completion threads' own, one per caller
  // completing a batch at a time (claimed by exchange; none free: the batch is handed over).
  static constexpr std::size_t kCallerSlots = 4;
  bool claim_caller_slot(std::size_t& index) noexcept;
  void release_caller_slot(std::size_t index) noexcept;
  // The executor whose strand this thread runs in an inline pass (post_if_idle), and the batch
  // that pass kept for its caller (owned; taken by complete_own_batch right after the call).
  static thread_local ExecutorCore* inline_pass_;
  static thread_local Batch* own_batch_;
  // That pass was a std::future caller's (lone_future_pass), not a synchronous caller's: it keeps
  // its lone batch only with config().lone_future_waits.
  static thread_local bool future_pass_;
  static thread_local bool own_future_;  // own_batch_ was kept for a future's caller
  // A future's caller polls `inflight` for completion_spin (never past the watchdog): whether it
  // finished (then noted as this thread's waited future: note_waited_future).
  bool future_caller_polls(InFlightBatch& inflight, Clock::time_point submitted,
                           Clock::time_point* finished_at = nullptr) noexcept;
  // Waits until the device has finished `batch` (or it failed) and cuts it into chunks.
  // Polls for `spin` (0: not at all), then blocks, up to the watchdog's limit.
  void await_batch(Batch& batch, std::size_t thread_index, std::chrono::microseconds spin,
                   Clock::time_point finished_at = {});
  void complete_chunk(Batch& batch, std::uint32_t chunk, std::size_t thread_index);
  void take_chunk_results(Batch& batch, std::size_t first, std::size_t last, std::vector<Result>& results,
                          std::vector<std::pair<std::size_t, std::exception_ptr>>& errors);
  void resolve_chunk(Batch& batch, std::size_t first, std::size_t last, std::vector<Result>& results,
                     std::vector<std::pair<std::size_t, std::exception_ptr>>& errors);
  void record_trace(const Batch& batch);  // src/executor/trace.cpp's recorder, when it is on
  void trace_expiry_round(const DeadlineWatch::Round& round);  // the deadline watch's, when it is on
  // A chunk is at least this many requests: below it, handing work to another thread costs more
  // than it saves (and a lone request is resolved by the thread that waited for it).
  static constexpr std::size_t kMinChunk = 64;
  std::unique_ptr<Batch> take_batch_from_pool();
  void return_batch_to_pool(std::unique_ptr<Batch> batch);
  // After a batch failed with device_lost: device_->recover() (serialised; never throws).
  void recover_if_device_lost(const std::exception_ptr& error) noexcept;

  // ---- resident mode (src/executor/resident_lane.cpp; DESIGN.md "Resident mode") ----
  struct ResidentEntry {
    Request request;
    Completion completion;
    Clock::time_point enqueued{};
    Clock::time_point accepted{};  // the ring took its ticket: the backstop counts from here
    std::unique_ptr<InFlightBatch> inflight;
  };
  void start_resident();
  // Producer: hands the request to the device's resident kernel when it fits and nothing else
  // waits; true when taken (request and completion moved), false: batch it as usual.
  bool try_resident(Request& request, Completion& completion, Clock::time_point now) noexcept;
  void resident_loop();
  void await_resident(ResidentEntry& entry) noexcept;
  void wake_resident_locked();  // under shutdown_mutex_ via stop_threads_locked()

  // ---- the direct lane (src/executor/direct_lane.cpp; DESIGN.md "Large requests") ----
  // Producer: a std::future's (or handle.run()'s) request of at least BatchConfig::direct_bytes,
  // made while the executor is busy, is submitted alone by the caller's thread, awaited and resolved there;
  // true when done so (the completion resolved), false: batch it as usual.
  bool try_direct(Request& request, Completion& completion, Clock::time_point now) noexcept;
  // Busy, for the direct and bulk lanes: a batch on the device or requests waiting for the strand;
  // and, for a request from vectors, a large request running on a lane or in chunks (its callers
  // would otherwise queue behind the strand, which copies their inputs alone). A request from
  // HostBuffers costs the strand no copy and keeps the first rule: under the second, 16 callers of
  // 1,048,576-float relu from HostBuffers moved 22.6-26.4 GB/s where the first moved 25.3-26.9
  // (H100, sixth session of 2026-11-27, calls 4 and 5).
  bool batches_busy() const noexcept {
    return inflight_slots_.load(std::memory_order_relaxed) != 0 || queue_.pushed_approx() != queue_.popped_approx();
  }
  bool lanes_busy(const Request& request) const noexcept {
    if (batches_busy()) return true;
    return !lanes_busy_batches_only_ && !uses_host_buffers(request) &&
           (large_running_.load(std::memory_order_relaxed) != 0 || splitting_.load(std::memory_order_relaxed));
  }
  // The lanes take a large request's CPU copies off the strand. One whose data all lives in
  // HostBuffers has none: the lanes buy it nothing and hold its caller (the direct lane returns
  // only once it is done), where a batched future lets its caller go on. It is batched unless
  // GPUBATCH_LANES_FOR_HOST_BUFFERS = on (16 callers of 1,048,576-float relu from HostBuffers on
  // two H100s: 34.5-36.6 GB/s batched against 30.3-33.8 on the lane; one H100 27.7-28.2 against
  // 26.9-28.6; BENCHMARKS.md, eighth session of 2026-11-27).
  bool lanes_for(const Request& r) const noexcept {
    return lanes_for_host_buffers_ || !(r.host_a && r.host_result && r.b.empty() && r.inputs.empty());
  }
  const bool lanes_for_host_buffers_ = lanes_for_host_buffers();
  // GPUBATCH_LANES_BUSY=batches: only batches count, for every request, and requests go in chunks
  // beside lane requests (the rule before; side-by-side runs).
  const bool lanes_busy_batches_only_ = lanes_busy_batches_only();
  // The same for a request the device takes in chunks that pipeline (BatchDevice::submit_split,
  // from split_line_ bytes): a lone large request, on an idle executor (no batch in flight) and
  // no other chunked request running (splitting_).
  bool try_split(Request& request, Completion& completion, Clock::time_point now) noexcept;
  // ---- the bulk lane (src/executor/bulk_lane.cpp; DESIGN.md "Large requests") ----
  // A completion handler's request of at least BatchConfig::direct_bytes, made while the
  // executor is busy, goes to the bulk lane's threads (started at its first such request), which
  // submit it alone, await it and resolve it beside the batches; true when taken (request and
  // completion moved), false: batch it as usual.
  bool try_bulk(Request& request, Completion& completion, Clock::time_point now) noexcept;
  struct BulkJob {
    Request request;
    Completion completion;
    Clock::time_point enqueued{};
  };
  void bulk_loop();
  void serve_bulk(BulkJob& job) noexcept;
  void stop_bulk_locked();  // under shutdown_mutex_ via stop_threads_locked()
  // The packer (src/executor/packer.cpp): a batch of many requests is laid out and submitted on a
  // thread of its own while the strand forms the next.
  void submit_batch(Batch& b);  // the device's submit, on whichever thread packs the batch
  bool pack_elsewhere(std::unique_ptr<Batch>& batch);  // true: the packer took it
  void packer_loop();
  void stop_packer_locked();  // under shutdown_mutex_ via stop_threads_locked()
  struct LaneStats;
  // A lane's submission (resident_lane.cpp, direct_lane.cpp). The request counts as unresolved
  // before the look at resident_closed_ (both seq_cst): either shutdown sees it and waits for it,
  // or this producer sees the shutdown and batches it (where the closed queue refuses it). Null,
  // with nothing counted, when shutdown began or `submit` gave no batch or threw: the batched
  // path then meets the device's trouble (out of memory, a lost device) and handles it.
  template <typename Submit>
  std::unique_ptr<InFlightBatch> lane_submit(Submit&& submit) noexcept {
    unresolved_batches_.fetch_add(1, std::memory_order_seq_cst);
    std::unique_ptr<InFlightBatch> inflight;
    if (!resident_closed_.load(std::memory_order_seq_cst)) {
      try {
        inflight = submit();
      } catch (...) {
        inflight.reset();
      }
    }
    if (!inflight) {
      unresolved_batches_.fetch_sub(1, std::memory_order_seq_cst);
      maybe_done();
    }
    return inflight;
  }
  // Waits for a lane's request (`what` names the lane in errors), then counts and resolves it;
  // device_lost when it is not done `limit` after `submitted` (its submission, not its arrival).
  void await_lane(Request& request, Completion& completion, Clock::time_point enqueued,
                  std::unique_ptr<InFlightBatch>& inflight, Clock::time_point submitted, Clock::duration limit,
                  const char* what, LaneStats& stats) noexcept;
  void finish_lane(Request& request, Completion& completion, Clock::time_point enqueued, Result& result,
                   std::exception_ptr error, bool cancelled, const char* what, LaneStats& stats) noexcept;

  // ---- shutdown ----
  void maybe_done();
  void stop_threads_locked();

 public:
  bool on_internal_thread() const noexcept;  // the calling thread is one of this core's

 private:

  const BatchConfig config_;
  const std::shared_ptr<BatchDevice> device_;
  const std::size_t max_request_bytes_;
  // A request larger than its share of max_batch_bytes wakes the strand (the batch may be full
  // by bytes long before it is full by count).
  const std::size_t big_request_bytes_;
  // max_inflight_batches per device behind device_ (a device set: per member), and the watchdog's
  // limit for one batch (batch_timeout, times the periods a device set asks for its re-run).
  const std::size_t max_inflight_;
  // Batches in flight now: max_inflight_, or saturated_inflight_ while the count cap is raised
  // (note_taken). Saturated, a closed loop's latency is its callers' depth over the rate, so only
  // the rate counts, and with two batches in flight each one's pack, round trip and completion
  // ran one after another: the H200's crowd (16 callers of 256-float relu, 1,024 or 2,048 each
  // outstanding) carried 5.1-5.7 M requests/s with 2 and 5.6-6.7 with 4 (BENCHMARKS.md,
  // twenty-sixth session). Unsaturated, more in flight would only make batches smaller. Not with
  // priority levels: an express batch runs behind the regular batches in flight, and at 3 M/s the
  // high level's p99 was 1.1-1.5 ms with four against 0.7-1.4 with two; nor with a latency target.
  const std::size_t saturated_inflight_;
  std::atomic<std::size_t> inflight_limit_;
  // On a device of host cores (lavapipe), a regular batch of fewer than host_small_batch_ requests
  // waits while host_small_inflight_ batches are in flight (one per device behind device_), and
  // grows meanwhile: the device runs its batches one after another on the same cores as the
  // executor, so a second small batch overlaps nothing and pays a batch's fixed cost (about
  // 200 us of CPU on lavapipe) for half the requests. On the 2-core machine, 2 threads x 64
  // outstanding of 256-float relu: 285-291 k requests/s against 223-228 k with the rule off (ahead
  // in 8 of 9 interleaved rounds). A crowd's batches of ~800 keep both slots: one batch in flight
  // for every load served it 2-15 % less (BENCHMARKS.md, twenty-seventh session).
  // GPUBATCH_HOST_SMALL_BATCH=N|off (0 when off).
  const std::size_t host_small_batch_;
  const std::size_t host_small_inflight_;
  const bool large_half_slot_;  // slot_halves(): a large batch takes half a slot (not on host cores)
  // On a device of host cores, a completion thread that frees the slot the idle strand waits for
  // runs the strand's pass itself (wake_if_waiting_for_slot) instead of posting it to the strand's
  // thread, which then had to be woken through its epoll wait once a batch: there the device is
  // these cores, and each wake-up is CPU it lacks (a perf profile of 2 threads x 64 outstanding
  // of 256-float relu on the 2-core machine: 51 % of the samples in the kernel, mostly switches
  // and futex wakes). Medians 4-12 % higher on four loads there (BENCHMARKS.md, thirty-fifth
  // session). GPUs keep the post: there a completion thread's next wait is the one that matters.
  // GPUBATCH_HOST_DONE_STRAND=off posts on host cores too.
  const bool done_runs_strand_;
  std::atomic<bool> small_batch_forming_{false};  // the strand's former holds fewer than that
  // Only behind a batch of at least kHostStream requests: callers that each wait for their one
  // request (two `--sync` threads) cannot grow a batch by waiting, and served 13-34 % less.
  static constexpr std::size_t kHostStream = 16;
  std::size_t last_taken_ = 0;  // the strand's last regular batch, in requests
  const Clock::duration watchdog_;
  // Completion threads that may wait for the device at once: one per device behind device_, so
  // that a batch a set's member has finished is not held behind one still running on another.
  const std::size_t await_width_;
  const std::chrono::microseconds completion_spin_;

  // One queue per priority level (each with its own capacity): queue_ is level 0, the default
  // and the only one unless priority_levels > 1; upper_queues_[i] is level i + 1. The wake-up
  // protocol below is level 0's; a push into a higher level always wakes an idle strand.
  BlockingMpscQueue<Pending> queue_;
  std::vector<std::unique_ptr<BlockingMpscQueue<Pending>>> upper_queues_;
  BlockingMpscQueue<Pending>& level_queue(std::size_t level) noexcept {
    return level == 0 ? queue_ : *upper_queues_[level - 1];
  }
  std::size_t level_count() const noexcept { return upper_queues_.size() + 1; }
  std::uint64_t pushed_all_levels() const noexcept;
  // What this core adds to its executor's statistics (executor_stats.cpp): summed over the shards
  // of a device set, then made into one Stats.
  struct StatsSums;
  void add_stats(StatsSums& x) const;
  void add_class_stats(StatsSums& x) const;
  void fill_counts(const StatsSums& x, Stats& s) const;
  void fill_latencies(const StatsSums& x, Stats& s) const;
  void fill_device_model(Stats& s) const;
  std::shared_ptr<ShardGroup> shard_group_;  // see shard_group()
  // The wake-up protocol. Producers read these (they change only when the strand goes idle):
  // a push at a position >= wake_pos_ (the strand needs it: first request of a batch, the batch
  // would be full, the queue is half full) or of a request with a deadline wakes an idle strand.
  alignas(kCacheLine) std::atomic<bool> strand_awake_{false};
  std::atomic<std::uint64_t> wake_pos_{0};
  alignas(kCacheLine) std::atomic<bool> urgent_{false};  // a request with a deadline was pushed
  std::atomic<bool> cancels_{false};  // a pending request's cancellation slot was signalled
  std::atomic<bool> upper_pushed_{false};  // a request was pushed into a level above 0
  // The idle strand waits for a free in-flight slot (its batch is due): only then does a
  // completion that frees a slot wake it (published like wake_pos_, read after the slot's fence).
  std::atomic<bool> wants_slot_{false};  // a freed slot (or express slot) has work: wake the strand
  std::atomic<std::uint32_t> express_inflight_{0};  // express batches in flight (express_busy)
  const std::uint32_t express_depth_ = express_depth();  // GPUBATCH_EXPRESS_DEPTH, else 2
  const Clock::duration express_hold_ = express_hold();  // GPUBATCH_EXPRESS_HOLD_US, else 50 us
  const std::size_t express_split_ = express_split();    // GPUBATCH_EXPRESS_SPLIT, else 1024
  const bool express_on_ = express_enabled();  // GPUBATCH_EXPRESS is not "off"
  const bool upper_look_ = upper_look_enabled();  // GPUBATCH_UPPER_LOOK is not "off"
  const bool watch_before_push_ = watch_before_push_enabled();  // GPUBATCH_WATCH_BEFORE_PUSH
  // HostBuffer bytes weigh an eighth in batch formation (weight_of): on one device only. A device
  // set spreads a lone large HostBuffer request over its idle members (device_set_batch.cpp), and
  // places a batch of several whole on one member: on two H200s, 16 callers of 1,048,576 floats
  // saw p99 64-70 ms with the lighter weight (batches of 1.2 on average) against 19-25 in full
  // (BENCHMARKS.md, twenty-first session, calls 10-11). GPUBATCH_IN_PLACE_LIGHT=off: in full everywhere.
  const bool in_place_light_ = in_place_light_enabled() && device_->inflight_multiplier() == 1;
  // Express batches awaited beside the regular waiters (completion_loop): not on a device of host
  // cores, where the poll would take a core the device's own threads need.
  const bool express_beside_ = express_beside_enabled() && !device_->runs_on_host_cpu();
  // How long such a poll lasts before it turns into a blocking wait (the express batch is small:
  // on the H200 its GPU time was 10-50 us under a saturating crowd).
  static constexpr std::chrono::microseconds kExpressPoll{2000};
  std::atomic<std::uint64_t> express_batches_{0};
  // Events of the io thread, noted for whoever holds the strand: the timer fired; shutdown closed
  // the queues (read after they were closed).
  std::atomic<bool> timer_fired_{false};
  std::atomic<bool> closing_requested_{false};
  // A producer that finds the strand idle runs it inline (GPUBATCH_INLINE_SUBMIT=off: it posts).
  const bool inline_runs_ = inline_submit_enabled();
  // A synchronous caller completes the lone batch its inline pass submitted
  // (GPUBATCH_CALLER_AWAITS=off: a completion thread does).
  const bool caller_awaits_ = caller_awaits_enabled();
  const bool future_inline_ = future_inline_enabled();
  const bool handler_inline_ = handler_inline_enabled();  // GPUBATCH_HANDLER_INLINE is not "off"
  std::atomic<bool> nice_refused_{false};   // thread_nice was refused (logged once)
  std::atomic<bool> slice_refused_{false};  // thread_slice was refused or ignored (logged once)
  const bool strand_spin_ = strand_spin_enabled();  // GPUBATCH_STRAND_SPIN=on (linger)
  // A completion thread's blocking wait returns after this long to look again (and at the
  // watchdog): GPUBATCH_WAIT_SLICE_US, default 100 ms.
  const Clock::duration wait_slice_ = wait_slice();
  const bool poll_all_ = poll_all_batches();

  // Strand state (touched only by the holder of strand_awake_: see run_strand()).
  boost::asio::io_context io_{1};
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::steady_timer timer_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  BatchFormer<Pending> former_;  // the requests pulled from the queues, not yet flushed
  CountCap<Clock> count_cap_;    // the former's count limit (latency_batch_size until saturated)
  // The earliest deadline among requests still in the queues (seen when the former was full).
  Clock::time_point queue_deadline_ = Clock::time_point::max();
  std::vector<std::uint64_t> scanned_upto_;  // per level: positions below were scanned
  const bool deadline_watch_on_;              // GPUBATCH_DEADLINE_WATCH is not "off"
  const bool strand_leaves_expiry_;           // GPUBATCH_STRAND_EXPIRES is not "on"
  const std::int64_t watch_lag_limit_ns_;     // GPUBATCH_WATCH_LAG_US (1 ms): leave_to_watch()
  const bool expiry_spread_;                  // GPUBATCH_EXPIRY_SPREAD is not "off"
  Clock::time_point last_sweep_{};
  Clock::time_point timer_target_ = Clock::time_point::max();
  bool blocked_on_slot_ = false;
  // Requests this pass may still pull (form_and_flush); 0: spent, the queues may still hold some.
  std::uint64_t pass_budget_ = 0;
  bool blocked_on_express_ = false;  // above level 0 waiting, the express slot taken
  std::uint32_t lone_streak_ = 0;  // flushes in a row of at most kLoneBatch requests
  bool closing_seen_ = false;
  bool cancel_seen_ = false;
  bool strand_finished_ = false;
  std::uint64_t next_batch_id_ = 1;

  // In flight.
  alignas(kCacheLine) std::atomic<std::size_t> inflight_slots_{0};  // submitted, not yet waited
  std::atomic<std::size_t> inflight_halves_{0};  // their slot halves (slot_halves())
  std::atomic<std::size_t> unresolved_batches_{0};                  // flushed, not yet resolved
  std::mutex inflight_mutex_;
  std::condition_variable inflight_cv_;
  std::deque<std::unique_ptr<Batch>> inflight_queue_;  // submitted, not yet waited for
  std::deque<Batch*> ready_;  // finished, with chunks not yet claimed (owned by their chunks)
  ParallelJob* parallel_job_ = nullptr;  // one owner's, while it has parts not yet claimed
  HelperRunner helpers_{*this};  // the strand's copies in, large results' copies out
  std::size_t awaiting_ = 0;  // completion threads waiting for the device (<= await_width_)
  // A completion thread polling an express batch beside them (express_beside_; at most one).
  bool express_awaiting_ = false;
  // The previous batch's completion (Clock ticks): a batch's service time starts at its
  // submission or there, whichever is later.
  std::atomic<Clock::rep> last_done_{0};
  CostModel cost_;
  // The latency target's view of the offered load (strand only): positions claimed in the queues
  // (every push, accepted or waiting) times the mean bytes of the requests the strand took, per
  // second, smoothed over windows of at least 1 ms. Offered, not taken: under a cap that serves
  // less than arrives, the taken rate would follow the cap down.
  std::uint64_t arrival_positions_ = 0;
  std::uint64_t taken_bytes_ = 0, taken_requests_ = 0;
  Clock::time_point arrival_window_{};
  double arriving_bytes_per_s_ = 0.0;
  std::uint64_t queued_before_ = 0;   // requests in the queues at the last window
  std::uint32_t growing_windows_ = 0;  // windows in a row in which the queues grew
  BacklogTrend backlog_trend_{2 * batch_time_budget(config_)};  // slow growth (backlog_trend.hpp)
  bool backlog_trend_on_ = true;  // GPUBATCH_BACKLOG_TREND=off: side-by-side runs (set at construction)
  bool target_age_lift_ = true;  // GPUBATCH_TARGET_AGE_LIFT=off: side-by-side runs (strand.cpp apply_latency_target)
  std::uint64_t trend_taken_ = 0;      // drain_taken_ at its last look
  // The former's count limit (count_cap_), for the completion threads' polls_batch() and stats.
  std::atomic<std::size_t> count_limit_{0};
  std::atomic<std::size_t> target_cap_{0};  // the cap the strand set last (0: none yet), for stats
  // Deadline admission: the rate at which the strand takes requests into batches while a backlog
  // waits (requests it drops as expired do not count: they cost it next to nothing, and counted
  // they made the rate twice as fast as the service under a load of expiring requests), fed at
  // the end of each pass; and what the forming batch held then at each level and above (ahead of
  // every queued request of that level: a higher level goes into the next batch before a lower one).
  DrainRate drain_;
  std::uint64_t drain_taken_ = 0;
  std::array<std::atomic<std::size_t>, BatchConfig::kMaxPriorityLevels> forming_from_{};
  bool stop_completion_ = false;
  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<Batch>> pool_;
  // One pooled batch beside the pool, taken and given back without the lock (a lone caller's
  // every batch; owned here, deleted by the destructor).
  std::atomic<Batch*> pool_hot_{nullptr};

  // Shutdown.
  std::mutex shutdown_mutex_;
  std::condition_variable shutdown_cv_;
  bool closing_ = false;             // queue closed
  std::atomic<bool> cancel_{false};  // shutdown(cancel) asked
  std::atomic<bool> strand_done_{false};
  bool done_ = false;     // every accepted request resolved
  bool stopped_ = false;  // threads told to stop
  std::mutex join_mutex_;
  std::thread resident_thread_;
  std::thread io_thread_;
  std::vector<std::thread> completion_threads_;

  // Statistics. Strand counters have one writer (the strand); completion counters are kept per
  // completion thread; producers touch only `rejected_` (on their failure path).
  struct alignas(kCacheLine) StrandStats {
    std::atomic<std::uint64_t> pulled{0};
    std::atomic<std::uint64_t> dispatched{0};  // requests put into batches
    std::atomic<std::uint64_t> expired{0};
    std::atomic<std::uint64_t> cancelled{0};
    std::atomic<std::uint64_t> batches{0};
    std::atomic<std::uint64_t> flushes[4]{};
    std::atomic<std::uint64_t> runs{0};
    std::atomic<std::uint64_t> timer_wakeups{0};
    std::atomic<std::uint64_t> polls{0};      // linger(): written by the io thread only
    std::atomic<std::uint64_t> poll_hits{0};
    std::atomic<std::uint64_t> done_runs{0};  // wake_if_waiting_for_slot on a completion thread
  } strand_stats_;
  // End-to-end latency by operation and by priority level (one writer each, like the others).
  struct ClassHistograms {
    explicit ClassHistograms(std::size_t levels)
        : by_op(new LatencyHistogram[kOpCount]), by_level(new LatencyHistogram[levels]) {}
    std::unique_ptr<LatencyHistogram[]> by_op;
    std::unique_ptr<LatencyHistogram[]> by_level;
    void record(const Pending& p, Clock::duration e2e) noexcept {
      by_op[static_cast<std::size_t>(p.request.op)].record(e2e);
      by_level[p.priority].record(e2e);
    }
  };
  struct alignas(kCacheLine) CompletionStats {
    explicit CompletionStats(std::size_t levels) : classes(levels) {}
    ClassHistograms classes;
    std::atomic<std::uint64_t> completed{0};
    std::atomic<std::uint64_t> failed{0};  // device errors
    LatencyHistogram queue_wait;
    LatencyHistogram submit_latency;
    LatencyHistogram device_time;
    LatencyHistogram end_to_end;
  };
  // One per completion thread (index < config_.completion_threads), then kCallerSlots for
  // synchronous callers completing their own batch (complete_own_batch).
  std::vector<std::unique_ptr<CompletionStats>> completion_stats_;
  std::atomic<bool> caller_slot_busy_[kCallerSlots] = {};
  std::atomic<std::uint64_t> caller_completions_{0};
  TraceRecorder trace_;
  // The watch's helpers for a round of many due requests (spread_expiry); declared before the
  // watch, so that the watch's thread has ended before they go.
  HelperPool expiry_helpers_;
  DeadlineWatch deadline_watch_;  // its thread runs on_deadline()
  std::atomic<std::uint64_t> watch_expired_{0};  // requests the deadline watch failed
  // Of those, requests whose callers were still waiting for room in the queue: they count as
  // rejected (never submitted), not as expired (refuse_unqueued).
  std::atomic<std::uint64_t> watch_expired_unqueued_{0};
  std::atomic<std::int64_t> watch_lag_ns_{0};    // how late the watch's latest expiry began
  alignas(kCacheLine) std::atomic<std::uint64_t> rejected_{0};
  std::atomic<std::uint64_t> shed_{0};  // of rejected_: refused by deadline admission
  std::atomic<std::uint64_t> handler_exceptions_{0};

  // Resident mode. resident_on_ is set by start() before any producer can see the executor.
  bool resident_on_ = false;
  // Large requests may take the direct lane: direct_bytes is not 0 (a device set too, unless
  // GPUBATCH_SET_LANES = off), and not a device of host cores unless GPUBATCH_HOST_DIRECT = on.
  // Set by the constructor.
  bool direct_lane_ = false;
  // Requests of at least this many bytes may go in chunks (BatchDevice::split_bytes; 0: none, and
  // none for a device set). Set by the constructor.
  std::size_t split_line_ = 0;
  std::atomic<bool> splitting_{false};  // a chunked request is running (one at a time)
  // Large requests on a lane (direct or bulk; chunked ones are splitting_): with one running, the
  // executor is busy for the lanes (lanes_busy) and no request goes in chunks (try_split).
  std::atomic<std::uint32_t> large_running_{0};
  // The bulk lane: on where the direct lane is, unless GPUBATCH_BULK_LANE = off. Set by the
  // constructor.
  bool bulk_lane_ = false;
  std::mutex bulk_mutex_;
  std::condition_variable bulk_cv_;
  std::deque<std::unique_ptr<BulkJob>> bulk_jobs_;  // guarded: accepted, not yet taken, FIFO
  std::size_t bulk_held_ = 0;                       // guarded: accepted, not yet resolved
  bool bulk_stop_ = false;                          // guarded
  std::vector<std::thread> bulk_threads_;           // guarded; joined by shutdown()
  // The packer (packer.cpp says why).
  const bool packer_on_ = packer_enabled(config_.priority_levels);
  const std::size_t packer_min_ = packer_min_requests();
  std::mutex packer_mutex_;
  std::condition_variable packer_cv_;
  std::deque<std::unique_ptr<Batch>> packer_queue_;  // guarded: flushed, not yet submitted, FIFO
  // Queued or being submitted by the packer; changed under packer_mutex_, read without it by
  // pack_elsewhere's first look (0 there: every batch the packer took has been submitted).
  std::atomic<std::size_t> packer_pending_{0};
  bool packer_stop_ = false;        // guarded
  std::thread packer_thread_;       // guarded: started with the first batch it takes
  std::atomic<std::uint64_t> packed_batches_{0};
  std::atomic<bool> resident_closed_{false};  // shutdown began: producers batch instead
  std::mutex resident_mutex_;
  std::condition_variable resident_cv_;
  std::deque<ResidentEntry> resident_entries_;  // guarded: accepted, in the ring, FIFO
  bool resident_sleeping_ = false;              // guarded: the lane thread waits on resident_cv_
  bool resident_stop_ = false;                  // guarded
  alignas(kCacheLine) std::atomic<std::size_t> resident_pending_{0};  // entries (for the spin)
  // A lane's requests never enter the queue: the resident kernel's, and the direct lane's.
  struct alignas(kCacheLine) LaneStats {  // written under `mutex`
    std::mutex mutex;
    ClassHistograms classes{1};  // lane requests are level 0
    std::atomic<std::uint64_t> accepted{0};  // producers
    std::atomic<std::uint64_t> completed{0};
    std::atomic<std::uint64_t> failed{0};  // device errors (watchdog, lost device)
    std::atomic<std::uint64_t> cancelled{0};
    LatencyHistogram end_to_end;
  };
  LaneStats resident_stats_;
  LaneStats direct_stats_;
  LaneStats split_stats_;  // the direct lane's requests that went in chunks
};

// Stats::devices: the device's own breakdown (a device set's members), else one entry for the
// lone device from the executor's counters (`dispatched`: requests put into batches).
std::vector<DeviceStats> device_stats_of(const BatchDevice& device, const Stats& stats,
                                         std::uint64_t dispatched);

// GPUBATCH_TRACE=file.json: trace this executor's batches into the file (written at shutdown).
// A path that cannot be created is logged and ignored (src/executor/executor_trace.cpp).
// GPUBATCH_TRACE: starts `core`'s trace (shard k > 0 of a set: shard_trace_path(file, k)).
void start_trace_from_environment(ExecutorCore& core, std::size_t shard = 0) noexcept;

}  // namespace gpubatch::detail

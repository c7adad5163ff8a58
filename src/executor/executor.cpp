// BatchExecutor: resolving requests, construction and threads, waking the strand, shutdown. The
// producers are in enqueue.cpp, the strand in strand.cpp, the completion threads in
// completion.cpp, the statistics in executor_stats.cpp; executor_core.hpp has the picture and
// DESIGN.md the contracts.
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include <boost/asio/post.hpp>
#include "log.hpp"

#include "executor/executor_core.hpp"
#include "executor/executor_internal.hpp"
#include "executor/set_shard.hpp"
#include "executor/thread_slice.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch {
namespace detail {

namespace {

thread_local ExecutorCore* tl_core = nullptr;
thread_local bool tl_completion_thread = false;  // one of an executor's completion threads

void name_thread(const char* name) noexcept { pthread_setname_np(pthread_self(), name); }

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

}  // namespace

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

ExecutorCore* this_thread_core() noexcept { return tl_core; }
ExecutorCore* exchange_thread_core(ExecutorCore* core) noexcept { return std::exchange(tl_core, core); }

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

RequestShape shape_of(const Request& r) noexcept {
  return {r.op, r.a.size(), r.states_a.size(), r.m, r.k, r.n};
}

std::string describe(const RequestShape& r) {
  std::string s(to_string(r.op));
  s += " request (";
  switch (r.op) {
    case Op::matmul:
      s += std::to_string(r.m) + "x" + std::to_string(r.k) + " times " + std::to_string(r.k) +
           "x" + std::to_string(r.n);
      break;
    case Op::gradients:
    case Op::interpolate:
      s += std::to_string(r.states / kLayersPerState) + " states";
      break;
    default:
      s += std::to_string(r.floats) + " floats";
      break;
  }
  s += ")";
  return s;
}

std::string describe(const Request& r) { return describe(shape_of(r)); }

const std::exception_ptr& SharedError::get(const RequestShape& s, ErrorCode code, std::string_view why) {
  if (!error || !(s == shape)) {
    error = make_error(code, describe(s) + std::string(why));
    shape = s;
  }
  return error;
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
// An A/B switch for side-by-side measurements: the environment variable `name` equals `value`.
bool env_is(const char* name, std::string_view value) noexcept {
  const char* v = std::getenv(name);
  return v && value == v;
}
// GPUBATCH_DEADLINE_WATCH=off: deadlines only by the strand's sweeps (the behaviour before the
// watch; for side-by-side measurements).
bool deadline_watch_enabled() { return !env_is("GPUBATCH_DEADLINE_WATCH", "off"); }
// GPUBATCH_STRAND_EXPIRES=on: the strand fails the expired requests it finds itself, also those
// the watch holds (the behaviour before leave_to_watch; for side-by-side measurements).
bool strand_leaves_expiry() { return !env_is("GPUBATCH_STRAND_EXPIRES", "on"); }
// GPUBATCH_EXPIRY_SPREAD=off: the deadline watch fails every due request on its own thread.
bool expiry_spread_enabled() { return !env_is("GPUBATCH_EXPIRY_SPREAD", "off"); }

// The cores this process may run on.
std::size_t usable_cores() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<std::size_t>(std::max(1, CPU_COUNT(&set)));
  return std::max(1u, std::thread::hardware_concurrency());
}

// On a device that runs on the host's cores (lavapipe), the completion threads are at most half
// those cores (at least one): the device's own threads run every shader there, and each extra
// completion thread woken per batch takes a core from them. On this 2-core machine, 2 threads x 64
// in flight of 256-float relu: 1 completion thread served 223-321 k requests/s against 185-278 k
// with the presets' 4, in 3 of 3 interleaved rounds, and 253-319 k against 230-246 k in 4 earlier
// pairs (docs/BENCHMARKS.md). GPUBATCH_HOST_THREAD_CAP=off keeps the configured count.
BatchConfig fitted_to_host(BatchConfig config, const BatchDevice* device) {
  if (device == nullptr || !device->runs_on_host_cpu() || env_is("GPUBATCH_HOST_THREAD_CAP", "off")) return config;
  const std::size_t cores = usable_cores(), cap = std::max<std::size_t>(1, cores / 2);
  if (config.completion_threads > cap) {
    log::debug("gpubatch executor: {} runs on the host's {} cores: {} completion threads instead of {}",
                  device->name(), cores, cap, config.completion_threads);
    config.completion_threads = cap;
  }
  return config;
}
}  // namespace

namespace {
thread_local bool tl_caller_waits = false;
}
bool caller_waits() noexcept { return tl_caller_waits; }
CallerWaitsScope::CallerWaitsScope() noexcept : previous_(tl_caller_waits) { tl_caller_waits = true; }
CallerWaitsScope::~CallerWaitsScope() { tl_caller_waits = previous_; }

bool strand_spin_enabled() noexcept { return env_is("GPUBATCH_STRAND_SPIN", "on"); }
bool lanes_busy_batches_only() noexcept { return env_is("GPUBATCH_LANES_BUSY", "batches"); }
bool lanes_for_host_buffers() noexcept { return env_is("GPUBATCH_LANES_FOR_HOST_BUFFERS", "on"); }

namespace {
// A positive number of microseconds from the environment, else `fallback`.
std::chrono::microseconds env_positive_us(const char* name, long fallback) noexcept {
  const char* v = std::getenv(name);
  long us = fallback;
  if (v && *v) {
    char* end = nullptr;
    const long parsed = std::strtol(v, &end, 10);
    if (end && *end == 0 && parsed > 0) us = parsed;
  }
  return std::chrono::microseconds(us);
}

// GPUBATCH_WATCH_LAG_US: how late the deadline watch may run before the strand fails expired
// requests itself again (ExecutorCore::leave_to_watch); 1,000 us unless a positive number.
std::chrono::nanoseconds watch_lag_limit() noexcept { return env_positive_us("GPUBATCH_WATCH_LAG_US", 1'000); }
}  // namespace

std::chrono::steady_clock::duration wait_slice() noexcept { return env_positive_us("GPUBATCH_WAIT_SLICE_US", 100'000); }

bool poll_all_batches() noexcept { return env_is("GPUBATCH_POLL_ALL", "on"); }

bool host_spin_enabled() noexcept { return !env_is("GPUBATCH_HOST_SPIN", "off"); }

bool inline_submit_enabled() noexcept { return !env_is("GPUBATCH_INLINE_SUBMIT", "off"); }
bool caller_awaits_enabled() noexcept { return !env_is("GPUBATCH_CALLER_AWAITS", "off"); }
bool future_inline_enabled() noexcept { return !env_is("GPUBATCH_FUTURE_INLINE", "off"); }
bool handler_inline_enabled() noexcept { return !env_is("GPUBATCH_HANDLER_INLINE", "off"); }
bool express_enabled() noexcept { return !env_is("GPUBATCH_EXPRESS", "off"); }
bool upper_look_enabled() noexcept { return !env_is("GPUBATCH_UPPER_LOOK", "off"); }
bool watch_before_push_enabled() noexcept { return !env_is("GPUBATCH_WATCH_BEFORE_PUSH", "off"); }
bool in_place_light_enabled() noexcept { return !env_is("GPUBATCH_IN_PLACE_LIGHT", "off"); }
bool express_beside_enabled() noexcept { return !env_is("GPUBATCH_EXPRESS_BESIDE", "off"); }
bool packer_enabled(std::size_t priority_levels) noexcept {
  if (env_is("GPUBATCH_PACKER", "off")) return false;
  return !env_is("GPUBATCH_PACKER", "levels") || priority_levels > 1;
}
std::size_t packer_min_requests() noexcept {
  const char* v = std::getenv("GPUBATCH_PACKER_MIN");
  if (v == nullptr || *v == 0) return 1024;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end && *end == 0 && n >= 1 ? static_cast<std::size_t>(n) : 1024;
}
std::uint32_t express_depth() noexcept {
  const char* v = std::getenv("GPUBATCH_EXPRESS_DEPTH");
  if (v == nullptr || *v == 0) return 2;
  const long n = std::strtol(v, nullptr, 10);
  return static_cast<std::uint32_t>(std::clamp(n, 1L, 8L));
}

// GPUBATCH_EXPRESS_HOLD_US: how long a request above level 0 waits for a regular slot, every slot
// taken, before it goes in an express batch (ExecutorCore::express_ready); 0 at once, as before.
std::chrono::microseconds express_hold() noexcept {
  const char* v = std::getenv("GPUBATCH_EXPRESS_HOLD_US");
  if (v == nullptr || *v == 0) return std::chrono::microseconds(50);
  return std::chrono::microseconds(std::clamp(std::strtol(v, nullptr, 10), 0L, 1000000L));
}

namespace {
// A request count from the environment: unset or empty `fallback`, "off" 0, else the number.
std::size_t env_count_or_off(const char* name, std::size_t fallback) noexcept {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == 0) return fallback;
  if (std::string_view(v) == "off") return 0;
  return static_cast<std::size_t>(std::clamp(std::strtol(v, nullptr, 10), 0L, 1L << 30));
}
}  // namespace

std::size_t express_split() noexcept { return env_count_or_off("GPUBATCH_EXPRESS_SPLIT", 1024); }

std::chrono::microseconds saturated_after() noexcept {
  const char* v = std::getenv("GPUBATCH_SATURATED_AFTER_US");
  if (v == nullptr || *v == 0) return std::chrono::microseconds(10000);
  return std::chrono::microseconds(std::clamp(std::strtol(v, nullptr, 10), 0L, 10'000'000L));
}

// GPUBATCH_SATURATED_INFLIGHT: in-flight batches once the count cap has been raised (0 or
// "off": max_inflight_batches, as before the twenty-sixth session); default twice that.
std::size_t saturated_inflight(std::size_t max_inflight) noexcept {
  const char* v = std::getenv("GPUBATCH_SATURATED_INFLIGHT");
  if (v == nullptr || *v == 0) return 2 * max_inflight;
  if (std::string_view(v) == "off") return max_inflight;
  const long n = std::clamp(std::strtol(v, nullptr, 10), 0L, 1024L);
  return n == 0 ? max_inflight : std::max<std::size_t>(max_inflight, static_cast<std::size_t>(n));
}

// GPUBATCH_HOST_SMALL_BATCH: on a device of host cores, a regular batch under this many requests
// waits for the one in flight (executor_core.hpp, host_small_batch_); "off" or 0: never.
std::size_t host_small_batch() noexcept { return env_count_or_off("GPUBATCH_HOST_SMALL_BATCH", 256); }

namespace {
BatchFormer<Pending>::Limits former_limits(const BatchConfig& c) {
  BatchFormer<Pending>::Limits l;
  l.max_batch_size = c.max_batch_size;
  l.max_batch_bytes = c.max_batch_bytes;
  l.max_wait = std::chrono::duration_cast<Clock::duration>(c.max_wait);
  l.policy = c.policy;
  l.levels = c.priority_levels;
  l.aging = std::chrono::duration_cast<Clock::duration>(c.priority_aging);
  return l;
}
}  // namespace

ExecutorCore::ExecutorCore(std::shared_ptr<BatchDevice> device, BatchConfig config)
    : config_(fitted_to_host(validated(std::move(config)), device.get())),
      device_(require_device(std::move(device))),
      max_request_bytes_(device_->max_request_bytes()),
      big_request_bytes_(config_.max_batch_bytes / config_.max_batch_size),
      max_inflight_(config_.max_inflight_batches * std::max<std::size_t>(1, device_->slot_multiplier())),
      // A latency target sizes batches for max_inflight_batches ahead of a request (cost_model.hpp),
      // and an express batch waits on the device behind the regular ones in flight.
      saturated_inflight_(config_.target_p99.count() > 0 || config_.priority_levels > 1
                              ? max_inflight_
                              : saturated_inflight(max_inflight_)),
      inflight_limit_(max_inflight_),
      host_small_batch_(device_->runs_on_host_cpu() ? host_small_batch() : 0),
      host_small_inflight_(host_small_batch_ == 0 ? 0 : std::max<std::size_t>(1, device_->slot_multiplier())),
      large_half_slot_(!device_->runs_on_host_cpu() || env_is("GPUBATCH_HOST_LARGE_SLOT", "half")),
      done_runs_strand_(device_->runs_on_host_cpu() && !env_is("GPUBATCH_HOST_DONE_STRAND", "off")),
      watchdog_(std::chrono::duration_cast<Clock::duration>(config_.batch_timeout) *
                static_cast<long>(std::max<std::size_t>(1, device_->watchdog_periods()))),
      await_width_(std::clamp<std::size_t>(device_->inflight_multiplier(), 1, config_.completion_threads)),
      completion_spin_(device_->runs_on_host_cpu() && !host_spin_enabled() ? std::chrono::microseconds(0) : config_.completion_spin),
      queue_(config_.queue_capacity_of(0)),
      strand_(io_.get_executor()),
      timer_(strand_),
      former_(former_limits(config_)),
      count_cap_(config_.policy == FlushPolicy::adaptive ? config_.latency_batch_size : 0, config_.max_batch_size,
                 saturated_after()),
      scanned_upto_(config_.priority_levels, 0),
      deadline_watch_on_(deadline_watch_enabled()),
      strand_leaves_expiry_(strand_leaves_expiry()),
      watch_lag_limit_ns_(watch_lag_limit().count()),
      expiry_spread_(expiry_spread_enabled()),
      expiry_helpers_(std::clamp<std::size_t>(usable_cores() / 4, 1, 3), [this] { start_expiry_thread(); }),
      deadline_watch_([this](ExpiryCell& cell) { on_deadline(cell); }, [this] { start_expiry_thread(); },
                      [this](std::size_t n, const std::function<void(std::size_t)>& each) { spread_expiry(n, each); },
                      [this](const DeadlineWatch::Round& round) { trace_expiry_round(round); }) {
  check_poll_pause();
  backlog_trend_on_ = !env_is("GPUBATCH_BACKLOG_TREND", "off");
  target_age_lift_ = !env_is("GPUBATCH_TARGET_AGE_LIFT", "off");
  former_.set_count_limit(count_cap_.limit());
  count_limit_.store(count_cap_.limit(), std::memory_order_relaxed);
  // The direct lane lifts the strand's serial copy off a GPU's large requests. On a device of
  // host cores (lavapipe) the device's own work on those cores is the limit and the batched path
  // was faster (2 cores, 1,048,576-float relu, --threads 2 --inflight 8: 1.23-1.34 GB/s batched
  // against 1.02-1.25 with the lane, three rounds); GPUBATCH_HOST_DIRECT=on turns it on there.
  // A device set too (its submit places the lane's request on the least busy member and re-runs
  // it elsewhere when that member is lost): without the lanes its large requests all waited for
  // the strand's copy, and two H100s carried 9.2-10.2 GB/s of 1,048,576-float relu where one
  // carried 11.7-16.3 (BENCHMARKS.md, eighth session of 2026-11-27). GPUBATCH_SET_LANES=off keeps
  // a set's large requests on the strand, for side-by-side runs.
  const bool set_lanes = device_->inflight_multiplier() == 1 || !env_is("GPUBATCH_SET_LANES", "off");
  direct_lane_ = config_.direct_bytes != 0 && set_lanes &&
                 (!device_->runs_on_host_cpu() || env_is("GPUBATCH_HOST_DIRECT", "on"));
  bulk_lane_ = direct_lane_ && !env_is("GPUBATCH_BULK_LANE", "off");
  split_line_ = device_->inflight_multiplier() == 1 ? device_->split_bytes() : 0;
  for (std::size_t level = 1; level < config_.priority_levels; ++level)
    upper_queues_.push_back(std::make_unique<BlockingMpscQueue<Pending>>(config_.queue_capacity_of(level)));
  for (std::size_t level = 0; level < config_.priority_levels; ++level)
    level_queue(level).set_timed_wait_slice(config_.block_slice);
  for (std::size_t i = 0; i < config_.completion_threads + kCallerSlots; ++i)
    completion_stats_.push_back(std::make_unique<CompletionStats>(config_.priority_levels));
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
  finish(packer_thread_);
  finish(resident_thread_);
  for (auto& t : bulk_threads_) finish(t);
  for (auto& t : completion_threads_) finish(t);
  delete pool_hot_.load(std::memory_order_acquire);
}

void ExecutorCore::start() {
  start_resident();  // src/executor/resident_lane.cpp
  work_.emplace(io_.get_executor());
  auto self = shared_from_this();
  io_thread_ = std::thread([self] {
    tl_core = self.get();
    name_thread("gpubatch-strand");
    self->prepare_thread();
    for (;;) {
      try {
        self->io_.run();
        return;
      } catch (const std::exception& e) {
        log::error("gpubatch executor: strand handler threw: {}", e.what());
      }
    }
  });
  for (std::size_t i = 0; i < config_.completion_threads; ++i) {
    completion_threads_.emplace_back([self, i] {
      tl_core = self.get();
      tl_completion_thread = true;
      name_thread("gpubatch-done");
      self->prepare_thread();
      self->completion_loop(i);
    });
  }
}

bool ExecutorCore::on_internal_thread() const noexcept { return tl_core == this; }

// First thing on the deadline watch's thread and on each of its helpers.
void ExecutorCore::start_expiry_thread() noexcept {
  tl_core = this;
  name_thread("gpubatch-expiry");
  prepare_thread();
}

// On each of the executor's threads, first thing (thread_nice; Linux nice values are per thread).
// Under a crowd of callers that take every core, the executor's few threads waited for one: on
// the H100, 16 threads of a 1.9 M/s mix, `perf sched latency` showed a completion thread waiting
// up to 5.6 ms and the strand 2.2 ms to run (BENCHMARKS.md, second session of 2026-11-25).
// Linux lets a sleeping thread's timer fire up to its timer slack late (50 us by default) so that
// wake-ups can be merged; the executor's threads sleep until an instant that matters (the
// deadline watch until the next deadline, the strand until a batch's max_wait), so they ask for
// 1 ns. GPUBATCH_TIMER_SLACK=default keeps the system's for side-by-side runs.
void ExecutorCore::prepare_thread() noexcept {
  apply_thread_nice();
  apply_thread_slice();
  if (!env_is("GPUBATCH_TIMER_SLACK", "default")) ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

void ExecutorCore::apply_thread_nice() noexcept {
  if (config_.thread_nice == 0) return;
  errno = 0;
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), config_.thread_nice) == 0) return;
  const int err = errno;
  if (!nice_refused_.exchange(true, std::memory_order_relaxed))
    log::warn("gpubatch executor: thread_nice = {} refused ({}): the executor's threads keep their "
                 "priority (a negative value needs CAP_SYS_NICE or RLIMIT_NICE)",
                 config_.thread_nice, std::strerror(err));
}

// thread_slice_us (DESIGN.md "Scheduling"): after the nice value, which sched_setattr keeps.
void ExecutorCore::apply_thread_slice() noexcept {
  if (config_.thread_slice.count() == 0) return;
  errno = 0;
  const SliceOutcome outcome = request_thread_slice(config_.thread_slice);
  const int err = errno;
  if (outcome == SliceOutcome::applied || outcome == SliceOutcome::not_fair) return;
  if (slice_refused_.exchange(true, std::memory_order_relaxed)) return;
  if (outcome == SliceOutcome::refused)
    log::warn("gpubatch executor: thread_slice_us = {} refused ({}): the executor's threads keep the "
                 "system's slice", config_.thread_slice.count(), std::strerror(err));
  else
    log::info("gpubatch executor: thread_slice_us = {} has no effect on this kernel (custom slices "
                 "need Linux 6.12 or later)", config_.thread_slice.count());
}

// ---------------------------------------------------------------------------------------------
// Waking the strand (producers: enqueue.cpp).

// After a slot was freed. Only a strand that went idle waiting for a slot is woken, not one
// after every batch: a lone caller's completion would pay a post, and the strand a run that finds
// nothing, before the caller's future resolves. Pairs with run_strand(), which publishes
// wants_slot_, fences, then reads the slots: it sees the freed slot, or we see wants_slot_.
void ExecutorCore::wake_if_waiting_for_slot() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!wants_slot_.load(std::memory_order_relaxed)) return;
  if (done_runs_strand_ && tl_completion_thread && tl_core == this) {
    // On host cores this completion thread runs the pass itself (executor_core.hpp).
    if (strand_awake_.load(std::memory_order_relaxed) || strand_awake_.exchange(true, std::memory_order_seq_cst))
      return;
    bump(strand_stats_.done_runs);
    run_strand(false);  // one pass; what it leaves is posted
    return;
  }
  post_if_idle();
}

// Whoever finds the strand idle takes it (strand_awake_). A caller that waits for its own result
// anyway (CallerWaitsScope), on a thread that is not the executor's, then runs it right here:
// its request goes to the device without waiting for the io thread to wake (an OS wake-up of
// 10-30 us; on the H100 a lone caller's submit_us p50 was 22 us with the hop). So does a caller
// of a std::future on an idle executor (lone_future_pass): it will most likely wait for the
// future next, and the pass costs its call one submit of a lone batch instead of the io thread's
// wake-up (on the H100 a lone future's submit_us p50 went from 15.1-18.9 us to 5.8-7.8 us, its
// round trip from 41-46 us to 30-33 us). So does a caller of a completion handler on an idle
// executor (its handler still runs on a completion thread, never inside its call): on the H100
// a lone caller's handler at 500-2,000 requests/s spent 34-54 us from the call to the submit's
// return, waiting for the io thread to wake (third session of 2026-11-27). The run is one pass;
// what it leaves is posted (run_strand). Executor threads post: a completion thread must not
// form batches while it is the one to wait for them (on a GPU; on host cores see
// wake_if_waiting_for_slot).
void ExecutorCore::post_if_idle(InlineAsk ask) noexcept {
  if (strand_awake_.load(std::memory_order_relaxed)) return;
  if (strand_awake_.exchange(true, std::memory_order_seq_cst)) return;
  if (inline_runs_ && tl_core == nullptr && (tl_caller_waits || lone_future_pass(ask))) {
    tl_core = this;  // the strand's thread for the pass: handlers it resolves are posted
    inline_pass_ = this;
    future_pass_ = !tl_caller_waits && ask.future;
    run_strand(false);
    future_pass_ = false;
    inline_pass_ = nullptr;
    tl_core = nullptr;
    return;
  }
  if (!post_strand_run()) strand_awake_.store(false, std::memory_order_seq_cst);
}

// Called holding the strand. A future's or a handler's caller runs the pass only when the
// executor is idle: no batch in flight or forming, and its request (at most kLoneFutureBytes)
// within the first kLoneBatch of its queue: its call then waits for one lone small batch's
// submit. A burst from one thread thus pays at most its first request's submit; the rest go to
// the io thread as before (GPUBATCH_FUTURE_INLINE=off, GPUBATCH_HANDLER_INLINE=off: every future,
// every handler does, for side-by-side runs). A handler's caller, who does not wait for its
// result, also needs an executor that finished no batch for kHandlerPassGap (a sparse caller).
bool ExecutorCore::lone_future_pass(const InlineAsk& ask) const noexcept {
  if (ask.queue == nullptr || !(ask.future ? future_inline_ : handler_inline_)) return false;
  if (inflight_slots_.load(std::memory_order_seq_cst) != 0 || !former_.empty()) return false;
  if (ask.position >= ask.queue->popped_approx() + kLoneBatch) return false;
  if (ask.future) return true;
  const Clock::time_point last_done{Clock::duration(last_done_.load(std::memory_order_relaxed))};
  return Clock::now() - last_done >= kHandlerPassGap;
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
  stop_bulk_locked();
  stop_packer_locked();
  deadline_watch_.request_stop();
  work_.reset();  // the strand thread ends once its last handler has run
}

void ExecutorCore::begin_shutdown(ShutdownMode mode) {
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(shutdown_mutex_);
    if (!done_) {
      if (mode == ShutdownMode::cancel && !cancel_.exchange(true)) post = true;
      if (!closing_) {
        closing_ = true;
        resident_closed_.store(true, std::memory_order_seq_cst);
        for (std::size_t l = 0; l < level_count(); ++l) level_queue(l).close();
        closing_requested_.store(true, std::memory_order_seq_cst);
        post = true;
      }
    }
  }
  if (post) boost::asio::post(strand_, [this] { kick(); });
}

void ExecutorCore::shutdown(ShutdownMode mode) {
  begin_shutdown(mode);
  if (on_internal_thread()) return;  // cannot wait for ourselves
  {
    std::unique_lock<std::mutex> lock(shutdown_mutex_);
    shutdown_cv_.wait(lock, [&] { return done_; });
  }
  std::lock_guard<std::mutex> lock(join_mutex_);
  if (io_thread_.joinable()) io_thread_.join();
  {
    std::unique_lock<std::mutex> packer_lock(packer_mutex_);  // started under it
    std::thread packer = std::move(packer_thread_);
    packer_lock.unlock();
    if (packer.joinable()) packer.join();
  }
  if (resident_thread_.joinable()) resident_thread_.join();
  for (auto& t : bulk_threads_)  // started only under bulk_mutex_, and none after stop_bulk_locked()
    if (t.joinable()) t.join();
  for (auto& t : completion_threads_)
    if (t.joinable()) t.join();
  deadline_watch_.join();
  expiry_helpers_.stop();
  if (trace_.on()) trace_.stop();  // every batch has been recorded: write the file
}

// ---------------------------------------------------------------------------------------------

void enqueue(ExecutorCore* core, Request&& request, const SubmitOptions& options,
             Completion&& completion) noexcept {
  if (core) {
    core->enqueue(std::move(request), options, std::move(completion));
    core->complete_own_batch();  // a lone batch its inline pass kept for this caller, if any
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
    : core_(detail::make_executor(std::move(device), std::move(config))) {}  // set_shard.cpp

BatchExecutor::~BatchExecutor() { shutdown(ShutdownMode::drain); }

BatchExecutor& BatchExecutor::operator=(BatchExecutor&& other) noexcept {
  if (this != &other) {
    shutdown(ShutdownMode::drain);
    core_ = std::move(other.core_);
  }
  return *this;
}

BatchedGpuHandle BatchExecutor::handle() const { return BatchedGpuHandle(core_); }

// Every shard stops accepting first, then each drains (or cancels) and is waited for; on a
// thread of any shard (a completion handler) nothing is waited for.
void BatchExecutor::shutdown(ShutdownMode mode) {
  if (!core_) return;
  std::vector<detail::ExecutorCore*> cores{core_.get()};
  if (const detail::ShardGroup* group = core_->shard_group())
    for (const auto& shard : group->others) cores.push_back(shard.get());
  bool internal = false;
  for (detail::ExecutorCore* c : cores) {
    c->begin_shutdown(mode);
    internal = internal || c->on_internal_thread();
  }
  if (internal) return;  // each shard finishes on its own
  for (detail::ExecutorCore* c : cores) c->shutdown(mode);
}

Stats BatchExecutor::stats() const { return core_ ? core_->stats() : Stats{}; }

const BatchConfig& BatchExecutor::config() const noexcept { return core_->config(); }

}  // namespace gpubatch

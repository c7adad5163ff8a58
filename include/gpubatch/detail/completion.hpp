#pragma once
// How one request of a BatchedGpuHandle reports its result: a std::promise (the std::future
// path) or an Asio completion handler. The handler path follows Asio's rules for asynchronous
// operations (docs/RELIABILITY.md, "Completion handlers"):
//  - its state (handler, outstanding work, cancellation state) is allocated with the handler's
//    associated allocator, and freed before the handler is called;
//  - its associated cancellation slot, when connected, cancels the request until its batch is
//    submitted (the request then fails with ErrorCode::cancelled, Asio's operation_aborted);
//    the slot is cleared, in the handler's executor, before the handler is called;
//  - the handler runs through its associated executor. A handler without one runs on an
//    executor thread (or, when the call failed at once, on boost::asio::system_executor); if it
//    throws there, the exception is caught, logged and counted (Stats::handler_exceptions), as
//    it is when a dispatch through the handler's executor runs it inline on an executor thread.
//    A handler with an executor of its own throws out of that executor (e.g. io_context::run()).
#include <atomic>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/system_executor.hpp>

#include "gpubatch/detail/block_pool.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch::detail {

class ExecutorCore;

// ---- hooks into the executor (src/executor/executor.cpp) ----
// The slot of a pending request was signalled: the strand takes it out of its batch.
void notify_cancelled(ExecutorCore* core) noexcept;
// Called inside a catch block: a completion handler threw on a thread that is not the user's.
// Logs (rate-limited) and counts it in `core` (null: the executor whose thread this is, if any).
void handler_threw(ExecutorCore* core) noexcept;
// A reference that keeps `core` alive (null for null).
std::shared_ptr<ExecutorCore> share(ExecutorCore* core) noexcept;

// What a handler's initiation is given to reach the executor. Made in the handle's call, it
// borrows the handle's shared_ptr: Asio runs a plain handler's initiation inside async_initiate,
// so the handle is alive throughout, and nothing is copied. Copied or moved (a deferred token
// keeps its arguments for later, when the handle may be gone), it owns a shared_ptr of its own.
// Before, every handler's call copied the shared_ptr, an atomic increment and decrement on one
// cache line shared by every caller: on the H100, 16 threads of handlers used 0.07-0.36 us less
// CPU per request without (3 rounds against the previous build; BENCHMARKS.md, third session of
// 2026-11-26).
class CoreRef {
 public:
  explicit CoreRef(const std::shared_ptr<ExecutorCore>& core) noexcept : borrowed_(&core) {}
  CoreRef(const CoreRef& other) : owned_(other.shared()) {}
  CoreRef(CoreRef&& other) noexcept
      : owned_(other.borrowed_ ? *other.borrowed_ : std::move(other.owned_)) {}
  CoreRef& operator=(const CoreRef&) = delete;
  CoreRef& operator=(CoreRef&&) = delete;

  ExecutorCore* get() const noexcept { return borrowed_ ? borrowed_->get() : owned_.get(); }
  // A shared_ptr of the caller's own (one atomic increment): only when something must outlive
  // the call, e.g. the cancellation state of a handler whose slot is connected.
  std::shared_ptr<ExecutorCore> shared() const { return borrowed_ ? *borrowed_ : owned_; }
  // The pointer itself, borrowed for the call.
  const std::shared_ptr<ExecutorCore>& ref() const noexcept { return borrowed_ ? *borrowed_ : owned_; }
  bool borrowed() const noexcept { return borrowed_ != nullptr; }

 private:
  std::shared_ptr<ExecutorCore> owned_;
  const std::shared_ptr<ExecutorCore>* borrowed_ = nullptr;
};

// A request's cancellation state, shared by the strand and the handler installed in the
// request's cancellation slot. It leaves `pending` once: to `claimed` when the strand puts the
// request into a batch it submits, or to `cancelled` when the slot is signalled first. Only the
// executor resolves the request, so it resolves exactly once whichever wins.
class RequestCancel {
 public:
  explicit RequestCancel(std::shared_ptr<ExecutorCore> core) noexcept : core_(std::move(core)) {}
  RequestCancel(const RequestCancel&) = delete;
  RequestCancel& operator=(const RequestCancel&) = delete;

  // The strand: the request goes to the device. False when it was cancelled first.
  bool claim() noexcept {
    std::uint8_t expected = kPending;
    return state_.compare_exchange_strong(expected, kClaimed, std::memory_order_acq_rel) ||
           expected != kCancelled;
  }
  bool cancelled() const noexcept { return state_.load(std::memory_order_acquire) == kCancelled; }
  // The request resolved: a later signal does nothing (not even wake the strand).
  void finish() noexcept { state_.store(kFinished, std::memory_order_release); }

  // The slot's handler. Terminal, partial and total cancellation all qualify: a request not yet
  // submitted has had no effect at all. After submission it does nothing (the request completes).
  void signal(boost::asio::cancellation_type type) noexcept {
    using boost::asio::cancellation_type;
    if ((type & (cancellation_type::terminal | cancellation_type::partial |
                 cancellation_type::total)) == cancellation_type::none)
      return;
    if (state_.load(std::memory_order_relaxed) != kPending) return;
    // Taken before the exchange: once it succeeds, the strand may resolve the request and its
    // state (this object) be freed while we still wake the executor, which this keeps alive.
    std::shared_ptr<ExecutorCore> core = core_;
    std::uint8_t expected = kPending;
    if (state_.compare_exchange_strong(expected, kCancelled, std::memory_order_acq_rel))
      notify_cancelled(core.get());
  }

 private:
  static constexpr std::uint8_t kPending = 0, kClaimed = 1, kCancelled = 2, kFinished = 3;
  std::atomic<std::uint8_t> state_{kPending};
  std::shared_ptr<ExecutorCore> core_;
};

// What is installed in the slot: a pointer (the slot outlives nothing of ours: it is cleared
// before the request's state is freed).
struct CancelHook {
  RequestCancel* state;
  void operator()(boost::asio::cancellation_type type) const noexcept { state->signal(type); }
};

// How a completion is delivered: dispatched (inline where the handler's executor allows it) from
// a completion thread, or posted (a call that failed at once, or a request the strand resolves;
// never run inside the initiating call or on the strand). `core` counts a handler that throws.
struct Delivery {
  bool post = false;
  ExecutorCore* core = nullptr;
};

template <typename T>
class HandlerBase {
 public:
  // Calls the handler with the result; this object is freed before the handler runs.
  virtual void complete(std::exception_ptr error, T value, Delivery how) noexcept = 0;
  // Frees it without calling the handler (a request destroyed unresolved).
  virtual void destroy() noexcept = 0;
  // Non-null when the handler has a connected cancellation slot.
  RequestCancel* cancel_state() const noexcept { return cancel_; }

 protected:
  ~HandlerBase() = default;
  RequestCancel* cancel_ = nullptr;
};

struct HandlerDeleter {
  template <typename B>
  void operator()(B* base) const noexcept {
    base->destroy();
  }
};

template <typename T>
using HandlerCompletion = std::unique_ptr<HandlerBase<T>, HandlerDeleter>;

template <typename T, typename Handler>
class HandlerImpl final : public HandlerBase<T> {
  using Executor = boost::asio::associated_executor_t<Handler, boost::asio::system_executor>;
  using Allocator = boost::asio::associated_allocator_t<Handler>;
  // A handler with an allocator of its own is allocated with it; one without (std::allocator, as
  // Asio's recycling allocator stands in for it) from a pool: made on the caller's thread and freed
  // on a completion thread, each of these waited for the caller's glibc arena lock
  // (block_pool.hpp).
  using SelfAllocator =
      std::conditional_t<std::is_same_v<Allocator, std::allocator<void>>,
                         PooledAllocator<HandlerImpl>,
                         typename std::allocator_traits<Allocator>::template rebind_alloc<HandlerImpl>>;
  using Traits = std::allocator_traits<SelfAllocator>;
  using Slot = boost::asio::associated_cancellation_slot_t<Handler>;
  // A handler without an executor of its own would run on system_executor, which calls
  // std::terminate when a function it runs inline (or on its pool) throws: we catch it first.
  static constexpr bool kCatches = std::is_same_v<Executor, boost::asio::system_executor>;

  // The function run through the handler's executor: clears the slot, frees the state, calls
  // the handler. Destroyed without being called (its executor was destroyed first), it frees.
  struct Upcall {
    HandlerImpl* op;
    std::exception_ptr error;
    T value;
    ExecutorCore* report_to;
    std::shared_ptr<ExecutorCore> keep;  // posted to system_executor: report_to stays valid
    Allocator allocator;                 // the posted function's memory comes from it too

    using allocator_type = Allocator;
    allocator_type get_allocator() const noexcept { return allocator; }

    Upcall(HandlerImpl* o, std::exception_ptr e, T v, ExecutorCore* r, Allocator a)
        : op(o), error(std::move(e)), value(std::move(v)), report_to(r), allocator(std::move(a)) {}
    Upcall(Upcall&& other) noexcept
        : op(std::exchange(other.op, nullptr)),
          error(std::move(other.error)),
          value(std::move(other.value)),
          report_to(other.report_to),
          keep(std::move(other.keep)),
          allocator(other.allocator) {}
    Upcall& operator=(Upcall&&) = delete;
    ~Upcall() {
      if (op) op->free();
    }

    void operator()() {
      Handler handler = std::exchange(op, nullptr)->release();
      if constexpr (kCatches) {
        try {
          std::move(handler)(std::move(error), std::move(value));
        } catch (...) {
          handler_threw(report_to);
        }
      } else {
        std::move(handler)(std::move(error), std::move(value));
      }
    }
  };

 public:
  // Allocates with the handler's associated allocator (or the pool, for std::allocator); throws
  // (std::bad_alloc) only from it or the slot's own memory.
  static HandlerImpl* create(Handler&& handler, const CoreRef& core) {
    SelfAllocator alloc(boost::asio::get_associated_allocator(handler));
    HandlerImpl* p = Traits::allocate(alloc, 1);
    try {
      Traits::construct(alloc, p, std::move(handler));
    } catch (...) {
      Traits::deallocate(alloc, p, 1);
      throw;
    }
    try {
      p->connect(core);
    } catch (...) {
      p->free();
      throw;
    }
    return p;
  }

  explicit HandlerImpl(Handler&& handler)
      : work_(boost::asio::prefer(
            boost::asio::get_associated_executor(handler, boost::asio::system_executor()),
            boost::asio::execution::outstanding_work.tracked)),
        handler_(std::move(handler)),
        slot_(boost::asio::get_associated_cancellation_slot(handler_)) {}

  void complete(std::exception_ptr error, T value, Delivery how) noexcept override {
    if (this->cancel_) this->cancel_->finish();
    // The outstanding work is given up here, after the handler has been handed to its executor
    // (as Asio's handler_work does): given up inside the handler, the user's run() could return
    // and its io_context be destroyed while this thread is still inside post().
    WorkExecutor work(std::move(work_));
    Executor ex = boost::asio::get_associated_executor(handler_, boost::asio::system_executor());
    Upcall up(this, std::move(error), std::move(value), how.core,
              boost::asio::get_associated_allocator(handler_));
    try {
      if constexpr (kCatches) {
        if (!how.post) {
          up();  // what dispatch on system_executor does, without its std::terminate
          return;
        }
        up.keep = share(how.core);
        up.report_to = up.keep.get();
      }
      if (how.post) boost::asio::post(ex, std::move(up));
      else boost::asio::dispatch(ex, std::move(up));
    } catch (...) {
      // The handler's executor ran it inline here and it threw (or posting it failed: then it
      // is destroyed uncalled, like a handler whose executor is gone).
      handler_threw(how.core);
    }
  }

  void destroy() noexcept override { free(); }

 private:
  void connect(const CoreRef& core) {
    if (!slot_.is_connected()) return;
    cancel_storage_.emplace(core.shared());
    slot_.template emplace<CancelHook>(CancelHook{&*cancel_storage_});
    this->cancel_ = &*cancel_storage_;
  }

  // Clears the slot (no handler of ours may outlive this object), then destroys and frees.
  void free() noexcept {
    if (this->cancel_) slot_.clear();
    SelfAllocator alloc(boost::asio::get_associated_allocator(handler_));
    Traits::destroy(alloc, this);
    Traits::deallocate(alloc, this, 1);
  }
  // The same, keeping the handler.
  Handler release() noexcept {
    if (this->cancel_) slot_.clear();
    SelfAllocator alloc(boost::asio::get_associated_allocator(handler_));
    Handler handler(std::move(handler_));
    Traits::destroy(alloc, this);
    Traits::deallocate(alloc, this, 1);
    return handler;
  }

  using WorkExecutor = std::decay_t<decltype(boost::asio::prefer(
      std::declval<Executor>(), boost::asio::execution::outstanding_work.tracked))>;
  WorkExecutor work_;
  Handler handler_;
  Slot slot_;
  std::optional<RequestCancel> cancel_storage_;
};

// How one request reports its result: a promise (the default std::future path, no allocation
// beyond the future's shared state) or an Asio completion handler (one allocation, from the
// handler's associated allocator).
using Completion =
    std::variant<std::monostate, std::promise<std::vector<float>>, std::promise<float>,
                 std::promise<std::vector<std::uint8_t>>, std::promise<Result>,
                 HandlerCompletion<std::vector<float>>, HandlerCompletion<float>,
                 HandlerCompletion<std::vector<std::uint8_t>>, HandlerCompletion<Result>>;

// A std::future's promise (the caller most likely waits for it next), not a handler.
inline bool returns_future(const Completion& completion) noexcept {
  return completion.index() >= 1 && completion.index() <= 4;
}
static_assert(std::variant_size_v<Completion> == 9, "returns_future() counts the promises");

// The cancellation state of a request with a connected slot, else null.
inline RequestCancel* cancel_state_of(const Completion& completion) noexcept {
  return std::visit(
      [](const auto& alt) -> RequestCancel* {
        if constexpr (requires { alt->cancel_state(); }) {
          return alt ? alt->cancel_state() : nullptr;
        } else {
          (void)alt;
          return nullptr;
        }
      },
      completion);
}

// Wraps an Asio completion handler for enqueue(); `core` is shared (kept until the handler is
// freed) only when the handler's slot is connected: a signal may then wake the executor.
template <typename T, typename Handler>
Completion make_handler_completion(Handler&& handler, const CoreRef& core) {
  using Impl = HandlerImpl<T, std::decay_t<Handler>>;
  return Completion(std::in_place_type<HandlerCompletion<T>>, Impl::create(std::move(handler), core));
}

}  // namespace gpubatch::detail

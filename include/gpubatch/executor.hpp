#pragma once
// The batching executor: many threads submit small requests through cheap handles; one strand
// forms batches (flush on size, on the oldest request's max_wait, on a free in-flight slot with
// the adaptive policy, on shutdown), a device runs each batch with one submission, and completion
// threads resolve every request's future.
//
//   gpubatch::Device device;
//   gpubatch::BatchExecutor executor(device, gpubatch::BatchConfig::latency());
//   auto gpu = executor.handle();                        // copy freely, use from any thread
//   std::future<std::vector<float>> y = gpu.relu({-1.f, 2.f});
//   gpu.dot(a, b, [](std::exception_ptr e, float v) { ... });   // any Asio completion token
//   float d = co_await gpu.dot(a, b, boost::asio::use_awaitable);
//
// Every call returns at once and never throws (short of std::bad_alloc): a request that is
// invalid, too large, finds the queue full (overflow policy), or comes after shutdown resolves
// its future (or completion handler) with a gpubatch::Error saying so. Completion handlers are
// called through their associated executor; one without an associated executor runs on an
// executor-internal completion thread (keep it short) or, when the call fails at once, on
// boost::asio::system_executor.
#include <chrono>
#include <concepts>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/system_executor.hpp>

#include "gpubatch/config.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/ops.hpp"
#include "gpubatch/stats.hpp"

namespace gpubatch {

class Device;

namespace detail {
class BatchDevice;
class ExecutorCore;
}  // namespace detail

enum class ShutdownMode {
  drain,   // every accepted request runs and resolves
  cancel,  // requests not yet submitted to the device fail with shut_down; in-flight ones finish
};

// Per-request options. A request whose deadline passes while it waits in the queue fails with
// deadline_exceeded and never reaches the device (a request already submitted runs to the end).
struct SubmitOptions {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();

  static SubmitOptions at(std::chrono::steady_clock::time_point when) { return {when}; }
  template <typename Rep, typename Period>
  static SubmitOptions within(std::chrono::duration<Rep, Period> timeout) {
    return {std::chrono::steady_clock::now() +
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout)};
  }
};

namespace detail {

template <typename T>
using ResultSignature = void(std::exception_ptr, T);

// A completion handler from an Asio token, type-erased, with outstanding work tracked on its
// associated executor until it has been called.
template <typename T>
class HandlerBase {
 public:
  virtual ~HandlerBase() = default;
  // Calls the handler through its associated executor: dispatch (inline when that executor
  // allows it, e.g. none was associated), or post when `from_initiation` (a failure found while
  // the request was being submitted must not run the handler inside the initiating call).
  virtual void complete(std::exception_ptr error, T value, bool from_initiation) noexcept = 0;
};

template <typename T, typename Handler>
class HandlerImpl final : public HandlerBase<T> {
 public:
  explicit HandlerImpl(Handler&& handler)
      : work_(boost::asio::prefer(
            boost::asio::get_associated_executor(handler, boost::asio::system_executor()),
            boost::asio::execution::outstanding_work.tracked)),
        handler_(std::move(handler)) {}

  void complete(std::exception_ptr error, T value, bool from_initiation) noexcept override {
    auto ex = boost::asio::get_associated_executor(handler_, boost::asio::system_executor());
    try {
      if (from_initiation)
        boost::asio::post(ex, boost::asio::append(std::move(handler_), std::move(error), std::move(value)));
      else
        boost::asio::dispatch(ex,
                              boost::asio::append(std::move(handler_), std::move(error), std::move(value)));
    } catch (...) {
      // A handler run inline threw; nothing sensible can be done with it here.
    }
  }

 private:
  using WorkExecutor = std::decay_t<decltype(boost::asio::prefer(
      boost::asio::get_associated_executor(std::declval<Handler&>(),
                                           boost::asio::system_executor()),
      boost::asio::execution::outstanding_work.tracked))>;
  WorkExecutor work_;
  Handler handler_;
};

template <typename T>
using HandlerCompletion = std::unique_ptr<HandlerBase<T>>;

// How one request reports its result: a promise (the default std::future path, no allocation
// beyond the future's shared state) or an Asio completion handler (one allocation).
using Completion =
    std::variant<std::monostate, std::promise<std::vector<float>>, std::promise<float>,
                 std::promise<std::vector<std::uint8_t>>, std::promise<Result>,
                 HandlerCompletion<std::vector<float>>, HandlerCompletion<float>,
                 HandlerCompletion<std::vector<std::uint8_t>>, HandlerCompletion<Result>>;

// Validates and queues one request. Never throws: every failure resolves `completion`. A null
// core (a default-constructed handle) fails with shut_down.
void enqueue(ExecutorCore* core, Request&& request, const SubmitOptions& options,
             Completion&& completion) noexcept;

template <typename Token, typename T>
concept result_token_for =
    !std::same_as<std::remove_cvref_t<Token>, SubmitOptions> &&
    boost::asio::completion_token_for<Token, ResultSignature<T>>;

}  // namespace detail

// A cheap, copyable reference to an executor (it holds a shared pointer to the executor's
// state). Safe to use from any number of threads; it may outlive the executor, after which every
// call fails with shut_down. Each call comes in three forms:
//   std::future<T> op(args...[, SubmitOptions]);
//   auto op(args..., Token&&);                       // Asio token, signature void(exception_ptr, T)
//   auto op(args..., SubmitOptions, Token&&);
class BatchedGpuHandle {
 public:
  using Floats = std::vector<float>;
  using States = std::vector<std::uint8_t>;
  BatchedGpuHandle() = default;  // detached: every call fails with shut_down

  // Every operation takes, after its operands, an optional SubmitOptions and an optional Asio
  // completion token, in that order. Without a token it returns std::future<T>.

  // ---- element-wise: one float out per float in ----
  template <typename... Tail> auto relu(Floats x, Tail&&... tail) const {
    return call<Floats>(Request::relu(std::move(x)), std::forward<Tail>(tail)...);
  }
  template <typename... Tail> auto sigmoid(Floats x, Tail&&... tail) const {
    return call<Floats>(Request::sigmoid(std::move(x)), std::forward<Tail>(tail)...);
  }
  template <typename... Tail> auto tanh(Floats x, Tail&&... tail) const {
    return call<Floats>(Request::tanh(std::move(x)), std::forward<Tail>(tail)...);
  }
  template <typename... Tail> auto swish(Floats x, Tail&&... tail) const {
    return call<Floats>(Request::swish(std::move(x)), std::forward<Tail>(tail)...);
  }
  template <typename... Tail> auto gelu(Floats x, Tail&&... tail) const {
    return call<Floats>(Request::gelu(std::move(x)), std::forward<Tail>(tail)...);
  }
  template <typename... Tail> auto scale(Floats x, float factor, Tail&&... tail) const {
    return call<Floats>(Request::scale(std::move(x), factor), std::forward<Tail>(tail)...);
  }
  template <typename... Tail> auto add(Floats a, Floats b, Tail&&... tail) const {
    return call<Floats>(Request::add(std::move(a), std::move(b)), std::forward<Tail>(tail)...);
  }
  template <typename... Tail> auto sub(Floats a, Floats b, Tail&&... tail) const {
    return call<Floats>(Request::sub(std::move(a), std::move(b)), std::forward<Tail>(tail)...);
  }
  template <typename... Tail> auto mul(Floats a, Floats b, Tail&&... tail) const {
    return call<Floats>(Request::mul(std::move(a), std::move(b)), std::forward<Tail>(tail)...);
  }
  // a + t (b - a)
  template <typename... Tail> auto lerp(Floats a, Floats b, float t, Tail&&... tail) const {
    return call<Floats>(Request::lerp(std::move(a), std::move(b), t), std::forward<Tail>(tail)...);
  }

  // ---- reductions and products ----
  template <typename... Tail> auto dot(Floats a, Floats b, Tail&&... tail) const {
    return call<float>(Request::dot(std::move(a), std::move(b)), std::forward<Tail>(tail)...);
  }
  // Row-major (m x k) times (k x n) -> m x n.
  template <typename... Tail>
  auto matmul(Floats a, Floats b, std::uint32_t m, std::uint32_t k, std::uint32_t n, Tail&&... tail) const {
    return call<Floats>(Request::matmul(std::move(a), std::move(b), m, k, n), std::forward<Tail>(tail)...);
  }

  // ---- states ----
  // 32 floats per 16-byte state: d/drho and d/dtheta of each layer.
  template <typename... Tail> auto compute_gradients(States states, Tail&&... tail) const {
    return call<Floats>(Request::gradients(std::move(states)), std::forward<Tail>(tail)...);
  }
  template <typename... Tail>
  auto interpolate(States a, States b, float t, InterpolationMode mode, Tail&&... tail) const {
    return call<States>(Request::interpolate(std::move(a), std::move(b), t, mode), std::forward<Tail>(tail)...);
  }

  // ---- any request (chains, custom kernels, ...) ----
  template <typename... Tail> auto submit(Request request, Tail&&... tail) const {
    return call<Result>(std::move(request), std::forward<Tail>(tail)...);
  }

  // False for a default-constructed handle.
  explicit operator bool() const noexcept { return core_ != nullptr; }

 private:
  friend class BatchExecutor;
  explicit BatchedGpuHandle(std::shared_ptr<detail::ExecutorCore> core) : core_(std::move(core)) {}

  template <typename T>
  std::future<T> call(Request&& request, const SubmitOptions& options = {}) const {
    return future_of<T>(std::move(request), options);
  }
  template <typename T, detail::result_token_for<T> Token>
  auto call(Request&& request, Token&& token) const {
    return initiate<T>(std::move(request), {}, std::forward<Token>(token));
  }
  template <typename T, detail::result_token_for<T> Token>
  auto call(Request&& request, const SubmitOptions& options, Token&& token) const {
    return initiate<T>(std::move(request), options, std::forward<Token>(token));
  }

  template <typename T>
  std::future<T> future_of(Request&& request, const SubmitOptions& options) const {
    std::promise<T> promise;
    std::future<T> future = promise.get_future();
    detail::enqueue(core_.get(), std::move(request), options,
                    detail::Completion(std::in_place_type<std::promise<T>>, std::move(promise)));
    return future;
  }

  template <typename T, typename Token>
  auto initiate(Request&& request, const SubmitOptions& options, Token&& token) const {
    return boost::asio::async_initiate<Token, detail::ResultSignature<T>>(
        [](auto handler, std::shared_ptr<detail::ExecutorCore> core, Request r,
           SubmitOptions o) {
          detail::HandlerCompletion<T> completion(
              new detail::HandlerImpl<T, decltype(handler)>(std::move(handler)));
          detail::enqueue(core.get(), std::move(r), o,
                          detail::Completion(std::in_place_type<detail::HandlerCompletion<T>>,
                                             std::move(completion)));
        },
        token, core_, std::move(request), options);
  }

  std::shared_ptr<detail::ExecutorCore> core_;
};

class BatchExecutor {
 public:
  // Runs batches on `device` (src/gpu's Vulkan device, or any BatchDevice). Throws
  // Error(invalid_config) when config.validate() does.
  explicit BatchExecutor(std::shared_ptr<detail::BatchDevice> device,
                         BatchConfig config = BatchConfig{});
  // Runs batches on a Vulkan device (shares its memory, kernels and pipelines).
  explicit BatchExecutor(const Device& device, BatchConfig config = BatchConfig{});
  // Drains: every accepted request resolves before the destructor returns.
  ~BatchExecutor();

  BatchExecutor(const BatchExecutor&) = delete;
  BatchExecutor& operator=(const BatchExecutor&) = delete;
  BatchExecutor(BatchExecutor&&) noexcept = default;
  BatchExecutor& operator=(BatchExecutor&&) noexcept;

  BatchedGpuHandle handle() const;

  // Stops accepting requests (later calls fail with shut_down), then drains or cancels what was
  // accepted, and waits until every accepted request has resolved and the executor's threads
  // have ended. Idempotent; a later call with `cancel` cancels what a running drain has left.
  // Called from a completion handler (an executor thread), it starts the shutdown and returns
  // without waiting.
  void shutdown(ShutdownMode mode = ShutdownMode::drain);

  Stats stats() const;
  const BatchConfig& config() const noexcept;

 private:
  std::shared_ptr<detail::ExecutorCore> core_;
};

}  // namespace gpubatch

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
//                                    // (gpubatch::error_code_of(e): its code, without a rethrow)
//   float d = co_await gpu.dot(a, b, boost::asio::use_awaitable);
//
// Every call returns at once and never throws (short of std::bad_alloc): a request that is
// invalid, too large, finds the queue full (overflow policy), or comes after shutdown resolves
// its future (or completion handler) with a gpubatch::Error saying so. Completion handlers are
// called through their associated executor; one without an associated executor runs on an
// executor-internal completion thread (keep it short) or, when the call fails at once, on
// boost::asio::system_executor. A handler's associated allocator provides the request's state;
// its associated cancellation slot cancels the request until its batch is submitted (it then
// fails with ErrorCode::cancelled); a handler that throws on an executor thread is caught,
// logged and counted (Stats::handler_exceptions). See detail/completion.hpp and
// docs/RELIABILITY.md, "Completion handlers".
#include <chrono>
#include <concepts>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <future>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/async_result.hpp>

#include "gpubatch/config.hpp"
#include "gpubatch/detail/completion.hpp"
#include "gpubatch/detail/future_state.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/ops.hpp"
#include "gpubatch/stats.hpp"

namespace gpubatch {

class Device;
struct DeviceOptions;

namespace detail {
class BatchDevice;
class ExecutorCore;
}  // namespace detail

enum class ShutdownMode {
  drain,   // every accepted request runs and resolves
  cancel,  // requests not yet submitted to the device fail with shut_down; in-flight ones finish
};

// Per-request options. A request whose deadline passes while it waits in the queue fails with
// deadline_exceeded at its deadline and never reaches the device (a request already submitted
// runs to the end). `priority` is its level, 0 (the default) .. BatchConfig::priority_levels - 1:
// a higher level goes into the next batch before any lower one (DESIGN.md "Priorities"); a level
// the executor does not have fails with invalid_argument. A request without a deadline takes its
// level's BatchConfig::level_timeout, if any.
struct SubmitOptions {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::uint32_t priority = 0;

  static SubmitOptions at(std::chrono::steady_clock::time_point when) { return {when}; }
  template <typename Rep, typename Period>
  static SubmitOptions within(std::chrono::duration<Rep, Period> timeout) {
    return {std::chrono::steady_clock::now() +
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout)};
  }
  static SubmitOptions with_priority(std::uint32_t level) { return {.priority = level}; }
  SubmitOptions& prioritised(std::uint32_t level) & {
    priority = level;
    return *this;
  }
  SubmitOptions&& prioritised(std::uint32_t level) && {
    priority = level;
    return std::move(*this);
  }
};

namespace detail {

template <typename T>
using ResultSignature = void(std::exception_ptr, T);

// Validates and queues one request. Never throws: every failure resolves `completion`. A null
// core (a default-constructed handle) fails with shut_down.
void enqueue(ExecutorCore* core, Request&& request, const SubmitOptions& options,
             Completion&& completion) noexcept;
// The core that serves the calling thread's requests to `core`'s executor: `core` itself, or,
// for a device set with a core per member, the shard this thread keeps to (src/executor/set_shard.cpp).
const std::shared_ptr<ExecutorCore>& route(const std::shared_ptr<ExecutorCore>& core) noexcept;

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
  // One method per element-wise op of the table (gpubatch/op_table.hpp): relu(x),
  // scale(x, factor), add(a, b), sub, mul, sigmoid, tanh, swish, gelu, lerp(a, b, t) = a + t (b - a),
  // abs(x), exp(x), clamp(x, lo, hi), ...
#define GPUBATCH_HANDLE_METHOD(name, kind, arity, scalars, params, ...)                                      \
  GPUBATCH_IF_EW_##kind(template <typename... Tail> auto name(                                              \
      GPUBATCH_OPERANDS_##arity(Floats) GPUBATCH_FLOAT_PARAMS_##scalars params, Tail&&... tail) const {      \
    return call<Floats>(Request::name(GPUBATCH_MOVED_OPERANDS_##arity GPUBATCH_FLOAT_ARGS_##scalars params), \
                        std::forward<Tail>(tail)...);                                                       \
  })
  GPUBATCH_OPS(GPUBATCH_HANDLE_METHOD)
#undef GPUBATCH_HANDLE_METHOD

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

  // The synchronous call: submits `request` (batched with everyone else's) and waits for its
  // result on the calling thread, polling for up to the executor's completion_spin before it
  // sleeps. A future's waiter is woken by another thread (an OS wake-up, 20-30 us on the H200);
  // a caller that polls its own result sees it as soon as a completion thread stores it.
  // Throws the request's gpubatch::Error. (src/executor/sync_run.cpp)
  Result run(Request request, const SubmitOptions& options = {}) const;

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
    // Its shared state tells the executor when the future is let go (detail/future_state.hpp).
    std::promise<T> promise(std::allocator_arg, detail::FutureStateAllocator<char>{});
    std::future<T> future = promise.get_future();
    detail::enqueue(detail::route(core_).get(), std::move(request), options,
                    detail::Completion(std::in_place_type<std::promise<T>>, std::move(promise)));
    return future;
  }

  template <typename T, typename Token>
  auto initiate(Request&& request, const SubmitOptions& options, Token&& token) const {
    return boost::asio::async_initiate<Token, detail::ResultSignature<T>>(
        // `core` borrows this handle's pointer while the initiation runs within this call, and
        // owns one where a deferred token copied it (detail::CoreRef).
        [](auto handler, const detail::CoreRef& core, Request r, SubmitOptions o) {
          const detail::CoreRef served(detail::route(core.ref()));  // borrowed for this call
          detail::enqueue(served.get(), std::move(r), o,
                          detail::make_handler_completion<T>(std::move(handler), served));
        },
        token, detail::CoreRef(core_), std::move(request), options);
  }

  std::shared_ptr<detail::ExecutorCore> core_;
};

// Opens the devices a list names: "all" (every device Device::available() offers), or
// comma-separated device indices or name substrings, each opened with `options` (its selector
// replaced). An index may repeat: "0,0" opens device 0 twice, as two independent devices. Empty:
// the GPUBATCH_DEVICES environment variable, else one device as Device(options) opens it.
// Throws Error(invalid_config) for a malformed list, Error(no_device) for an item that matches
// no device. (src/executor/executor_on_device.cpp)
std::vector<Device> open_devices(std::string_view list, const DeviceOptions& options);
std::vector<Device> open_devices(std::string_view list = {});

class BatchExecutor {
 public:
  // Runs batches on `device` (a Vulkan Device's batch_device(), or any implementation of
  // gpubatch/batch_device.hpp). Throws
  // Error(invalid_config) when config.validate() does.
  explicit BatchExecutor(std::shared_ptr<detail::BatchDevice> device,
                         BatchConfig config = BatchConfig{});
  // Runs batches on a Vulkan device (shares its memory, kernels and pipelines).
  explicit BatchExecutor(const Device& device, BatchConfig config = BatchConfig{});
  // Runs batches on several Vulkan devices (DESIGN.md "Several devices"): each batch goes to the
  // live device with the least outstanding work in bytes; a batch on a device that is lost runs
  // once more on another; requests fail with device_lost only when every device is lost. Up to
  // max_inflight_batches batches per device are in flight. One device is exactly
  // BatchExecutor(devices[0], config). Throws Error(invalid_argument) for an empty list.
  explicit BatchExecutor(std::vector<Device> devices, BatchConfig config = BatchConfig{});
  // Opens the devices config.devices names (open_devices(); empty: GPUBATCH_DEVICES, else the
  // default device) and runs batches on them.
  explicit BatchExecutor(BatchConfig config);
  BatchExecutor(BatchConfig config, const DeviceOptions& options);
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

  // Records batches as Chrome trace events (open the file in https://ui.perfetto.dev or
  // chrome://tracing): per batch its formation, submit, device time and completion; every
  // `sample_every`-th request of a batch its queue wait. A batch is recorded just after its last
  // future resolved. stop_trace() writes what was recorded (shutdown() writes a running trace
  // after the last batch); it returns false when no trace was running or the file could not be
  // written.
  // GPUBATCH_TRACE=file.json does start_trace(file.json) when the executor is made. start_trace
  // throws Error(invalid_config) when the file cannot be created.
  void start_trace(const std::filesystem::path& path, std::uint32_t sample_every = 64);
  bool stop_trace();

 private:
  std::shared_ptr<detail::ExecutorCore> core_;
};

}  // namespace gpubatch

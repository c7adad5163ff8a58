#pragma once
// Prompt deadlines (DESIGN.md "Deadlines"): a request with a deadline keeps its completion in an
// ExpiryCell, which one party takes: the strand (to submit it, or to fail it itself) or the
// deadline watch (to fail it with deadline_exceeded at its deadline). The watch is a thread of
// its own with a heap of cells by deadline (fed by a lock-free inbox), so a request expires on
// time even while the strand is busy (submitting a large batch: on the H200 a strand packing
// 1,000,000-float requests let deadline errors arrive 65 ms late at p99) or the device is
// saturated.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpubatch/detail/completion.hpp"
#include "gpubatch/ops.hpp"

namespace gpubatch::detail {

// What an error message says about a request ("relu request (256 floats)"), kept instead of the
// text: a request that does not expire is never described.
struct RequestShape {
  Op op = Op::relu;
  std::size_t floats = 0, states = 0;
  std::uint32_t m = 0, k = 0, n = 0;
  bool operator==(const RequestShape&) const = default;
};

struct ExpiryCell {
  // The strand takes the cell (to submit the request or resolve it itself); true also when it
  // took it before. False: the watch expired it and resolved the completion.
  bool take() noexcept {
    std::uint8_t expected = kPending;
    return state.compare_exchange_strong(expected, kTaken, std::memory_order_acq_rel) ||
           expected == kTaken;
  }
  // The strand, for a request whose deadline has passed while the watch holds its cell: the
  // strand drops the request and leaves its failing to the watch. False: the watch expired it
  // first.
  bool leave() noexcept {
    std::uint8_t expected = kPending;
    return state.compare_exchange_strong(expected, kLeft, std::memory_order_acq_rel);
  }
  // The watch: true when it now owns the completion (the strand had not taken it). `was_left`:
  // the strand had left it (leave()).
  bool expire(bool* was_left = nullptr) noexcept {
    std::uint8_t expected = kPending;
    bool won = state.compare_exchange_strong(expected, kExpired, std::memory_order_acq_rel);
    if (!won && expected == kLeft) won = state.compare_exchange_strong(expected, kExpired, std::memory_order_acq_rel);
    if (was_left) *was_left = won && expected == kLeft;
    return won;
  }
  bool expired() const noexcept { return state.load(std::memory_order_acquire) == kExpired; }
  // Still the watch's to expire: nobody took it (or the strand left it to the watch).
  bool pending() const noexcept {
    const auto s = state.load(std::memory_order_acquire);
    return s == kPending || s == kLeft;
  }

  static constexpr std::uint8_t kPending = 0, kTaken = 1, kExpired = 2, kLeft = 3;
  std::atomic<std::uint8_t> state{kPending};
  // Set by DeadlineWatch::add once the watch holds the cell (it will expire it at its deadline).
  std::atomic<bool> watched{false};
  std::chrono::steady_clock::time_point deadline;
  Completion completion;
  RequestShape shape;
  // While in the watch's inbox: the next cell, and the cell's own reference (moved out when the
  // watch takes it into its heap).
  ExpiryCell* next = nullptr;
  std::shared_ptr<ExpiryCell> self;
};

// Producers hand cells over through a lock-free inbox (one compare-and-swap) and wake the thread
// only for a cell due before the time it sleeps until; the thread moves the inbox into a heap it
// alone touches. (A mutex-guarded heap cost every request with a deadline a lock shared by all
// producers.)
class DeadlineWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // `on_due` runs on the watch's thread for each cell whose deadline has come (the callee expires
  // it); `on_start` first, once, on that thread (the executor marks the thread as its own).
  // `spread(n, each)`, when given, runs each(0) ... each(n - 1) for a round of at least
  // kSpreadFrom due cells, on more threads than the watch's own (the executor: the watch's
  // helpers, ExecutorCore::spread_expiry); each(i) calls on_due for the i-th due cell.
  using Spread = std::function<void(std::size_t, const std::function<void(std::size_t)>&)>;
  // A round of due cells, told to `on_round` after it (the executor's trace draws it): the
  // earliest deadline among them, when the thread looked (so `woke - first_due` is how late the
  // round began: the OS's wake-up, or the round before it), when the last one had been failed.
  struct Round {
    Clock::time_point first_due, woke, end;
    std::size_t count = 0;
  };
  using OnRound = std::function<void(const Round&)>;
  explicit DeadlineWatch(std::function<void(ExpiryCell&)> on_due, std::function<void()> on_start = {},
                         Spread spread = {}, OnRound on_round = {})
      : state_(std::make_shared<State>()) {
    state_->on_due = std::move(on_due);
    state_->on_start = std::move(on_start);
    state_->spread = std::move(spread);
    state_->on_round = std::move(on_round);
  }
  static constexpr std::size_t kSpreadFrom = 64;
  ~DeadlineWatch() { stop(); }
  DeadlineWatch(const DeadlineWatch&) = delete;
  DeadlineWatch& operator=(const DeadlineWatch&) = delete;

  // Any thread. Starts the thread on first use (an executor whose requests have no deadlines
  // has none). Throws std::system_error when no thread can be started (the caller then relies on
  // the strand's own sweeps).
  void add(std::shared_ptr<ExpiryCell> cell) {
    State& st = *state_;
    if (!st.started.load(std::memory_order_acquire)) start();
    if (st.stopping.load(std::memory_order_relaxed)) return;  // shutdown: the strand resolves the rest
    const std::int64_t due = ticks(cell->deadline);
    ExpiryCell* raw = cell.get();
    raw->watched.store(true, std::memory_order_release);  // before it can be expired
    raw->self = std::move(cell);
    raw->next = st.inbox.load(std::memory_order_relaxed);
    while (!st.inbox.compare_exchange_weak(raw->next, raw, std::memory_order_seq_cst, std::memory_order_relaxed)) {
    }
    // Pairs with the thread's publish-then-look (loop()): it sees this cell in the inbox, or we
    // see the time it sleeps until and wake it when we are due earlier. Every kWakeEvery cells
    // wake it anyway if it sleeps, so that cells the strand takes long before their deadlines do
    // not pile up in the inbox (the thread sweeps taken cells out of its heap). Not while it is
    // awake: it looks at the inbox again before it sleeps, and the mutex is then its own (taking
    // a large inbox into the heap), so a producer that locked it waited as long.
    const std::uint64_t pushed = st.pushed.fetch_add(1, std::memory_order_relaxed) + 1;
    const std::int64_t until = st.sleeping_until.load(std::memory_order_seq_cst);
    if (due < until || (pushed % kWakeEvery == 0 && until != kAwake)) {
      std::lock_guard<std::mutex> lock(st.mutex);
      st.cv.notify_one();
    }
  }

  // Asks the thread to end (cells not yet due are dropped: their requests are the strand's to
  // resolve); no callback starts after it. May be called under the caller's locks.
  void request_stop() {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->stopping.store(true, std::memory_order_seq_cst);
    }
    state_->cv.notify_one();
  }
  // Waits for the thread, after request_stop(). On the watch's own thread (the owner destroyed
  // from a callback) it detaches instead: the thread holds its state and stops at once.
  void join() {
    std::lock_guard<std::mutex> lock(join_mutex_);
    if (!thread_.joinable()) return;
    if (thread_.get_id() == std::this_thread::get_id()) thread_.detach();
    else thread_.join();
  }
  void stop() {
    request_stop();
    join();
  }

  // Cells held: in the heap and still in the inbox; for tests.
  std::size_t size() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->heap_size + (state_->pushed.load() - state_->drained);
  }

 private:
  // A heap entry keeps its cell's deadline beside the pointer: the heap's comparisons then read
  // one contiguous array instead of a cell (a heap allocation of its own) per comparison. Expiring
  // 100,000 requests due at once (an executor on the tests' fake device, under perf on the
  // 2-core development machine) spent a third of the watch's time in those comparisons.
  struct Entry {
    std::int64_t due;
    std::shared_ptr<ExpiryCell> cell;
  };
  static bool later(const Entry& a, const Entry& b) noexcept { return a.due > b.due; }
  static std::int64_t ticks(Clock::time_point t) noexcept { return t.time_since_epoch().count(); }
  static constexpr std::int64_t kAwake = std::numeric_limits<std::int64_t>::min();
  static constexpr std::int64_t kIdle = std::numeric_limits<std::int64_t>::max();
  static constexpr std::uint64_t kWakeEvery = 4096;

  struct State {
    std::function<void(ExpiryCell&)> on_due;
    std::function<void()> on_start;
    Spread spread;
    OnRound on_round;
    std::atomic<ExpiryCell*> inbox{nullptr};
    // The deadline the thread sleeps until (kIdle: none; kAwake: it is looking, producers need
    // not wake it).
    std::atomic<std::int64_t> sleeping_until{kAwake};
    std::mutex mutex;  // for the condition variable (and size())
    std::condition_variable cv;
    std::vector<Entry> heap;  // the thread's: by deadline, earliest first
    std::size_t heap_size = 0;                      // guarded by mutex, for size()
    std::atomic<std::uint64_t> pushed{0};           // cells ever added
    std::uint64_t drained = 0;                      // cells the thread took in (guarded)
    std::size_t since_sweep = 0;
    std::atomic<bool> started{false};
    std::atomic<bool> stopping{false};

    ~State() { drop_inbox(); }
    void drop_inbox() {
      for (ExpiryCell* c = inbox.exchange(nullptr); c;) {
        ExpiryCell* next = c->next;
        std::shared_ptr<ExpiryCell> own = std::move(c->self);  // freed here
        c = next;
      }
    }
    // Moves the inbox into the heap, but for cells already taken (their requests submitted, or
    // refused at the push that followed the add): those would only wait in the heap for a sweep.
    void take_inbox() {
      for (ExpiryCell* c = inbox.exchange(nullptr, std::memory_order_seq_cst); c;) {
        ExpiryCell* next = c->next;
        c->next = nullptr;
        std::shared_ptr<ExpiryCell> own = std::move(c->self);
        ++drained;
        if (own->pending()) {
          heap.push_back({ticks(c->deadline), std::move(own)});
          std::push_heap(heap.begin(), heap.end(), later);
          ++since_sweep;
        }
        c = next;
      }
      drop_taken_if_many();
    }
    // Cells the strand took stay in the heap until their deadline; sweep them out once as many
    // were added since the last sweep as half the heap (amortised O(1) per addition; bounds the
    // heap at about twice the requests still waiting, whatever their deadlines).
    void drop_taken_if_many() {
      if (since_sweep < std::max<std::size_t>(1024, heap.size() / 2)) return;
      since_sweep = 0;
      std::erase_if(heap, [](const Entry& e) { return !e.cell->pending(); });
      std::make_heap(heap.begin(), heap.end(), later);
    }
  };

  void start() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->started.load(std::memory_order_relaxed) || state_->stopping.load()) return;
    thread_ = std::thread([state = state_] { loop(*state); });  // the thread keeps its state
    state_->started.store(true, std::memory_order_release);
  }

  static void loop(State& st) {
    if (st.on_start) st.on_start();
    std::vector<std::shared_ptr<ExpiryCell>> due;
    std::unique_lock<std::mutex> lock(st.mutex);
    while (!st.stopping.load(std::memory_order_relaxed)) {
      st.sleeping_until.store(kAwake, std::memory_order_seq_cst);
      st.take_inbox();
      const auto now = Clock::now();
      const std::int64_t now_ticks = ticks(now);
      while (!st.heap.empty() && st.heap.front().due <= now_ticks) {
        std::pop_heap(st.heap.begin(), st.heap.end(), later);
        if (st.heap.back().cell->pending()) due.push_back(std::move(st.heap.back().cell));
        st.heap.pop_back();
      }
      st.heap_size = st.heap.size();
      if (!due.empty()) {
        lock.unlock();
        run_round(st, due, now);
        due.clear();
        lock.lock();
        continue;
      }
      // Publish the time we sleep until, then look at the inbox once more: a producer that
      // pushed before the publish is seen here; one after sees the time and wakes us if earlier.
      const std::int64_t until = st.heap.empty() ? kIdle : st.heap.front().due;
      st.sleeping_until.store(until, std::memory_order_seq_cst);
      if (st.inbox.load(std::memory_order_seq_cst) != nullptr) continue;
      if (st.heap.empty()) st.cv.wait(lock);
      else st.cv.wait_until(lock, st.heap.front().cell->deadline);
    }
    st.drop_inbox();
  }

  // Fails the due cells (earliest first), on this thread or spread over more, then tells on_round.
  static void run_round(State& st, const std::vector<std::shared_ptr<ExpiryCell>>& due, Clock::time_point woke) {
    // A callback may end the owner (its last reference dropped by a handler): no more calls.
    const std::function<void(std::size_t)> each = [&](std::size_t i) {
      if (!st.stopping.load(std::memory_order_acquire)) st.on_due(*due[i]);
    };
    if (st.spread && due.size() >= kSpreadFrom) {
      st.spread(due.size(), each);
    } else {
      for (std::size_t i = 0; i < due.size(); ++i) each(i);
    }
    if (st.on_round && !st.stopping.load(std::memory_order_acquire))
      st.on_round(Round{due.front()->deadline, woke, Clock::now(), due.size()});
  }

  std::shared_ptr<State> state_;
  std::mutex join_mutex_;
  std::thread thread_;  // started under state_->mutex, joined under join_mutex_ after request_stop()
};

}  // namespace gpubatch::detail

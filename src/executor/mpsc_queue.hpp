#pragma once
// A bounded multi-producer, single-consumer queue (Vyukov / rigtorp style): a ring of slots, each
// with a sequence number that says whose turn it is, and cache-line separated head and tail.
// Producers claim a position with one CAS on the tail and publish the slot with a release store;
// the consumer never writes the tail, so producers and the consumer only meet on the slots.
//
// Any capacity >= 1 is allowed (a power of two replaces the division by a mask).
//
// Two ways to push. try_push claims a position only when its slot is free (a CAS loop: it can
// say `full`). BlockingMpscQueue::push_wait claims the next position with one atomic add whatever
// the fill, then publishes once the slot is free: under many producers a CAS loop mostly retries,
// an add never does. A claimed position must be published or the consumer waits for it forever,
// so claim() and publish() are private: only push_wait, which always publishes, uses them.
//
// The verbs are the ones the executor uses (push: try_push, push_wait, push_until; consume:
// try_consume, peek for the deadline scan; close, drained, has_claimed) plus try_pop for tests.
//
// The queue can be closed: close() sets a bit in the tail, after which every push returns
// `closed`, and the consumer learns the final number of positions ever claimed, so it can drain
// exactly what was accepted (a producer that claimed a position before the close still publishes
// it; the consumer waits for that: has_claimed()). Adds after the close still bump the tail, so the count at
// the close is kept apart.
//
// BlockingMpscQueue adds waiting for room when full (the overflow policies); the wait is a futex
// on a generation counter, on the slow path only: a push that finds room never touches it, and
// the consumer looks at one counter (after a fence) to know whether anyone waits.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

#include "executor/futex_wait.hpp"
#include "executor/thread_slice.hpp"

namespace gpubatch::detail {

inline constexpr std::size_t kCacheLine = 64;

enum class PushResult { ok, full, closed };

template <typename T>
class MpscQueue {
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "a claimed slot must always be published: T's move must not throw");
  static_assert(std::is_nothrow_destructible_v<T>);

 public:
  explicit MpscQueue(std::size_t capacity)
      : capacity_(capacity),
        pow2_(capacity != 0 && (capacity & (capacity - 1)) == 0),
        mask_(pow2_ ? capacity - 1 : 0),
        shift_(pow2_ ? static_cast<unsigned>(std::countr_zero(capacity)) : 0) {
    if (capacity == 0) throw std::invalid_argument("MpscQueue capacity must be at least 1");
    if (capacity > (std::size_t{1} << 40)) throw std::invalid_argument("MpscQueue capacity too large");
    slots_ = static_cast<Slot*>(::operator new[](sizeof(Slot) * capacity, std::align_val_t{alignof(Slot)}));
    for (std::size_t i = 0; i < capacity; ++i) new (&slots_[i]) Slot(0);
  }

  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  // Destroys the items still in the queue. No producer or consumer may be active.
  ~MpscQueue() {
    std::uint64_t head = head_.load(std::memory_order_relaxed);
    const std::uint64_t tail = claimed_end();
    for (; head != tail; ++head) {
      Slot& s = slot(head);
      if (s.seq.load(std::memory_order_acquire) == full_seq(head)) s.item()->~T();
    }
    for (std::size_t i = 0; i < capacity_; ++i) slots_[i].~Slot();
    ::operator delete[](slots_, std::align_val_t{alignof(Slot)});
  }

  // Producers (any thread). Moves the item in only when a slot was claimed, so a failed push
  // leaves `item` untouched (the caller keeps it). On success `position` is the item's position
  // (0, 1, 2, ... in push order).
  PushResult try_push(T&& item, std::uint64_t& position) noexcept {
    std::uint64_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      if (pos & kClosedBit) return PushResult::closed;
      Slot& s = slot(pos);
      const std::uint64_t seq = s.seq.load(std::memory_order_acquire);
      const auto diff = static_cast<std::int64_t>(seq - free_seq(pos));
      if (diff == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed,
                                        std::memory_order_relaxed)) {
          new (s.storage) T(std::move(item));
          s.seq.store(full_seq(pos), std::memory_order_release);
          position = pos;
          return PushResult::ok;
        }
        // pos was reloaded by the failed CAS
      } else if (diff < 0) {
        // The slot still holds the item from one lap ago: full, unless the tail moved on.
        const std::uint64_t now = tail_.load(std::memory_order_relaxed);
        if (now == pos) return PushResult::full;
        pos = now;
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }
  PushResult try_push(T&& item) noexcept {
    std::uint64_t ignored;
    return try_push(std::move(item), ignored);
  }

  // Consumer (one thread at a time). False when the next item is not (yet) published.
  bool try_pop(T& out) noexcept(std::is_nothrow_move_assignable_v<T>) {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    Slot& s = slot(head);
    if (s.seq.load(std::memory_order_acquire) != full_seq(head)) return false;
    T* p = s.item();
    out = std::move(*p);
    p->~T();
    s.seq.store(free_seq(head + capacity_), std::memory_order_release);
    head_.store(head + 1, std::memory_order_relaxed);
    return true;
  }

  // Consumer: calls f(T&&) with the next item, if one is published, then releases its slot
  // (also when f throws). Saves the move into an intermediate object.
  template <typename F>
  bool try_consume(F&& f) {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    Slot& s = slot(head);
    if (s.seq.load(std::memory_order_acquire) != full_seq(head)) return false;
    prefetch(slot(head + kPrefetchAhead));
    struct Release {
      MpscQueue* q;
      Slot* s;
      std::uint64_t head;
      ~Release() {
        s->item()->~T();
        s->seq.store(q->free_seq(head + q->capacity_), std::memory_order_release);
        q->head_.store(head + 1, std::memory_order_relaxed);
      }
    } release{this, &s, head};
    std::forward<F>(f)(std::move(*s.item()));
    return true;
  }

  // Consumer: the item at `position` (head <= position < head + capacity) when it is published,
  // else null. It stays valid (and the consumer may modify it) until the consumer pops it.
  T* peek(std::uint64_t position) noexcept {
    Slot& s = slot(position);
    return s.seq.load(std::memory_order_acquire) == full_seq(position) ? s.item() : nullptr;
  }
  std::uint64_t head_position() const noexcept { return head_.load(std::memory_order_relaxed); }

  // Consumer: the item at `position` (head <= position < head + capacity) is published.
  bool published(std::uint64_t position) const noexcept {
    return slot(position).seq.load(std::memory_order_acquire) == full_seq(position);
  }

  // Closes the queue: later pushes return `closed`. Returns the number of positions ever
  // claimed; every one of them is (or is about to be) published. Idempotent.
  std::uint64_t close() noexcept {
    const std::uint64_t old = tail_.fetch_or(kClosedBit, std::memory_order_seq_cst);
    if (!(old & kClosedBit)) closed_at_.store(old, std::memory_order_release);
    return claimed_end();
  }
  bool closed() const noexcept { return tail_.load(std::memory_order_acquire) & kClosedBit; }

  // Consumer, after close(): true when every accepted item has been popped.
  bool drained() const noexcept {
    return closed() && head_.load(std::memory_order_relaxed) == claimed_end();
  }
  // Consumer: true while some claimed position has not been popped yet (published or not).
  bool has_claimed() const noexcept { return head_.load(std::memory_order_relaxed) != claimed_end(); }

  std::size_t capacity() const noexcept { return capacity_; }
  // Approximate when producers or the consumer are active.
  std::size_t size_approx() const noexcept {
    const std::uint64_t head = head_.load(std::memory_order_acquire);
    const std::uint64_t tail = claimed_end();
    return tail > head ? static_cast<std::size_t>(std::min<std::uint64_t>(tail - head, capacity_)) : 0;
  }
  std::uint64_t pushed_approx() const noexcept { return claimed_end(); }
  std::uint64_t popped_approx() const noexcept { return head_.load(std::memory_order_relaxed); }

 private:
  template <typename>
  friend class BlockingMpscQueue;

  // Claims the next position, full or not (one atomic add). `closed`: nothing was claimed.
  // Otherwise the caller must publish(position, ...) once slot_free(position) holds.
  PushResult claim(std::uint64_t& position) noexcept {
    const std::uint64_t old = tail_.fetch_add(1, std::memory_order_relaxed);
    if (old & kClosedBit) return PushResult::closed;
    position = old;
    return PushResult::ok;
  }
  // The slot of a claimed position is free (the item one lap earlier has been popped).
  bool slot_free(std::uint64_t position) const noexcept {
    return slot(position).seq.load(std::memory_order_acquire) == free_seq(position);
  }
  template <typename... Args>
  void publish(std::uint64_t position, Args&&... args) noexcept {
    static_assert(std::is_nothrow_constructible_v<T, Args&&...>,
                  "a claimed slot must always be published: construction must not throw");
    Slot& s = slot(position);
    new (s.storage) T(std::forward<Args>(args)...);
    s.seq.store(full_seq(position), std::memory_order_release);
  }

  static constexpr std::uint64_t kClosedBit = std::uint64_t{1} << 63;
  static constexpr std::uint64_t kNotClosed = ~std::uint64_t{0};

  // Positions ever claimed: all of them while open, those claimed before the close after it.
  std::uint64_t claimed_end() const noexcept {
    const std::uint64_t tail = tail_.load(std::memory_order_acquire);
    if (!(tail & kClosedBit)) return tail;
    std::uint64_t at;
    while ((at = closed_at_.load(std::memory_order_acquire)) == kNotClosed)
      std::this_thread::yield();  // close() is between its two steps
    return at;
  }

  // The consumer asks for the lines of the slot this far ahead while it takes one: a slot's
  // lines were last written on its producer's core, and fetched one by one on demand they were
  // a fifth of the strand's time in the H100's crowd (accept_into_forming and pull, perf;
  // BENCHMARKS.md seventh session of 2026-11-27).
  static constexpr std::uint64_t kPrefetchAhead = 2;
  struct alignas(kCacheLine) Slot {
    explicit Slot(std::uint64_t s) noexcept : seq(s) {}
    std::atomic<std::uint64_t> seq;
    alignas(T) unsigned char storage[sizeof(T)];
    T* item() noexcept { return std::launder(reinterpret_cast<T*>(storage)); }
  };
  static void prefetch(const Slot& s) noexcept {
    const char* p = reinterpret_cast<const char*>(&s);
    for (std::size_t off = 0; off < sizeof(Slot); off += kCacheLine) __builtin_prefetch(p + off, 0, 3);
  }

  Slot& slot(std::uint64_t pos) const noexcept {
    return slots_[pow2_ ? (pos & mask_) : (pos % capacity_)];
  }
  // A slot's sequence says whose turn it is (rigtorp's turns): 2 * lap when free for the
  // producer of position lap * capacity + i, 2 * lap + 1 once that producer published. (Plain
  // position numbers, as in Vyukov's queue, cannot tell the two apart when the capacity is 1.)
  std::uint64_t lap(std::uint64_t pos) const noexcept {
    return pow2_ ? (pos >> shift_) : (pos / capacity_);
  }
  std::uint64_t free_seq(std::uint64_t pos) const noexcept { return 2 * lap(pos); }
  std::uint64_t full_seq(std::uint64_t pos) const noexcept { return 2 * lap(pos) + 1; }

  const std::size_t capacity_;
  const bool pow2_;
  const std::uint64_t mask_;
  const unsigned shift_;
  Slot* slots_ = nullptr;
  alignas(kCacheLine) std::atomic<std::uint64_t> tail_{0};  // producers
  alignas(kCacheLine) std::atomic<std::uint64_t> head_{0};  // consumer
  std::atomic<std::uint64_t> closed_at_{kNotClosed};        // the tail when close() came
  char pad_[kCacheLine - 2 * sizeof(std::atomic<std::uint64_t>)];
};

// MpscQueue plus waiting for room. Pushes that find room cost what MpscQueue's cost; a push that
// finds the queue full may wait (push_wait, push_until). The consumer pops with try_pop (which
// wakes waiters itself) or try_consume_quiet followed by one notify_space() per round of pops.
template <typename T>
class BlockingMpscQueue {
 public:
  explicit BlockingMpscQueue(std::size_t capacity) : q_(capacity) {}

  // The scheduler slice a producer's thread asks for while push_until waits (0, the default:
  // its own; ScopedThreadSlice). Set before producers push.
  void set_timed_wait_slice(std::chrono::microseconds slice) noexcept { timed_wait_slice_ = slice; }

  PushResult try_push(T&& item, std::uint64_t& position) noexcept {
    return q_.try_push(std::move(item), position);
  }

  // Waits while full. Returns ok or closed (closed before it claimed its position).
  PushResult push_wait(T&& item, std::uint64_t& position) {
    // Claimed, the position is ours even when the queue is full: wait for its slot (the
    // consumer drains, also after a close), then publish.
    const PushResult r = q_.claim(position);
    if (r != PushResult::ok) return r;
    if (!q_.slot_free(position)) wait_for_slot(position);
    q_.publish(position, std::move(item));
    return PushResult::ok;
  }

  // Waits while full, up to `deadline`; full when it passed with no room.
  PushResult push_until(T&& item, std::chrono::steady_clock::time_point deadline,
                        std::uint64_t& position) {
    PushResult r = q_.try_push(std::move(item), position);
    if (r != PushResult::full) return r;
    return slow_push(item, &deadline, position);
  }

  // Consumer.
  bool try_pop(T& out) {
    if (!q_.try_pop(out)) return false;
    notify_space();
    return true;
  }
  template <typename F>
  bool try_consume_quiet(F&& f) {
    return q_.try_consume(std::forward<F>(f));
  }
  // Wakes producers that wait for room, if any do. Call after a round of try_consume_quiet.
  void notify_space() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_relaxed) != 0) wake_waiters();
  }

  // Closes the queue and wakes every waiting producer: push_until returns closed; push_wait
  // already holds a position, so it publishes once the consumer (draining) frees its slot.
  std::uint64_t close() {
    const std::uint64_t n = q_.close();
    wake_waiters();
    return n;
  }

  // Consumer: the item at `position` (head_position() <= position < head + capacity) when it is
  // published, else null; the consumer may modify it until it pops it (the deadline scan).
  T* peek(std::uint64_t position) noexcept { return q_.peek(position); }
  std::uint64_t head_position() const noexcept { return q_.head_position(); }
  std::uint64_t pushed_approx() const noexcept { return q_.pushed_approx(); }
  std::uint64_t popped_approx() const noexcept { return q_.popped_approx(); }
  bool closed() const noexcept { return q_.closed(); }
  bool published(std::uint64_t position) const noexcept { return q_.published(position); }
  bool drained() const noexcept { return q_.drained(); }
  bool has_claimed() const noexcept { return q_.has_claimed(); }
  std::size_t size_approx() const noexcept { return q_.size_approx(); }
  std::size_t capacity() const noexcept { return q_.capacity(); }
  std::size_t waiters() const noexcept { return waiters_.load(std::memory_order_relaxed); }

 private:
  // Waiting: a producer counts itself in waiters_, reads the space_ generation, then looks at
  // the queue; the consumer frees slots, fences, and bumps space_ (and wakes) only when someone
  // waits. A producer that saw no room either sees the bump in its futex wait (which returns at
  // once when space_ moved on) or the freed slot. No mutex: a waiter whose time is up returns
  // without queueing behind the others for one.
  void wake_waiters() noexcept {
    space_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(space_);
  }

  void wait_for_slot(std::uint64_t position) noexcept {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (;;) {
      const std::uint32_t seen = space_.load(std::memory_order_seq_cst);
      if (q_.slot_free(position)) break;
      futex_wait_until(space_, seen, nullptr);
    }
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }

  PushResult slow_push(T& item, const std::chrono::steady_clock::time_point* deadline,
                       std::uint64_t& position) noexcept {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    ScopedTightTimer tight;  // the caller's timed sleeps end at the deadline, not 50 us after
    // ... and the thread, woken then, runs soon after, not a busy core's slice later.
    ScopedThreadSlice slice(deadline ? timed_wait_slice_ : std::chrono::microseconds(0));
    PushResult r;
    for (;;) {
      const std::uint32_t seen = space_.load(std::memory_order_seq_cst);
      r = q_.try_push(std::move(item), position);
      if (r != PushResult::full) break;
      if (deadline && std::chrono::steady_clock::now() >= *deadline) break;
      futex_wait_until(space_, seen, deadline);
    }
    waiters_.fetch_sub(1, std::memory_order_relaxed);
    return r;
  }

  MpscQueue<T> q_;
  alignas(kCacheLine) std::atomic<std::size_t> waiters_{0};
  std::atomic<std::uint32_t> space_{0};  // bumped when slots were freed for waiters, or on close
  std::chrono::microseconds timed_wait_slice_{0};
};

}  // namespace gpubatch::detail

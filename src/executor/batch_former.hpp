#pragma once
// Batch formation as a pure unit: what the strand holds, and when to flush it. No threads, no
// clock (time is passed in), no device: tests drive it with a fake clock
// (tests/unit/executor/batch_former_test.cpp). The strand (executor.cpp) pulls requests from the
// queues, offers them here, asks decide(now) for a flush reason or a time to look again, and
// takes the next batch out with take().
//
//   offer(item, now)        hold a request (at its priority level; each level keeps FIFO order)
//   decide(now, input)      a flush reason, or the time at which one may become due
//   take(out, now)          move the next batch into `out`: aged requests first (up to a quarter
//                           of it), then higher levels before lower ones, up to the count limit
//                           and max_batch_bytes (or level 0 alone)
//   take_upper(out)         move the requests of levels above 0 only (an express batch)
//   remove_if(drop)         the deadline and cancellation sweeps
//
// Priorities (DESIGN.md "Priorities"): each level holds up to max_batch_size requests, so a
// higher level is always in view and goes into the next batch before any lower one. A request
// that has waited `aging` goes first whatever its level, in up to a quarter of each batch: that
// bounds a lower level's wait under a steady stream of higher ones (to `aging` plus the batches
// it takes to serve the aged requests ahead of it, a quarter batch each) without letting an
// overloaded executor, where everything has aged, forget the levels.
//
// Item needs: `enqueued`, `deadline` (time points), `bytes`, `priority` (its level), and moves;
// it may have `in_place`, the part of its bytes read and written in place (weight_of below).
// The former's bytes (bytes(), the limits) are weights.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "gpubatch/config.hpp"

namespace gpubatch::detail {

enum class FlushReason : std::uint8_t { size, deadline, idle, shutdown };

// A byte read or written in place (a caller's HostBuffer) weighs an eighth of one copied through
// staging against max_batch_bytes: it takes no staging memory and no CPU copy, and what it does
// cost, the device's time, comes cheaper per byte in larger batches. Each submission costs the
// GPU about 20 us of its own (bench/probes/duplex on the H200: relu from host to host memory over
// fresh 4 MiB regions 36.9 GB/s each way in one submission, 31.5 in one a region), and a larger
// dispatch carries more (64 MiB: 41), and with the 8 MiB limit a batch of 1,048,576-float
// HostBuffer requests held one request. With 64 MiB of them a batch, 16 callers
// from HostBuffers moved 33.9-35.5 GB/s against 30.1-31.7 at 1,048,576 floats and 34.8-35.1
// against 32.2-32.4 at 65,536 (H200, three rounds; BENCHMARKS.md twenty-first session).
inline constexpr std::size_t kInPlaceShare = 8;

template <typename Item>
std::size_t weight_of(const Item& item) noexcept {
  if constexpr (requires { item.in_place; }) return item.bytes - item.in_place + item.in_place / kInPlaceShare;
  else return item.bytes;
}

template <typename Item, typename Clock = std::chrono::steady_clock>
class BatchFormer {
 public:
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  struct Limits {
    std::size_t max_batch_size = 4096;
    std::size_t max_batch_bytes = std::size_t{512} << 20;
    duration max_wait = std::chrono::milliseconds(5);
    FlushPolicy policy = FlushPolicy::adaptive;
    std::size_t levels = 1;
    duration aging = std::chrono::milliseconds(50);
  };

  // What the strand knows beside the held requests.
  struct Input {
    bool closing = false;          // shutdown (drain) asked: flush what is held
    bool blocked_on_slot = false;  // every in-flight slot is taken: no timer for max_wait
    // The device time the next batch is predicted to take (0: unknown). A held request whose
    // deadline minus this has come is flushed early rather than left to expire in the former.
    duration predicted_device_time{0};
  };

  struct Decision {
    std::optional<FlushReason> reason;
    time_point wake_at = time_point::max();  // without a reason: look again then
  };

  explicit BatchFormer(Limits limits)
      : limits_(limits), levels_(std::max<std::size_t>(1, limits.levels)), byte_limit_(limits.max_batch_bytes) {
    levels_[0].items.reserve(std::min<std::size_t>(limits_.max_batch_size, 4096));
  }

  // A tighter byte limit than max_batch_bytes for the batches from now on (the latency target's
  // budget: CostModel::byte_budget); max_batch_bytes again when `bytes` is larger.
  void set_byte_limit(std::size_t bytes) noexcept {
    byte_limit_ = std::min(bytes, limits_.max_batch_bytes);
  }

  // A lower count limit than max_batch_size for the batches from now on (the adaptive policy's
  // latency_batch_size until saturated: count_cap.hpp); max_batch_size again when `n` is larger.
  void set_count_limit(std::size_t n) noexcept {
    count_limit_ = std::max<std::size_t>(1, std::min(n, limits_.max_batch_size));
  }
  std::size_t count_limit() const noexcept { return count_limit_; }

  // Whether level `level` takes another request (the strand stops pulling that level's queue).
  bool wants(std::size_t level) const noexcept {
    return levels_[level].size() < count_limit_ && bytes_ <= byte_limit_;
  }
  // Every level takes more: a pull that stopped with this true emptied every queue.
  bool wants_every_level() const noexcept {
    for (std::size_t l = 0; l < levels_.size(); ++l)
      if (!wants(l)) return false;
    return true;
  }

  void offer(Item&& item, time_point now) {
    (void)now;
    bytes_ += weight_of(item);
    earliest_deadline_ = std::min(earliest_deadline_, item.deadline);
    ++count_;
    Level& l = levels_[level_of(item)];
    l.bytes += weight_of(item);
    l.items.push_back(std::move(item));
  }

  std::size_t size() const noexcept { return count_; }
  // Held at levels above 0.
  std::size_t upper_size() const noexcept { return size_from(1); }
  // Held at `level` and above.
  std::size_t size_from(std::size_t level) const noexcept {
    std::size_t n = 0;
    for (std::size_t l = level; l < levels_.size(); ++l) n += levels_[l].size();
    return n;
  }
  bool empty() const noexcept { return count_ == 0; }
  std::size_t bytes() const noexcept { return bytes_; }
  time_point earliest_deadline() const noexcept { return earliest_deadline_; }
  // More than one batch's worth is held (by count, or by bytes with at least two requests).
  bool full() const noexcept {
    return count_ >= count_limit_ || (count_ > 1 && bytes_ > byte_limit_);
  }
  // The earliest arrival among the held requests (time_point::max() when empty).
  time_point oldest() const noexcept {
    auto t = time_point::max();
    for (const Level& l : levels_)
      if (l.size()) t = std::min(t, l.front().enqueued);
    return t;
  }

  // The earliest arrival among the requests held above level 0 (time_point::max() when none).
  time_point oldest_upper() const noexcept {
    auto t = time_point::max();
    for (std::size_t l = 1; l < levels_.size(); ++l)
      if (levels_[l].size()) t = std::min(t, levels_[l].front().enqueued);
    return t;
  }

  Decision decide(time_point now, const Input& in) const {
    Decision d;
    if (empty()) return d;
    if (full()) return {FlushReason::size, now};
    if (in.closing) return {FlushReason::shutdown, now};
    const time_point due = oldest() + limits_.max_wait;
    if (now >= due) return {FlushReason::deadline, now};
    if (in.predicted_device_time > duration::zero() &&
        earliest_deadline_ != time_point::max() &&
        now + in.predicted_device_time >= earliest_deadline_)
      return {FlushReason::deadline, now};
    if (limits_.policy == FlushPolicy::adaptive) return {FlushReason::idle, now};
    if (in.blocked_on_slot) return d;  // a freed slot wakes the strand
    d.wake_at = due;
    if (in.predicted_device_time > duration::zero() && earliest_deadline_ != time_point::max())
      d.wake_at = std::min(d.wake_at, earliest_deadline_ - in.predicted_device_time);
    return d;
  }

  // Moves the next batch into `out` (cleared first): requests that have waited `aging` first
  // (oldest level front first, up to a quarter of the batch), then levels from the highest down, each in arrival order; stops at
  // the count limit (max_batch_size or set_count_limit), or before the request that would take the batch past max_batch_bytes (a
  // request larger than that goes alone). `level0_only`: the levels above 0 stay held (they wait
  // for the executor's express batch; DESIGN.md "Priorities").
  void take(std::vector<Item>& out, time_point now, bool level0_only = false) {
    out.clear();
    // The common case: the batch is all of level 0, in arrival order (one level; or the levels
    // above are empty, or stay held for the express batch), and it fits: handed over whole.
    if ((level0_only || upper_size() == 0) && take_whole_level0(out)) return;
    const std::size_t aged_quota = std::max<std::size_t>(1, count_limit_ / 4);
    std::size_t out_bytes = 0;
    bool stop = false;
    auto take_from = [&](Level& l, bool aged_only) {
      while (!stop && l.size()) {
        const Item& it = l.front();
        if (aged_only && (now - it.enqueued < limits_.aging || out.size() >= aged_quota)) return;
        stop = !move_front(l, out, out_bytes);
      }
    };
    // Aged requests take at most a quarter of the batch: enough to bound a lower level's wait,
    // not so much that an overloaded executor, where everything has aged, serves by age alone and
    // a higher level waits behind the backlog (seen on lavapipe at saturation: priority 1 waited
    // as long as priority 0 until the share was bounded).
    for (;;) {  // aged requests, oldest level front first
      if (out.size() >= aged_quota) break;
      Level* oldest_level = nullptr;
      for (Level& l : levels_)
        if (l.size() && (!level0_only || &l == &levels_[0]) && now - l.front().enqueued >= limits_.aging &&
            (!oldest_level || l.front().enqueued < oldest_level->front().enqueued))
          oldest_level = &l;
      if (!oldest_level || stop) break;
      take_from(*oldest_level, true);
    }
    for (std::size_t i = level0_only ? 1 : levels_.size(); i-- > 0 && !stop;) take_from(levels_[i], false);
    for (Level& l : levels_) l.compact();
    recompute_deadline();
  }

  // Level 0 whole into `out` (empty) when it fits the batch by count and bytes (a lone request
  // larger than the byte limit too), without a move each: false when it does not fit. On the H100,
  // 16 threads of 256-float relu, moving a full batch's 4,096 requests one by one was a fifth of
  // the strand's time (perf, 2026-11-25); with priority levels every regular batch moved them so
  // until the twelfth session of 2026-11-28. Aged requests of level 0 are at its front already.
  bool take_whole_level0(std::vector<Item>& out) {
    Level& l = levels_[0];
    if (l.size() == 0 || l.size() > count_limit_ || (l.bytes > byte_limit_ && l.size() != 1)) return false;
    if (l.head != 0) l.items.erase(l.items.begin(), l.items.begin() + static_cast<std::ptrdiff_t>(l.head));
    l.head = 0;
    out.swap(l.items);
    // What came back may be small (an express batch's vector, or a new batch's): the level
    // grows to as many again without reallocating and moving them on the way.
    l.items.reserve(out.size());
    count_ -= out.size();
    bytes_ -= l.bytes;
    l.bytes = 0;
    if (count_ == 0) earliest_deadline_ = time_point::max();
    else recompute_deadline();
    return true;
  }

  // Moves the requests of levels above 0 into `out` (cleared first), the highest level first,
  // each in arrival order, up to max_batch_size and the byte limit (a request larger than that
  // goes alone). No aged request of level 0 joins: such a batch (the executor's express batch,
  // DESIGN.md "Priorities") has a slot of its own, so level 0's wait stays bounded by the
  // batches take() forms.
  void take_upper(std::vector<Item>& out) {
    out.clear();
    std::size_t out_bytes = 0;
    bool full = false;
    for (std::size_t i = levels_.size(); i-- > 1 && !full;) {
      Level& l = levels_[i];
      while (!full && l.size()) full = !move_front(l, out, out_bytes);
      l.compact();
    }
    recompute_deadline();
  }

  // Removes every held request for which drop(item) returns true (drop resolves it), keeping the
  // others in order.
  template <typename Drop>
  void remove_if(Drop&& drop) {
    count_ = 0;
    bytes_ = 0;
    for (Level& l : levels_) {
      std::size_t w = l.head;
      for (std::size_t r = l.head; r < l.items.size(); ++r) {
        Item& it = l.items[r];
        if (drop(it)) continue;
        if (w != r) l.items[w] = std::move(it);
        ++w;
      }
      l.items.erase(l.items.begin() + static_cast<std::ptrdiff_t>(w), l.items.end());
      l.compact();
      count_ += l.size();
      l.bytes = 0;
      for (std::size_t r = l.head; r < l.items.size(); ++r) l.bytes += weight_of(l.items[r]);
      bytes_ += l.bytes;
    }
    recompute_deadline();
  }

  template <typename F>
  void for_each(F&& f) {
    for (Level& l : levels_)
      for (std::size_t r = l.head; r < l.items.size(); ++r) f(l.items[r]);
  }

  template <typename F>
  bool any_of(F&& f) const {
    for (const Level& l : levels_)
      for (std::size_t r = l.head; r < l.items.size(); ++r)
        if (f(l.items[r])) return true;
    return false;
  }

  void clear() {
    for (Level& l : levels_) {
      l.items.clear();
      l.head = 0;
      l.bytes = 0;
    }
    count_ = 0;
    bytes_ = 0;
    earliest_deadline_ = time_point::max();
  }

 private:
  // One level's requests in arrival order: items[head, size()) are held (taken ones are dropped
  // from the front lazily, so that taking part of a level moves nothing else).
  struct Level {
    std::vector<Item> items;
    std::size_t head = 0;
    std::size_t bytes = 0;  // of the held items
    std::size_t size() const noexcept { return items.size() - head; }
    Item& front() noexcept { return items[head]; }
    const Item& front() const noexcept { return items[head]; }
    void compact() {
      if (head == items.size()) {
        items.clear();
        head = 0;
      } else if (head >= 64 && head * 2 >= items.size()) {
        items.erase(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(head));
        head = 0;
      }
    }
  };

  // Moves `l`'s front into the batch `out` (holding `out_bytes`) unless that would pass
  // max_batch_size or the byte limit (a request larger than the limit still goes alone, first);
  // false when it did not fit: the batch is full.
  bool move_front(Level& l, std::vector<Item>& out, std::size_t& out_bytes) {
    Item& it = l.front();
    const std::size_t weight = weight_of(it);
    if (out.size() >= count_limit_ || (!out.empty() && out_bytes + weight > byte_limit_)) return false;
    out_bytes += weight;
    bytes_ -= weight;
    l.bytes -= weight;
    --count_;
    out.push_back(std::move(it));
    ++l.head;
    return true;
  }

  std::size_t level_of(const Item& item) const noexcept {
    return std::min<std::size_t>(item.priority, levels_.size() - 1);
  }
  void recompute_deadline() {
    earliest_deadline_ = time_point::max();
    for (const Level& l : levels_)
      for (std::size_t r = l.head; r < l.items.size(); ++r)
        earliest_deadline_ = std::min(earliest_deadline_, l.items[r].deadline);
  }

  Limits limits_;
  std::vector<Level> levels_;
  std::size_t byte_limit_;
  std::size_t count_limit_ = limits_.max_batch_size;
  std::size_t count_ = 0;
  std::size_t bytes_ = 0;
  time_point earliest_deadline_ = time_point::max();
};

}  // namespace gpubatch::detail

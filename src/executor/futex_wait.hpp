#pragma once
// Sleeping on a 32-bit atomic until it changes, up to an absolute steady_clock instant (Linux
// futex, FUTEX_WAIT_BITSET: its timeout is absolute on CLOCK_MONOTONIC, which steady_clock is).
// C++20's atomic::wait has no timeout, and a condition variable makes every waiter that wakes
// take its mutex again, one after another, before it can even see that its time is up
// (BlockingMpscQueue, the callers that wait for room: docs/DESIGN.md "Overflow").
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

namespace gpubatch::detail {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "the futex word is the atomic's own storage");

// Returns when `word` no longer holds `expected`, after a wake, once `until` (if any) has passed,
// or spuriously: callers re-check their condition in a loop.
inline void futex_wait_until(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                             const std::chrono::steady_clock::time_point* until) noexcept {
  timespec ts{};
  const timespec* timeout = nullptr;
  if (until != nullptr) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until->time_since_epoch()).count();
    ts.tv_sec = ns <= 0 ? 0 : static_cast<time_t>(ns / 1'000'000'000);
    ts.tv_nsec = ns <= 0 ? 0 : static_cast<long>(ns % 1'000'000'000);
    timeout = &ts;
  }
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
            expected, timeout, nullptr, FUTEX_BITSET_MATCH_ANY);
}

// Wakes every thread in futex_wait_until on `word`.
inline void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX,
            nullptr, nullptr, 0);
}

// For the scope, the calling thread's timer slack is 1 ns (its timed sleeps end on time, not up
// to the default 50 us late); the slack it had is restored after. For a caller's thread that waits
// until an instant the library promised (block_for's block_timeout).
class ScopedTightTimer {
 public:
  ScopedTightTimer() noexcept : old_(::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) {
    if (old_ > 1) ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  }
  ~ScopedTightTimer() {
    if (old_ > 1) ::prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_), 0UL, 0UL, 0UL);
  }
  ScopedTightTimer(const ScopedTightTimer&) = delete;
  ScopedTightTimer& operator=(const ScopedTightTimer&) = delete;

 private:
  long old_;
};

}  // namespace gpubatch::detail

#pragma once
// Asking Linux's EEVDF scheduler (kernel 6.12 or later) for a shorter slice for the calling
// thread: sched_setattr's sched_runtime, which for a fair (SCHED_OTHER / SCHED_BATCH) thread is a
// request size, clamped by the kernel to 0.1 .. 100 ms. A thread's virtual deadline is its
// eligible time plus its slice over its weight, so a thread with a short slice that wakes with
// time owed to it runs before threads that have used their turn (and may preempt one), while its
// weight, its share of the CPU, is unchanged: no privilege is needed, unlike a negative nice.
// glibc has no wrapper: the system calls are made directly.
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace gpubatch::detail {

// The kernel's struct sched_attr (include/uapi/linux/sched/types.h), first version (48 bytes)
// plus the utilisation clamps.
struct SchedAttr {
  std::uint32_t size = sizeof(SchedAttr);
  std::uint32_t sched_policy = 0;
  std::uint64_t sched_flags = 0;
  std::int32_t sched_nice = 0;
  std::uint32_t sched_priority = 0;
  std::uint64_t sched_runtime = 0;
  std::uint64_t sched_deadline = 0;
  std::uint64_t sched_period = 0;
  std::uint32_t sched_util_min = 0;
  std::uint32_t sched_util_max = 0;
};

enum class SliceOutcome {
  applied,      // the thread now has the slice asked for
  not_fair,     // the thread runs under a real-time or deadline policy: left alone
  refused,      // sched_setattr failed (errno says why)
  unsupported,  // accepted but not kept: a kernel before 6.12 (no custom slices)
};

// A thread's fair-class slice in ns (sched_getattr's sched_runtime), or -1: the calling thread's
// by default, else the thread `tid` of this process.
inline long long thread_slice_ns(pid_t tid = 0) noexcept {
  SchedAttr a;
  if (::syscall(SYS_sched_getattr, tid, &a, sizeof a, 0) != 0) return -1;
  return static_cast<long long>(a.sched_runtime);
}

// SCHED_OTHER, SCHED_BATCH and SCHED_IDLE: the policies whose slice sched_runtime sets.
inline bool fair_policy(std::uint32_t policy) noexcept { return policy == 0 || policy == 3 || policy == 5; }

// Asks for `slice` for the calling thread, keeping its policy and nice value.
inline SliceOutcome request_thread_slice(std::chrono::microseconds slice) noexcept {
  SchedAttr a;
  if (::syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) != 0) return SliceOutcome::refused;
  if (!fair_policy(a.sched_policy)) return SliceOutcome::not_fair;
  const auto want = static_cast<std::uint64_t>(std::chrono::nanoseconds(slice).count());
  a.size = sizeof a;
  a.sched_flags = 0;
  a.sched_runtime = want;
  a.sched_deadline = a.sched_period = 0;
  a.sched_util_min = a.sched_util_max = 0;
  if (::syscall(SYS_sched_setattr, 0, &a, 0) != 0) return SliceOutcome::refused;
  return thread_slice_ns() == static_cast<long long>(want) ? SliceOutcome::applied
                                                           : SliceOutcome::unsupported;
}

// For the scope, the calling thread asks for `slice` (0: leaves it alone; Linux 6.12+), and
// gets back the slice it had, of the same length (sched_getattr reports the length, not whether
// it was the system's default, so the thread leaves with that length asked for). For a caller's
// thread that waits until an instant the library promised (block_for's block_timeout): once its
// time is up it must run at once, and with the system's slice (2.8-3 ms on the H200 VMs, 16
// CPUs) a thread woken among busy callers' threads waited up to that long for its turn. Two
// system calls going in, one coming out, on a wait that is already slow. Policies other than
// the fair ones are left alone, as request_thread_slice does.
class ScopedThreadSlice {
 public:
  explicit ScopedThreadSlice(std::chrono::microseconds slice) noexcept {
    if (slice.count() <= 0) return;
    if (::syscall(SYS_sched_getattr, 0, &old_, sizeof old_, 0) != 0 || !fair_policy(old_.sched_policy)) return;
    const auto want = static_cast<std::uint64_t>(std::chrono::nanoseconds(slice).count());
    if (old_.sched_runtime == want) return;
    applied_ = set(want);
  }
  ~ScopedThreadSlice() {
    if (applied_) set(old_.sched_runtime);
  }
  ScopedThreadSlice(const ScopedThreadSlice&) = delete;
  ScopedThreadSlice& operator=(const ScopedThreadSlice&) = delete;

  bool applied() const noexcept { return applied_; }

 private:
  // The thread's policy, nice value and reset-on-fork flag as they were; only the slice changes
  // (utilisation clamps are left as they are without their flags).
  bool set(std::uint64_t runtime) const noexcept {
    constexpr std::uint64_t kResetOnFork = 0x01;  // SCHED_FLAG_RESET_ON_FORK
    SchedAttr a = old_;
    a.size = sizeof a;
    a.sched_flags = old_.sched_flags & kResetOnFork;
    a.sched_runtime = runtime;
    a.sched_deadline = a.sched_period = 0;
    a.sched_util_min = a.sched_util_max = 0;
    return ::syscall(SYS_sched_setattr, 0, &a, 0) == 0;
  }

  SchedAttr old_{};
  bool applied_ = false;
};

}  // namespace gpubatch::detail

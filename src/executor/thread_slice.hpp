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

// Asks for `slice` for the calling thread, keeping its policy and nice value.
inline SliceOutcome request_thread_slice(std::chrono::microseconds slice) noexcept {
  SchedAttr a;
  if (::syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) != 0) return SliceOutcome::refused;
  constexpr std::uint32_t kOther = 0, kBatch = 3, kIdle = 5;  // SCHED_OTHER, SCHED_BATCH, SCHED_IDLE
  if (a.sched_policy != kOther && a.sched_policy != kBatch && a.sched_policy != kIdle)
    return SliceOutcome::not_fair;
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

}  // namespace gpubatch::detail

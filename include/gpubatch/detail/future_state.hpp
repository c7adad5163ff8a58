#pragma once
// Where a BatchedGpuHandle's std::future keeps its shared state: allocated through this
// allocator, so that the executor can tell whether a caller still holds the last future it
// completed inside the call (BatchConfig::lone_future_waits, src/executor/future_state.cpp).
//
// Why: a call that waits for its own lone batch returns a ready future. A caller that sends a
// burst of futures and holds them would make every call of the burst find the executor idle
// again and wait for its own round trip: the burst would run one request at a time (on the H200,
// one thread keeping 64 in flight: 56 k requests/s against 450 k). A lone caller takes its result
// and lets the future go before its next call; a burst holds it. So a thread's call waits only
// when the future of its previous waiting call has been destroyed, which the deallocation of its
// shared state tells.
#include <cstddef>
#include <new>

namespace gpubatch::detail {

// Allocate `bytes` (at most 16-byte alignment) and note the block as this thread's newest future
// state; free it, and if it was the state its thread's last waiting call completed, note that the
// caller has let it go. Both defined in src/executor/future_state.cpp.
void* allocate_future_state(std::size_t bytes);
void free_future_state(void* p) noexcept;

template <typename T>
struct FutureStateAllocator {
  using value_type = T;
  FutureStateAllocator() noexcept = default;
  template <typename U>
  FutureStateAllocator(const FutureStateAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= 16, "future states are allocated 16-byte aligned");
    if (n > static_cast<std::size_t>(-1) / sizeof(T) - 16) throw std::bad_array_new_length();
    return static_cast<T*>(allocate_future_state(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t) noexcept { free_future_state(p); }
  template <typename U>
  bool operator==(const FutureStateAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace gpubatch::detail

// The shared states of BatchedGpuHandle's futures (include/gpubatch/detail/future_state.hpp), and
// the one fact the executor reads from them: whether this thread's last future that was completed
// inside its call (lone_future_waits) is still held by the caller.
//
// Each block carries a 16-byte header with the allocating thread's slot. A thread's slot holds
// the address of the state its last waiting call completed, or null once that state was freed
// (its future destroyed, wherever that happened). 256 slots, a thread's chosen once: two threads
// that share one mostly see "still held" when it is not, so a call does not wait that could have;
// only when both find it empty at once can one of them later wait while it holds a future (a slot
// is cleared only by the state it names). Either costs one round trip, never a result.
#include <atomic>
#include <cstdint>
#include <new>

#include "executor/executor_core.hpp"
#include "gpubatch/detail/future_state.hpp"

namespace gpubatch::detail {
namespace {

constexpr std::size_t kSlots = 256;
constexpr std::size_t kHeader = 16;
std::atomic<const void*> g_waited[kSlots];
std::atomic<std::uint32_t> g_next_slot{0};

std::uint32_t my_slot() noexcept {
  thread_local const std::uint32_t slot = g_next_slot.fetch_add(1, std::memory_order_relaxed) % kSlots;
  return slot;
}

thread_local const void* tl_newest_state = nullptr;

}  // namespace

void* allocate_future_state(std::size_t bytes) {
  auto* block = static_cast<unsigned char*>(::operator new(bytes + kHeader));
  *reinterpret_cast<std::uint32_t*>(block) = my_slot();
  void* state = block + kHeader;
  tl_newest_state = state;
  return state;
}

void free_future_state(void* p) noexcept {
  unsigned char* block = static_cast<unsigned char*>(p) - kHeader;
  std::atomic<const void*>& slot = g_waited[*reinterpret_cast<std::uint32_t*>(block)];
  const void* expected = p;
  if (slot.load(std::memory_order_relaxed) == p)
    slot.compare_exchange_strong(expected, nullptr, std::memory_order_release, std::memory_order_relaxed);
  ::operator delete(block);
}

bool last_waited_future_released() noexcept {
  return g_waited[my_slot()].load(std::memory_order_acquire) == nullptr;
}

void note_waited_future() noexcept {
  if (tl_newest_state != nullptr) g_waited[my_slot()].store(tl_newest_state, std::memory_order_relaxed);
}

}  // namespace gpubatch::detail

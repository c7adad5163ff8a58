#pragma once
// A free list for blocks of one size that are allocated on one set of threads and freed on
// another: the deadline's ExpiryCell (with its shared_ptr control block) is made on the caller's
// thread and freed on the strand's, the deadline watch's or a completion thread; a completion
// handler's state (HandlerImpl, when the handler has no allocator of its own) is made on the
// caller's thread and freed on a completion thread. Through glibc's malloc every such free took
// the caller's arena lock against the caller's own next allocation: on the H200, with 16 senders
// putting every request on a 2 ms deadline at 2 M/s, the strand, the watch and the completion
// threads spent 40-90 % of their sleeps waiting for that lock, and the senders fell 330-410 ms
// behind their schedule (with jemalloc preloaded: 32 us-3 ms; BENCHMARKS.md, twenty-fifth session).
//
// A thread gathers the blocks it frees and hands them to one lock-free stack 64 at a time (one
// compare-and-swap pushes the chain); a thread that allocates serves itself from its own list,
// then from what it freed itself, then takes the whole shared stack at once (an exchange), and
// falls back to operator new when all are empty. Push and take-all only, so no ABA: a block never
// leaves the shared stack alone. A thread's lists go back onto the shared stack when it ends; up
// to 63 blocks a thread freed wait in its hands until then or until its next frees or
// allocations. The pool keeps at most CapBytes of blocks (16 MiB by default: some 130,000
// deadline cells of 128 bytes, thirty times what 2 M requests/s on 2 ms deadlines hold at once);
// past that a freed block goes back to the system, so threads that took the shared stack and
// then went quiet cannot make it grow without bound. Under AddressSanitizer every block is new'd
// and deleted, so that a block used after its free is still caught.
#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace gpubatch::detail {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kPoolBlocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kPoolBlocks = false;
#else
inline constexpr bool kPoolBlocks = true;
#endif
#else
inline constexpr bool kPoolBlocks = true;
#endif

template <std::size_t Size, std::size_t Align, std::size_t CapBytes = std::size_t{16} << 20>
class BlockPool {
  struct Node {
    Node* next;
  };
  static_assert(Size >= sizeof(Node) && Align >= alignof(Node));

 public:
  // A thread's frees reach the shared stack this many at a time (one compare-and-swap for them
  // all, not one for each: a completion thread frees a batch's handler states in a row).
  static constexpr std::size_t kBatch = 64;
  static constexpr std::size_t kCap = CapBytes / Size;

  static void* allocate() {
    if constexpr (kPoolBlocks) {
      Local& local = local_;
      if (local.head == nullptr) local.head = local.take_freed();
      if (local.head == nullptr) local.head = shared_.exchange(nullptr, std::memory_order_acquire);
      if (Node* n = local.head) {
        local.head = n->next;
        return n;
      }
      void* block = ::operator new(Size, std::align_val_t{Align});
      made_.fetch_add(1, std::memory_order_relaxed);
      return block;
    }
    return ::operator new(Size, std::align_val_t{Align});
  }

  static void deallocate(void* block) noexcept {
    if constexpr (kPoolBlocks) {
      if (made_.load(std::memory_order_relaxed) <= kCap) {
        local_.free(::new (block) Node{nullptr});
        return;
      }
      made_.fetch_sub(1, std::memory_order_relaxed);
    }
    ::operator delete(block, std::align_val_t{Align});
  }

  // Blocks the pool made and has not given back (live, on the shared stack, or in threads' lists).
  static std::size_t made() noexcept { return made_.load(std::memory_order_relaxed); }

  // Blocks on the shared stack now (a test's look; walks it, so not while others push).
  static std::size_t shared_count_for_test() noexcept {
    std::size_t n = 0;
    for (Node* p = shared_.load(std::memory_order_acquire); p; p = p->next) ++n;
    return n;
  }

 private:
  static void push_chain(Node* first, Node* last) noexcept {
    last->next = shared_.load(std::memory_order_relaxed);
    while (!shared_.compare_exchange_weak(last->next, first, std::memory_order_release,
                                          std::memory_order_relaxed)) {
    }
  }

  // A thread's own lists: `head` serves its allocations; `freed` gathers its frees, handed to
  // the shared stack kBatch at a time (or taken back by this thread's next allocation when
  // `head` is empty). Both go back when the thread ends, emptied, so that a block allocated later
  // in the thread's teardown is taken afresh, never from a list handed back.
  struct Local {
    Node* head = nullptr;
    Node* freed = nullptr;
    Node* freed_last = nullptr;
    std::size_t freed_count = 0;

    void free(Node* n) noexcept {
      n->next = freed;
      if (freed == nullptr) freed_last = n;
      freed = n;
      if (++freed_count < kBatch) return;
      Node* last = freed_last;
      push_chain(take_freed(), last);
    }
    Node* take_freed() noexcept {
      freed_last = nullptr;
      freed_count = 0;
      return std::exchange(freed, nullptr);
    }
    ~Local() {
      for (Node* first : {std::exchange(head, nullptr), take_freed()}) {
        if (first == nullptr) continue;
        Node* last = first;
        while (last->next) last = last->next;
        push_chain(first, last);
      }
    }
  };

  static inline std::atomic<Node*> shared_{nullptr};
  static inline std::atomic<std::size_t> made_{0};
  static inline thread_local Local local_;
};

// A std allocator over BlockPool for single objects (std::allocate_shared's one block); arrays
// go to std::allocator.
template <typename T>
struct PooledAllocator {
  using value_type = T;
  using Pool = BlockPool<sizeof(T), (alignof(T) < alignof(void*) ? alignof(void*) : alignof(T))>;
  PooledAllocator() noexcept = default;
  template <typename U>
  PooledAllocator(const PooledAllocator<U>&) noexcept {}
  // In place of a std::allocator (a handler's associated allocator when it names none).
  template <typename U>
  explicit PooledAllocator(const std::allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n != 1) return std::allocator<T>{}.allocate(n);
    return static_cast<T*>(Pool::allocate());
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n != 1) return std::allocator<T>{}.deallocate(p, n);
    Pool::deallocate(p);
  }
  template <typename U>
  bool operator==(const PooledAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace gpubatch::detail

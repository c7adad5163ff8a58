#pragma once
// Helpers for the completion-handler tests: a counting allocator (bound with
// boost::asio::bind_allocator) and the ErrorCode an exception_ptr holds.
#include <atomic>
#include <cstddef>
#include <exception>
#include <new>
#include <optional>

#include "gpubatch/error.hpp"

namespace gpubatch::testing {

struct AllocationCounts {
  std::atomic<long> allocations{0};
  std::atomic<long> deallocations{0};
  long live() const { return allocations.load() - deallocations.load(); }
};

template <typename T>
struct CountingAllocator {
  using value_type = T;
  AllocationCounts* counts;

  explicit CountingAllocator(AllocationCounts* c) noexcept : counts(c) {}
  template <typename U>
  CountingAllocator(const CountingAllocator<U>& other) noexcept : counts(other.counts) {}

  T* allocate(std::size_t n) {
    counts->allocations.fetch_add(1);
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{alignof(T)}));
  }
  void deallocate(T* p, std::size_t) noexcept {
    counts->deallocations.fetch_add(1);
    ::operator delete(p, std::align_val_t{alignof(T)});
  }
  template <typename U>
  bool operator==(const CountingAllocator<U>& other) const noexcept {
    return counts == other.counts;
  }
};

inline std::optional<ErrorCode> code_of(const std::exception_ptr& e) {
  if (!e) return std::nullopt;
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return x.code();
  } catch (...) {
    return ErrorCode::internal;
  }
}

}  // namespace gpubatch::testing

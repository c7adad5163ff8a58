#include "gpu/early_results.hpp"

#include "gpu/env_switch.hpp"

namespace gpubatch::gpu {

bool early_results() { return env_switch("GPUBATCH_EARLY_RESULTS", true, "on", "off"); }

void EarlyLook::arm(std::byte* at, std::size_t bytes) noexcept {
  words_ = reinterpret_cast<std::uint32_t*>(at);
  count_ = bytes / sizeof(std::uint32_t);
  next_ = 0;
  for (std::size_t i = 0; i < count_; ++i) words_[i] = kSentinel;
}

bool EarlyLook::landed() noexcept {
  // The device writes these words behind the compiler's back: atomic loads, so that each look
  // reads memory again; acquire (a plain load on x86), so that the results' reads come after.
  while (next_ < count_ && __atomic_load_n(words_ + next_, __ATOMIC_ACQUIRE) != kSentinel) ++next_;
  return next_ == count_;
}

}  // namespace gpubatch::gpu

#pragma once
// A lone small result read as it lands, before the batch's timeline signal (DESIGN.md "The lone
// caller", "Early results"). On the H200 the kernel's result words reach host memory 1.5-2.2 us
// before the timeline counter shows the batch done: the barrier to host reads and the semaphore's
// release come after them (bench/probes/submit-parts, PROBE_RESULTS; BENCHMARKS.md,
// thirty-third session). So before the submission the result's words are filled with a
// sentinel, and a waiter that sees every word differ from it has every word's final value: a
// built-in element-wise kernel writes each output word once, and an aligned 4-byte store lands
// whole. A result word that truly equals the sentinel (a signalling NaN with this payload, which
// arithmetic never makes) only means that the waiter sees the counter first, as without the
// early look. The batch itself stays unfinished for its frame: the frame (staging, readback,
// command buffer) goes back to the pool only once the counter has passed (FrameSet::settle).
#include <cstddef>
#include <cstdint>

namespace gpubatch::gpu {

// GPUBATCH_EARLY_RESULTS = on | off; unset: on. Anything else is an invalid_config Error.
bool early_results();

// The largest result the early look watches: a lone caller's request, not a bulk one, whose
// words a waiter would read across the bus twice.
inline constexpr std::size_t kEarlyResultBytes = 4096;

class EarlyLook {
 public:
  static constexpr std::uint32_t kSentinel = 0x7f8c0ffeu;  // a signalling NaN

  // Fills the `bytes` (a multiple of 4) at `at`, mapped host-coherent memory that the batch's
  // kernel will write, with the sentinel; landed() then watches them. Call before the submission.
  void arm(std::byte* at, std::size_t bytes) noexcept;
  bool armed() const noexcept { return words_ != nullptr; }
  // True once every word differs from the sentinel: all have been written. Each call resumes at
  // the first word not yet seen written, so a poll costs a cache line or two.
  bool landed() noexcept;

 private:
  std::uint32_t* words_ = nullptr;
  std::size_t count_ = 0, next_ = 0;
};

}  // namespace gpubatch::gpu

#pragma once
// The strand's pull of one queue (ExecutorCore::pull_level), apart from the executor so that its
// loop can be tested alone: take items while the former wants them, and every `every` items ask
// whether to stop early (a request above level 0 arrived and its express batch is due).
#include <cstdint>

namespace gpubatch::detail {

enum class PullEnd {
  filled,     // the former wants no more of this level
  empty,      // nothing more is published in the queue now
  looked_up,  // look() said stop: the caller flushes the express batch, then pulls on
};

// wants(): the former takes more; take(): takes one item, false when none is published;
// look(): whether to stop, asked before the item that would make `n` a multiple of `every`
// (every 0: never). `n` counts the items taken, across calls.
template <typename Wants, typename Take, typename Look>
PullEnd pull_with_looks(std::uint64_t& n, std::uint64_t every, Wants&& wants, Take&& take, Look&& look) {
  while (wants()) {
    if (every != 0 && n % every == every - 1 && look()) return PullEnd::looked_up;
    if (!take()) return PullEnd::empty;
    ++n;
  }
  return PullEnd::filled;
}

}  // namespace gpubatch::detail

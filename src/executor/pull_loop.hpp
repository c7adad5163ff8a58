#pragma once
// The strand's pull of one queue (ExecutorCore::pull_level), apart from the executor so that its
// loop can be tested alone: take items while the former wants them, and every `every` items ask
// whether to stop early (a request above level 0 arrived and its express batch is due); never
// more than `budget` items a pass, counting those the former dropped (expired, cancelled).
//
// Why the budget: an item the former drops does not fill it, so a pull that meets only expired
// requests goes on while the queue has any. On the H200, 16 senders offering 2 M/s with every
// request on a 2 ms deadline once fell behind by more than 2 ms; from then on every request the
// strand reached had expired, it dropped them about as fast as the senders (blocked on the full
// queue) pushed more, and one pull ran for the rest of the run: 3.4 million requests dropped, no
// batch sent, and deadline admission, which learns the strand's rate at the end of each pass,
// never heard of it (BENCHMARKS.md, twenty-fourth session). The budget is the pass's, not one
// pull's (ExecutorCore::pass_budget_: a batch at the count limit and 1,024 more): with a budget
// per pull, a pass that found one live request among thousands of expired ones flushed it and
// pulled on, and ran as long. A pass that ends at its budget flushes what it holds, tells
// admission how little it took, and runs again.
#include <cstdint>

namespace gpubatch::detail {

enum class PullEnd {
  filled,     // the former wants no more of this level
  empty,      // nothing more is published in the queue now
  looked_up,  // look() said stop: the caller flushes the express batch, then pulls on
  budget,     // `n` reached the pass's budget: the caller ends its pull there
};

// wants(): the former takes more; take(): takes one item, false when none is published;
// look(): whether to stop, asked before the item that would make `n` a multiple of `every`
// (every 0: never). `n` counts the items taken, across calls; none is taken at `budget` or past it.
template <typename Wants, typename Take, typename Look>
PullEnd pull_with_looks(std::uint64_t& n, std::uint64_t every, std::uint64_t budget, Wants&& wants, Take&& take,
                        Look&& look) {
  while (wants()) {
    if (n >= budget) return PullEnd::budget;
    if (every != 0 && n % every == every - 1 && look()) return PullEnd::looked_up;
    if (!take()) return PullEnd::empty;
    ++n;
  }
  return PullEnd::filled;
}

}  // namespace gpubatch::detail

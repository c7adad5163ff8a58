// What the push into the executor's queue costs its callers, apart from everything else: T
// producer threads push items the size of the executor's queue item (`Pending`) into S
// BlockingMpscQueues (thread i into queue i % S) with `push_wait`, each push followed by the
// executor's wake-up look (a seq_cst fence, then a load of a flag the consumer writes:
// ExecutorCore::note_pushed and post_if_idle), while one consumer thread takes them from the
// queues in turn (`try_consume_quiet`, one `notify_space` a round), as the strand does.
//
//   gpubatch-queue-cost --producers 16 --shards 1 --items 2000000 --work-ns 1000 --reps 3
//
// One line per repetition: pushes/s, the producers' CPU ns per push (their thread CPU clocks,
// the spin of --work-ns taken out), the consumer's ns per item. --work-ns spins that long between
// a producer's pushes (a caller's own work: at 6.4 M requests/s, 16 callers spend ~2.5 us between
// pushes), so the tail is contended at a caller's rate rather than back to back. S = 1 is the
// executor's queue today; S = T gives each producer a queue (its tail never leaves its core) and
// S in between a tail shared by T / S producers: the gain a sharded submission queue could buy.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "executor/executor_core.hpp"
#include "executor/mpsc_queue.hpp"

namespace {

using gpubatch::detail::BlockingMpscQueue;
using gpubatch::detail::PushResult;
using Clock = std::chrono::steady_clock;

// As large as the executor's queue item, moved as plainly (its moves copy pointers and clear them).
struct Item {
  std::uint64_t value = 0;
  unsigned char rest[sizeof(gpubatch::detail::Pending) - sizeof(std::uint64_t)] = {};
};
static_assert(sizeof(Item) == sizeof(gpubatch::detail::Pending));

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

void spin_for(std::int64_t ns) {
  if (ns <= 0) return;
  const auto until = Clock::now() + std::chrono::nanoseconds(ns);
  while (Clock::now() < until) {
  }
}

struct Options {
  int producers = 16;
  int shards = 1;
  std::uint64_t items = 2'000'000;
  std::size_t capacity = 16384;
  std::int64_t work_ns = 1000;
  int reps = 3;
};

struct Rep {
  double rate = 0, producer_ns = 0, consumer_ns = 0;
};

Rep run_once(const Options& o) {
  std::vector<std::unique_ptr<BlockingMpscQueue<Item>>> queues;
  const std::size_t per_shard = std::max<std::size_t>(1, o.capacity / static_cast<std::size_t>(o.shards));
  for (int s = 0; s < o.shards; ++s) queues.push_back(std::make_unique<BlockingMpscQueue<Item>>(per_shard));
  alignas(64) std::atomic<bool> consumer_awake{true};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> cpu(static_cast<std::size_t>(o.producers), 0);
  const std::uint64_t per_producer = o.items / static_cast<std::uint64_t>(o.producers);
  const std::uint64_t total = per_producer * static_cast<std::uint64_t>(o.producers);

  // The spin's own CPU, taken out of the producers' figure: measured alone on this thread.
  const double spin_cost = [&] {
    const double c0 = thread_cpu_ns();
    for (int i = 0; i < 2000; ++i) spin_for(o.work_ns);
    return (thread_cpu_ns() - c0) / 2000;
  }();

  std::vector<std::thread> producers;
  for (int t = 0; t < o.producers; ++t) {
    producers.emplace_back([&, t] {
      auto& q = *queues[static_cast<std::size_t>(t % o.shards)];
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      const double c0 = thread_cpu_ns();
      std::uint64_t pos = 0, woken = 0;
      for (std::uint64_t i = 0; i < per_producer; ++i) {
        Item item;
        item.value = i;
        if (q.push_wait(std::move(item), pos) != PushResult::ok) std::abort();
        std::atomic_thread_fence(std::memory_order_seq_cst);
        woken += !consumer_awake.load(std::memory_order_relaxed);
        spin_for(o.work_ns);
      }
      cpu[static_cast<std::size_t>(t)] = thread_cpu_ns() - c0 - double(per_producer) * spin_cost;
      if (woken == per_producer + 1) std::abort();  // uses the look (never true)
    });
  }
  while (ready.load() != o.producers) std::this_thread::yield();

  double consumer_cpu = 0;
  std::thread consumer([&] {
    const double c0 = thread_cpu_ns();
    std::uint64_t taken = 0, sum = 0;
    while (taken < total) {
      for (auto& q : queues) {
        int n = 0;
        while (n < 64 && q->try_consume_quiet([&](Item&& it) { sum += it.value; })) ++n;
        if (n) q->notify_space();
        taken += static_cast<std::uint64_t>(n);
      }
    }
    consumer_cpu = thread_cpu_ns() - c0;
    if (sum == 0 && total > static_cast<std::uint64_t>(o.producers)) std::abort();  // keeps the reads
  });
  const auto t0 = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& p : producers) p.join();
  consumer.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  double producer_cpu = 0;
  for (double c : cpu) producer_cpu += c;
  return Rep{double(total) / seconds, producer_cpu / double(total), consumer_cpu / double(total)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"What a push into the executor's queue costs its callers, by producers and shards"};
  Options o;
  app.add_option("--producers", o.producers, "producer threads")->check(CLI::Range(1, 1024));
  app.add_option("--shards", o.shards, "queues; producer i pushes into queue i % shards")->check(CLI::Range(1, 1024));
  app.add_option("--items", o.items, "items in all")->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  app.add_option("--capacity", o.capacity, "slots in all, split over the shards")->check(CLI::Range(1, 1 << 24));
  app.add_option("--work-ns", o.work_ns, "a producer's spin between pushes")->check(CLI::Range(0, 1'000'000));
  app.add_option("--reps", o.reps, "repetitions")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  for (int r = 0; r < o.reps; ++r) {
    const Rep rep = run_once(o);
    std::printf("producers %d shards %d work_ns %lld: pushes/s %.0f  producer_ns_per_push %.1f  consumer_ns_per_item %.1f\n",
                o.producers, o.shards, static_cast<long long>(o.work_ns), rep.rate, rep.producer_ns, rep.consumer_ns);
    std::fflush(stdout);
  }
  return 0;
}

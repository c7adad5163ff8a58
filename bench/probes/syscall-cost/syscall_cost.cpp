// What a machine charges for the three things a lone std::future pays beyond the executor's own
// code: a futex wake with nobody waiting (glibc's pthread_once makes one in every
// std::promise::set_value), a whole promise round (make, set, get), and a steady_clock read.
// Nothing of gpubatch in it. Build line and use: README.md.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <future>

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double ns_each(int n, F&& f) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) f(i);
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n;
}

}  // namespace

int main() {
  constexpr int kN = 1000000;
  int word = 0;
  long sink = 0;
  const double futex = ns_each(kN, [&](int) { syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0); });
  const double promise = ns_each(kN, [&](int i) {
    std::promise<int> p;
    auto f = p.get_future();
    p.set_value(i);
    sink += f.get();
  });
  const double clock = ns_each(kN, [&](int) { sink += Clock::now().time_since_epoch().count() & 1; });
  std::printf("{\"futex_wake_ns\": %.1f, \"promise_round_ns\": %.1f, \"clock_read_ns\": %.1f, \"sink\": %ld}\n", futex,
              promise, clock, sink & 1);
  return 0;
}

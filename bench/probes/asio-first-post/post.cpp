// How long the first post to Asio's system executor takes to run (its thread pool made on first
// use) against later ones, in a fresh process.
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
#include <algorithm>
using Clock = std::chrono::steady_clock;
int main() {
  std::vector<double> us;
  for (int i = 0; i < 200; ++i) {
    std::atomic<bool> done{false};
    Clock::time_point ran;
    const auto t0 = Clock::now();
    boost::asio::post(boost::asio::system_executor(), [&] { ran = Clock::now(); done.store(true); });
    while (!done.load()) std::this_thread::yield();
    us.push_back(std::chrono::duration<double, std::micro>(ran - t0).count());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::printf("first post ran after %.1f us; second %.1f us; ", us[0], us[1]);
  std::sort(us.begin() + 1, us.end());
  std::printf("later p50 %.1f us max %.1f us; hardware threads %u\n", us[100], us.back(), std::thread::hardware_concurrency());
}

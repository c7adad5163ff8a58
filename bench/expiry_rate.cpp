// gpubatch-expiry-rate: how fast the executor fails requests whose deadline passed while the
// device could not take them: its strand is stuck inside a device's submit (a device that holds
// its first batch), and `--requests` requests with one deadline wait in the queue. Each handler
// records how late its deadline_exceeded came. A saturated device with deadlines in the load asks
// this of the executor at (offered - served) requests per second (issue 14: deadline errors at
// most 200 us late at p99 with the device saturated).
//
//   gpubatch-expiry-rate [--requests N] [--threads T] [--deadline-ms D]   (one JSON line)
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "gpubatch/batch_device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"

using namespace gpubatch;
using Clock = std::chrono::steady_clock;

namespace {

// Holds every submit until released; then completes at once with the inputs as results.
class StuckDevice final : public detail::BatchDevice {
 public:
  std::string name() const override { return "stuck"; }
  std::size_t max_request_bytes() const override { return std::size_t{1} << 30; }
  detail::TransferTotals transfers() const override { return {}; }
  std::unique_ptr<detail::InFlightBatch> submit(std::span<const Request* const> requests) override {
    std::unique_lock lock(m_);
    cv_.wait(lock, [&] { return released_; });
    return std::make_unique<Done>(requests);
  }
  void release() {
    {
      std::lock_guard lock(m_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  struct Done final : detail::InFlightBatch {
    explicit Done(std::span<const Request* const> r) {
      for (const Request* q : r) values.push_back(q->a);
    }
    bool wait_for(std::chrono::nanoseconds) override { return true; }
    void take_result(std::size_t i, Result& out) override { out.values = values.at(i); }
    std::vector<std::vector<float>> values;
  };
  std::mutex m_;
  std::condition_variable cv_;
  bool released_ = false;
};

double pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpubatch-expiry-rate: how fast requests whose deadline passed are failed"};
  std::size_t requests = 200000;
  int threads = 2, deadline_ms = 100;
  app.add_option("--requests", requests, "requests with the deadline")->check(CLI::Range(1, 50000000));
  app.add_option("--threads", threads, "submitting threads")->check(CLI::Range(1, 256));
  app.add_option("--deadline-ms", deadline_ms, "the deadline, after the start")->check(CLI::Range(1, 600000));
  CLI11_PARSE(app, argc, argv);

  auto device = std::make_shared<StuckDevice>();
  BatchConfig config;  // the defaults
  config.queue_capacity = std::max<std::size_t>(config.queue_capacity, requests + 1024);
  BatchExecutor executor(device, config);
  auto gpu = executor.handle();
  // The first request goes into the device's submit and holds the strand there.
  auto first = std::async(std::launch::async, [gpu] { return gpu.relu({1.0f}).get(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  const auto deadline = Clock::now() + std::chrono::milliseconds(deadline_ms);
  std::vector<double> late_us(requests, -1);
  std::atomic<std::size_t> expired{0}, other{0};
  std::vector<std::jthread> senders;
  for (int t = 0; t < threads; ++t)
    senders.emplace_back([&, t] {
      for (std::size_t i = static_cast<std::size_t>(t); i < requests; i += static_cast<std::size_t>(threads))
        gpu.relu({float(i)}, SubmitOptions{.deadline = deadline}, [&, i](std::exception_ptr e, std::vector<float>) {
          const auto now = Clock::now();
          // The code without a rethrow (error_code_of): the handler's own cost stays out of the
          // executor's rate (with a rethrow each, the unwinder was a large part of it).
          if (error_code_of(e) == ErrorCode::deadline_exceeded) {
            late_us[i] = std::chrono::duration<double, std::micro>(now - deadline).count();
            expired.fetch_add(1);
          } else {
            other.fetch_add(1);
          }
        });
    });
  senders.clear();
  const auto sent = Clock::now();
  while (expired.load() + other.load() < requests && Clock::now() < deadline + std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  device->release();
  first.get();
  executor.shutdown();
  std::vector<double> late;
  for (double v : late_us)
    if (v >= 0) late.push_back(v);
  const double last = late.empty() ? 0 : *std::max_element(late.begin(), late.end());
  std::printf(
      "{\"probe\": \"expiry_rate\", \"requests\": %zu, \"threads\": %d, \"sent_before_deadline\": %s, "
      "\"expired\": %zu, \"other\": %zu, \"late_us\": {\"p50\": %.1f, \"p99\": %.1f, \"max\": %.1f}, "
      "\"expiries_per_s\": %.0f}\n",
      requests, threads, sent < deadline ? "true" : "false", expired.load(), other.load(), pct(late, 0.5),
      pct(late, 0.99), last, last > 0 ? double(late.size()) / (last / 1e6) : 0.0);
  return 0;
}

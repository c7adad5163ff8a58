// Scheduling: two priority levels, deadlines that fail on time, a trace to open in Perfetto and a
// /metrics endpoint for Prometheus. Every result is checked against the CPU reference.
//   scheduling                  writes scheduling-trace.json beside it
//   scheduling TRACE.json       somewhere else
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gpubatch/gpubatch.hpp>
#include <gpubatch/metrics_server.hpp>
#include <gpubatch/reference.hpp>

namespace {

// Bulk traffic at level 0 from a few threads, each keeping 256 requests in flight. Level 0 has a
// 5 s timeout (main), so a bulk request may fail with deadline_exceeded too (at its deadline, or
// at the call when the requests ahead would outlast it): counted, like a wrong result, never lost.
struct Bulk {
  std::atomic<int> mismatches{0}, too_late{0}, other_errors{0};
};

std::vector<std::thread> start_bulk(gpubatch::BatchedGpuHandle gpu, std::atomic<bool>& stop, Bulk& bulk) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([gpu, &stop, &bulk] {
      const std::vector<float> x(256, -0.5f);
      std::vector<std::future<std::vector<float>>> inflight;
      while (!stop.load()) {
        for (int i = 0; i < 256; ++i) inflight.push_back(gpu.relu(x));
        for (auto& f : inflight) {
          try {
            bulk.mismatches += f.get() != std::vector<float>(256, 0.0f);
          } catch (const gpubatch::Error& e) {
            (e.code() == gpubatch::ErrorCode::deadline_exceeded ? bulk.too_late : bulk.other_errors) += 1;
          }
        }
        inflight.clear();
      }
    });
  }
  return threads;
}

enum class Outcome { served, too_late, wrong };

// One interactive request at level 1 with a 20 ms deadline: it goes into the next batch before
// any level-0 request, and fails with deadline_exceeded at its deadline if it is still waiting
// (or at once, if the requests ahead of it would outlast the deadline: deadline_admission).
Outcome interactive_request(gpubatch::BatchedGpuHandle& gpu) {
  const std::vector<float> x = {1.0f, -2.0f, 3.0f};
  auto options = gpubatch::SubmitOptions::within(std::chrono::milliseconds(20)).prioritised(1);
  try {
    const std::vector<float> y = gpu.relu(x, options).get();
    const bool right = !gpubatch::reference::check(gpubatch::Request::relu(x), gpubatch::Result{y, {}});
    return right ? Outcome::served : Outcome::wrong;
  } catch (const gpubatch::Error& e) {
    std::printf("interactive request: %s\n", e.what());
    return e.code() == gpubatch::ErrorCode::deadline_exceeded ? Outcome::too_late : Outcome::wrong;
  }
}

}  // namespace

int main(int argc, char** argv) try {
  gpubatch::BatchConfig config;                       // the defaults (adaptive)
  config.priority_levels = 2;                         // level 1 goes first
  config.level_timeout[0] = std::chrono::seconds(5);  // level 0 gives up after 5 s unless told otherwise
  gpubatch::Device device;
  gpubatch::BatchExecutor executor(device, config);
  executor.start_trace(argc > 1 ? argv[1] : "scheduling-trace.json");
  gpubatch::MetricsServer metrics(executor);          // GET http://127.0.0.1:PORT/metrics
  std::printf("device: %s; metrics at http://127.0.0.1:%u/metrics\n", device.info().name.c_str(),
              static_cast<unsigned>(metrics.port()));

  auto gpu = executor.handle();
  std::atomic<bool> stop{false};
  Bulk bulk_outcomes;
  std::vector<std::thread> bulk = start_bulk(gpu, stop, bulk_outcomes);
  int served = 0, too_late = 0, wrong = 0;
  for (int i = 0; i < 20; ++i) {
    const Outcome o = interactive_request(gpu);
    (o == Outcome::served ? served : o == Outcome::too_late ? too_late : wrong) += 1;
  }
  stop = true;
  for (auto& t : bulk) t.join();

  // A deadline already past fails at once with its own typed error; the executor goes on.
  std::promise<gpubatch::ErrorCode> code;
  gpu.relu({1.0f}, gpubatch::SubmitOptions::within(std::chrono::microseconds(0)),
           [&code](std::exception_ptr e, std::vector<float>) {
             code.set_value(gpubatch::error_code_of(e).value_or(gpubatch::ErrorCode::internal));
           });
  const bool expired = code.get_future().get() == gpubatch::ErrorCode::deadline_exceeded;

  executor.shutdown();  // drains, then writes the trace
  const gpubatch::Stats s = executor.stats();
  std::printf("interactive: %d served, %d too late, %d wrong; bulk: %d mismatches, %d too late, %d other errors; "
              "a past deadline %s\n",
              served, too_late, wrong, bulk_outcomes.mismatches.load(), bulk_outcomes.too_late.load(),
              bulk_outcomes.other_errors.load(), expired ? "failed with deadline_exceeded" : "did NOT fail as it should");
  std::printf("completed %llu, expired %llu, express batches %llu\n", static_cast<unsigned long long>(s.completed),
              static_cast<unsigned long long>(s.expired), static_cast<unsigned long long>(s.express_batches));
  return wrong == 0 && bulk_outcomes.mismatches == 0 && bulk_outcomes.other_errors == 0 && expired ? 0 : 1;
} catch (const gpubatch::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}

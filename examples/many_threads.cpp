// 16 threads submit small requests through one executor; batching turns them into few GPU
// submissions. Every result is checked against the CPU reference.
#include <cstdio>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include <gpubatch/device.hpp>
#include <gpubatch/executor.hpp>
#include <gpubatch/reference.hpp>

int main() {
  gpubatch::Device device;  // GPUBATCH_DEVICE picks one; the best is the default
  gpubatch::BatchExecutor executor(device, gpubatch::BatchConfig::balanced());

  constexpr int kThreads = 16, kPerThread = 2000;
  std::vector<std::thread> threads;
  std::vector<int> bad(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t, gpu = executor.handle()] {  // handles are cheap to copy
      std::mt19937 rng(t);
      std::normal_distribution<float> dist;
      std::vector<std::vector<float>> inputs(kPerThread);
      std::vector<std::future<std::vector<float>>> results;
      for (auto& x : inputs) {
        x.resize(256);
        for (auto& v : x) v = dist(rng);
        results.push_back(gpu.gelu(x));  // returns at once; the batch runs later
      }
      for (int i = 0; i < kPerThread; ++i) {
        gpubatch::Result r{results[i].get(), {}};
        if (gpubatch::reference::check(gpubatch::Request::gelu(inputs[i]), r)) ++bad[t];
      }
    });
  }
  for (auto& th : threads) th.join();

  const gpubatch::Stats s = executor.stats();
  int wrong = 0;
  for (int b : bad) wrong += b;
  std::printf("%s: %llu requests in %llu batches (mean %.0f), p99 end to end %.2f ms, %d wrong\n",
              device.info().name.c_str(), static_cast<unsigned long long>(s.completed),
              static_cast<unsigned long long>(s.batches), s.mean_batch_size,
              static_cast<double>(s.end_to_end.p99.count()) / 1e6, wrong);
  return wrong == 0 ? 0 : 1;
}

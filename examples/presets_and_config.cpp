// Choosing how batches form: a preset, a TOML file of your own, environment overrides.
//   presets_and_config                 the "latency" preset
//   presets_and_config my.toml         a file: `preset = "throughput"` then any keys to override
//   GPUBATCH_MAX_WAIT_US=200 presets_and_config    environment variables override both
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <gpubatch/config.hpp>
#include <gpubatch/device.hpp>
#include <gpubatch/error.hpp>
#include <gpubatch/executor.hpp>

int main(int argc, char** argv) {
  try {
    gpubatch::BatchConfig config =
        argc > 1 ? gpubatch::BatchConfig::from_file(argv[1]) : gpubatch::BatchConfig::preset("latency");
    config.apply_environment();  // GPUBATCH_MAX_BATCH_SIZE, GPUBATCH_MAX_WAIT_US, ...
    std::printf("max_batch_size %zu, max_wait %lld us, policy %s, overflow %s\n",
                config.max_batch_size, static_cast<long long>(config.max_wait.count()),
                std::string(gpubatch::to_string(config.policy)).c_str(),
                std::string(gpubatch::to_string(config.overflow)).c_str());

    gpubatch::Device device;
    gpubatch::BatchExecutor executor(device, config);
    auto gpu = executor.handle();
    auto y = gpu.scale({1.0f, 2.0f, 3.0f}, 10.0f);
    auto d = gpu.dot({1.0f, 2.0f}, {3.0f, 4.0f});
    auto bad = gpu.add({1.0f}, {1.0f, 2.0f});  // fails alone; the others still run
    const std::vector<float> yv = y.get();
    std::printf("scale: %g %g %g, dot: %g\n", yv[0], yv[1], yv[2], d.get());
    try {
      bad.get();
    } catch (const gpubatch::Error& e) {
      std::printf("bad request: %s\n", e.what());
    }
    executor.shutdown();  // drains; the destructor would too
    std::fputs(gpubatch::to_prometheus(executor.stats()).c_str(), stdout);
  } catch (const gpubatch::Error& e) {  // invalid_config names the key; no_device says what to install
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}

// co_await GPU results from a coroutine: any Asio completion token works as the last argument.
#include <cstdio>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gpubatch/device.hpp>
#include <gpubatch/error.hpp>
#include <gpubatch/executor.hpp>

namespace asio = boost::asio;

asio::awaitable<void> pipeline(gpubatch::BatchedGpuHandle gpu) {
  std::vector<float> x{-2.0f, -0.5f, 0.5f, 2.0f};
  // relu -> scale -> add, each step awaited (the coroutine resumes on its io_context).
  std::vector<float> r = co_await gpu.relu(x, asio::use_awaitable);
  std::vector<float> s = co_await gpu.scale(r, 3.0f, asio::use_awaitable);
  std::vector<float> y = co_await gpu.add(s, x, asio::use_awaitable);
  float norm2 = co_await gpu.dot(y, y, asio::use_awaitable);
  std::printf("y = %g %g %g %g, |y|^2 = %g\n", y[0], y[1], y[2], y[3], norm2);
  try {
    std::vector<float> empty;
    co_await gpu.relu(empty, asio::use_awaitable);  // errors arrive as exceptions
  } catch (const gpubatch::Error& e) {
    std::printf("as expected: %s\n", e.what());
  }
}

int main() {
  gpubatch::Device device;
  gpubatch::BatchExecutor executor(device, gpubatch::BatchConfig::latency());
  asio::io_context io;
  for (int i = 0; i < 4; ++i) asio::co_spawn(io, pipeline(executor.handle()), asio::detached);
  io.run();
}

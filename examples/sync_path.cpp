// The synchronous path: one request, one submission, wait. Every result is checked against the
// CPU reference.
#include <cstdio>

#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/reference.hpp"

int main() try {
  gpubatch::Device device;
  std::printf("device: %s (%s, %s)\n", device.info().name.c_str(), device.info().type.c_str(),
              device.info().driver.c_str());
  std::vector<float> x = {1, -2, 3, -4};
  std::vector<gpubatch::Request> requests = {
      gpubatch::Request::relu(x), gpubatch::Request::scale(x, 2.0f), gpubatch::Request::gelu(x),
      gpubatch::Request::dot(x, x), gpubatch::Request::matmul({1, 2, 3, 4}, {5, 6, 7, 8}, 2, 2, 2)};
  int failures = 0;
  for (const auto& r : requests) {
    const auto result = device.run(r);
    const auto mismatch = gpubatch::reference::check(r, result);
    std::printf("%-7s ->", std::string(gpubatch::to_string(r.op)).c_str());
    for (float v : result.values) std::printf(" %g", v);
    std::printf("  %s\n", mismatch ? mismatch->c_str() : "(matches the CPU reference)");
    failures += mismatch.has_value();
  }
  return failures == 0 ? 0 : 1;
} catch (const gpubatch::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}

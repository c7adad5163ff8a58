#include "gpu/fault_injection.hpp"

namespace gpubatch::gpu {
namespace {

constexpr int kFaults = static_cast<int>(Fault::count_);
std::atomic<int> g_armed[kFaults];
std::atomic<std::uint64_t> g_fired[kFaults];
std::atomic<bool> g_any{false};

}  // namespace

void FaultInjector::arm(Fault fault, int times) {
  g_armed[static_cast<int>(fault)].fetch_add(times);
  g_any.store(true);
}

void FaultInjector::disarm_all() {
  for (auto& a : g_armed) a.store(0);
  g_any.store(false);
}

bool FaultInjector::fire(Fault fault) {
  if (!g_any.load(std::memory_order_relaxed)) return false;
  auto& armed = g_armed[static_cast<int>(fault)];
  int n = armed.load();
  while (n > 0)
    if (armed.compare_exchange_weak(n, n - 1)) {
      g_fired[static_cast<int>(fault)].fetch_add(1);
      return true;
    }
  return false;
}

bool FaultInjector::any_armed() { return g_any.load(std::memory_order_relaxed); }

std::uint64_t FaultInjector::fired(Fault fault) { return g_fired[static_cast<int>(fault)].load(); }

}  // namespace gpubatch::gpu

// Stats::devices for an executor: a device set describes its members; a lone device is described
// from the executor's own counters (it is the only place its batches went).
#include "executor/executor_core.hpp"

namespace gpubatch::detail {

std::vector<DeviceStats> device_stats_of(const BatchDevice& device, const Stats& stats,
                                         std::uint64_t dispatched) {
  try {
    std::vector<DeviceStats> own = device.device_stats();
    if (!own.empty()) return own;
    DeviceStats d;
    d.name = device.name();
    d.batches = stats.batches;
    d.requests = dispatched;
    d.bytes = stats.transfers.bytes_up + stats.transfers.bytes_down;
    d.inflight_batches = stats.inflight_batches;
    d.transfers = stats.transfers;
    return {std::move(d)};
  } catch (...) {
    return {};
  }
}

}  // namespace gpubatch::detail

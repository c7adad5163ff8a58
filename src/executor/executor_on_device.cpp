// The BatchExecutor constructors that take Vulkan Devices, and open_devices(). Kept apart so that
// the executor library can be linked without the Vulkan layer when they are not used (tests with
// a fake device); this is the only executor file that includes gpubatch/device.hpp.
#include <cstdlib>
#include <string>

#include "executor/device_set.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"

namespace gpubatch {

namespace {
// One device keeps the direct path (no set in between); several become a DeviceSet.
std::shared_ptr<detail::BatchDevice> batch_device_of(const std::vector<Device>& devices,
                                                     const BatchConfig& config) {
  if (devices.empty()) throw Error(ErrorCode::invalid_argument, "BatchExecutor: no devices");
  if (devices.size() == 1) return devices.front().batch_device();
  std::vector<std::shared_ptr<detail::BatchDevice>> members;
  members.reserve(devices.size());
  for (const Device& d : devices) members.push_back(d.batch_device());
  return std::make_shared<detail::DeviceSet>(std::move(members), config.batch_timeout);
}
}  // namespace

BatchExecutor::BatchExecutor(const Device& device, BatchConfig config)
    : BatchExecutor(device.batch_device(), std::move(config)) {}

BatchExecutor::BatchExecutor(std::vector<Device> devices, BatchConfig config)
    : BatchExecutor(batch_device_of(devices, config), config) {}

BatchExecutor::BatchExecutor(BatchConfig config) : BatchExecutor(std::move(config), DeviceOptions{}) {}

BatchExecutor::BatchExecutor(BatchConfig config, const DeviceOptions& options)
    : BatchExecutor(open_devices(config.devices, options), config) {}

std::vector<Device> open_devices(std::string_view list) { return open_devices(list, DeviceOptions{}); }

std::vector<Device> open_devices(std::string_view list, const DeviceOptions& options) {
  std::string text(list);
  if (text.empty())
    if (const char* env = std::getenv("GPUBATCH_DEVICES")) text = env;
  if (text.empty()) return {Device(options)};
  const std::vector<std::string> items = parse_device_list(text);
  std::vector<Device> devices;
  DeviceOptions each = options;
  if (items.size() == 1 && items.front() == "all") {
    for (const DeviceInfo& info : Device::available()) {
      each.selector = std::to_string(info.index);
      devices.emplace_back(each);
    }
    if (devices.empty()) devices.emplace_back(options);  // throws no_device, saying how to fix it
    return devices;
  }
  for (const std::string& item : items) {
    each.selector = item;  // Device's own selection: an index, or a name substring
    devices.emplace_back(each);
  }
  return devices;
}

}  // namespace gpubatch

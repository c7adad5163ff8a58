// The BatchExecutor constructor that takes a Vulkan Device. Kept apart so that the executor
// library can be linked without the Vulkan layer when this constructor is not used (tests with a
// fake device); this is the only executor file that includes gpubatch/device.hpp.
#include "gpubatch/device.hpp"
#include "gpubatch/executor.hpp"

namespace gpubatch {

BatchExecutor::BatchExecutor(const Device& device, BatchConfig config)
    : BatchExecutor(device.batch_device(), std::move(config)) {}

}  // namespace gpubatch

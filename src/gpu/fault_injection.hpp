#pragma once
// Faults on demand, for tests only (not part of the public API): the next N occurrences of an
// event fail as the real device would make them fail. Process-wide; costs one relaxed atomic
// load per event when nothing is armed.
#include <atomic>
#include <cstdint>

namespace gpubatch::gpu {

enum class Fault : int {
  submit_device_lost,  // vkQueueSubmit returns VK_ERROR_DEVICE_LOST
  wait_device_lost,    // vkWaitSemaphores returns VK_ERROR_DEVICE_LOST
  device_out_of_memory,  // vkAllocateMemory returns VK_ERROR_OUT_OF_DEVICE_MEMORY
  pipeline_build,      // vkCreateComputePipelines fails
  hang,                // the submission is made but its completion is never reported
  host_out_of_memory,  // a batch's staging (host-visible upload) memory cannot be had: out_of_memory
  device_lost_check,   // VulkanBatchDevice::recover()'s check finds the device lost: it is re-created
  resident_stall,      // the resident ring fills a slot but never rings its doorbell (no progress)
  resident_unavailable,  // the resident ring cannot be set up (as on a device without ReBAR memory)
  host_import_unavailable,  // the next device opened cannot import host memory (no VK_EXT_external_memory_host)
  count_
};

class FaultInjector {
 public:
  // Arms `fault` for its next `times` occurrences.
  static void arm(Fault fault, int times = 1);
  static void disarm_all();
  // True when this occurrence must fail (consumes one arming).
  static bool fire(Fault fault);
  // Whether any fault has been armed since the last disarm_all(): paths that would step around
  // an injected fault (the early look at a lone result, early_results.hpp) stay off then.
  static bool any_armed();
  // Occurrences that failed because of injection, per fault, since the start.
  static std::uint64_t fired(Fault fault);
};

}  // namespace gpubatch::gpu

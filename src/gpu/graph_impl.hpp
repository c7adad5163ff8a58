#pragma once
// GpuCommandBatch's state, shared by graph.cpp (queueing, ids, device changes, reads) and
// graph_record.cpp (what one execute records and submits, from its graph_plan.hpp plan).
#include <vulkan/vulkan.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "plan/graph_plan.hpp"
#include "gpu/memory.hpp"
#include "gpu/parallel_copy.hpp"
#include "gpubatch/graph.hpp"
#include "gpubatch/host_buffer.hpp"

namespace gpubatch {

namespace detail {
class DeviceIdentity;
class GpuContext;
}  // namespace detail

namespace graph_detail {

// An import_buffer(): data that stays on the device across executes.
struct Imported {
  std::uint32_t floats = 0;
  std::vector<float> host;  // until its upload
  std::shared_ptr<detail::HostMemory> host_memory;  // import_buffer(HostBuffer): until its upload
  gpu::Allocation device;
  bool uploaded = false;
  bool lost = false;  // it was on a device that was lost and re-created (follow_device())
};

}  // namespace graph_detail

struct GpuCommandBatch::Impl {
  using Value = gpu::graph::Value;
  using Node = gpu::graph::Node;
  using Imported = graph_detail::Imported;

  Device device;
  std::shared_ptr<detail::DeviceIdentity> identity;
  std::shared_ptr<detail::GpuContext> ctx;  // the context this graph's buffers live on
  GraphOptions options;
  bool direct = false;  // Transfers::direct in effect
  std::uint64_t serial;  // this batch's ids carry it
  std::uint64_t generation = 1;  // of the next execute
  std::vector<Value> pending;
  std::vector<Node> nodes;
  std::vector<Value> done;  // the last execute's values (generation - 1)
  bool last_failed = false;
  std::vector<Imported> imports;
  ExecuteStats stats;

  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  std::uint64_t in_flight = 0;  // timeline value not yet waited for (set after a watchdog)
  gpu::Allocation staging, readback, scratch;
  std::size_t staged = 0;  // bytes of upload() data at the start of `staging`, for the next execute
  std::multimap<VkDeviceSize, gpu::Allocation> recycled;  // device buffers of the last execute
  // The callers' HostBuffers the last submission reads or writes: held until it has completed
  // (settle()), even past a watchdog.
  std::vector<std::shared_ptr<detail::HostMemory>> host_refs;
  mutable gpu::ParallelCopy copier;  // large span copies into staging and out of readback

  Impl(Device& d, const GraphOptions& o);
  ~Impl();

  std::chrono::milliseconds watchdog() const;
  void open_commands();
  void settle(std::chrono::nanoseconds timeout);
  void follow_device(std::size_t staged_bytes);

  // ---- ids (graph.cpp) --------------------------------------------------------------------------
  void check_batch(std::uint64_t batch, const char* what) const;
  std::uint32_t input_ref(std::uint64_t batch, std::uint64_t gen, std::uint32_t index, const char* what) const;
  std::uint32_t floats_of(std::uint32_t ref) const {
    return ref & gpu::graph::kImport ? imports[ref & ~gpu::graph::kImport].floats : pending[ref].floats;
  }
  BufferId push(Node node, std::uint32_t out_floats);
  std::uint32_t checked_floats(std::size_t n, const char* what) const;
  void grow_staging(std::size_t bytes, std::size_t keep);
  std::size_t stage(std::span<const float> data);

  // ---- HostBuffers (graph_host.cpp) ---------------------------------------------------------------
  // The caller's buffer as this device's memory; throws Error(invalid_argument) naming `what` for
  // an empty buffer or one of another device.
  void check_host(const HostBuffer& buffer, const char* what) const;
  // Throws Error(invalid_argument) when `memory` is already an upload or delivery target of the
  // pending execute (a buffer is read or written by one execute once).
  void check_unused_host(const detail::HostMemory* memory, const char* what) const;
  // At execute, on the device as it is now: every HostBuffer still this device's (invalid_argument
  // else), then held in host_refs.
  void hold_host_buffers(std::span<const Value> values);

  // ---- execute ----------------------------------------------------------------------------------
  void execute();  // graph.cpp: consumes the queue, plans
  // graph_record.cpp: allocates what `plan` asks for, fills staging, records, submits and waits.
  void run(const gpu::graph::Plan& plan, std::span<const Node> ops, std::span<const Value> values);
};

}  // namespace gpubatch

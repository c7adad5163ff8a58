#pragma once
// BatchDevice on Vulkan: packs a batch's inputs into host-visible staging memory, records one
// dispatch per kernel group (ragged segments), and submits it all as one command buffer that
// signals the context's timeline semaphore. Kernels read the staging memory and write the
// host-cached readback memory directly through device addresses, so a batch is one upload pass,
// one submission and one download pass, whatever it holds.
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "gpubatch/batch_device.hpp"
#include "gpu/context.hpp"
#include "gpu/device_identity.hpp"
#include "gpu/chunked_request.hpp"
#include "gpu/transfer_path.hpp"

namespace gpubatch::gpu {

struct Frame;
class ResidentRing;

// The frames (command pool, staging and readback memory) of one GpuContext. Batches in flight
// hold it, and through it their context, so that a re-created device never frees what a batch
// on the old one still uses.
struct FrameSet {
  explicit FrameSet(std::shared_ptr<detail::GpuContext> context);
  ~FrameSet();
  Frame* acquire();
  void release(Frame* frame);
  // A frame whose batch's results were taken before its timeline value was seen (an early look,
  // early_results.hpp): it goes back to `free` once the counter has passed that value, looked at
  // by acquire().
  void settle(Frame* frame);

  const std::shared_ptr<detail::GpuContext> context;  // first: destroyed last
  std::mutex mutex;
  std::vector<std::unique_ptr<Frame>> frames;
  std::vector<Frame*> free;
  std::vector<Frame*> settling;
  std::atomic<std::size_t> settling_count{0};  // settling.size(), read without the lock

 private:
  void take_settled();
};

class VulkanBatchDevice : public detail::BatchDevice,
                          public std::enable_shared_from_this<VulkanBatchDevice> {
 public:
  // Runs on `identity`'s current context (the one a Device and its graphs use too).
  VulkanBatchDevice(std::shared_ptr<detail::DeviceIdentity> identity, std::uint64_t max_request_bytes);
  ~VulkanBatchDevice() override;

  std::string name() const override;
  std::size_t max_request_bytes() const override;
  std::unique_ptr<detail::InFlightBatch> submit(std::span<const Request* const> requests) override;
  // Copies inputs into staging on `parallel`'s threads when a batch holds enough of them.
  std::unique_ptr<detail::InFlightBatch> submit(std::span<const Request* const> requests,
                                                detail::ParallelRunner& parallel) override;
  // Chunked requests (chunked_request.hpp): from rules_.split (DeviceOptions::split_bytes).
  std::size_t split_bytes() const override;
  std::unique_ptr<detail::InFlightBatch> submit_split(Request& request, detail::ParallelRunner& parallel) override;
  detail::TransferTotals transfers() const override;
  // False for a request whose HostBuffer another device (or this one before a re-creation) made.
  bool can_run(const Request& request) const override;
  bool runs_on_host_cpu() const override;
  // DeviceIdentity::recover() for the context the latest batches ran on: when that VkDevice is
  // lost, a new GpuContext (new VkDevice, memory and kernels; pipelines are rebuilt on first use)
  // becomes current for this device, the Device and its graphs alike. Batches in flight keep the
  // old one.
  void recover() override;

  // Resident mode: a ResidentRing (src/gpu/resident_ring.hpp) opened now, and again after a
  // loss (at most kResidentLosses times; then resident mode stays off, said once in the log).
  bool start_resident(const detail::ResidentSettings& settings) override;
  std::unique_ptr<detail::InFlightBatch> try_submit_resident(const Request& request) override;
  // The ring requests go to now (null when resident mode is off); for tests.
  std::shared_ptr<ResidentRing> resident_ring() const;
  static constexpr int kResidentLosses = 3;

  // The context new batches run on (it changes when the device is re-created).
  std::shared_ptr<detail::GpuContext> current_context() const;
  // How many times the device was re-created.
  std::uint64_t recreations() const { return identity_->recreations(); }
  // Frames (command pool, staging, readback) the current device has made: one per batch that
  // was ever in flight at once, reused after that.
  std::size_t frames_made() const;
  // Upload bytes from which a batch takes the copy-engine path (copy_engine_rule()).
  std::uint64_t copy_engine_bytes() const { return rules_.copy_engine.bytes; }
  // Whether batches of streaming kernels (all but matmul) take it too at that size.
  bool copy_engine_streaming() const { return rules_.copy_engine.streaming_too; }

 private:
  std::shared_ptr<FrameSet> current() const;

  const std::shared_ptr<detail::DeviceIdentity> identity_;
  std::uint64_t max_request_bytes_;
  mutable std::mutex mutex_;        // guards frames_ (the pointer) and frames_generation_
  mutable std::shared_ptr<FrameSet> frames_;
  mutable std::uint64_t frames_generation_ = 0;  // identity_->generation() frames_ was made for
  // Resident mode. The ring pointer is read on every resident request: an atomic shared_ptr
  // would do, a mutex held for a pointer copy is as cheap uncontended and simpler.
  bool open_resident_locked();
  mutable std::mutex resident_mutex_;
  bool resident_on_ = false;  // guarded
  int resident_losses_ = 0;   // guarded
  detail::ResidentSettings resident_settings_;  // guarded
  std::shared_ptr<ResidentRing> ring_;          // guarded
  PathRules rules_;  // which memory and queues a batch's data takes (transfer_path.hpp)
  ChunkPool chunk_pool_;  // pinned buffers of chunked requests
};

}  // namespace gpubatch::gpu

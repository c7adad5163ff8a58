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

#include "executor/batch_device.hpp"
#include "gpu/context.hpp"

namespace gpubatch::gpu {

struct Frame;

// The frames (command pool, staging and readback memory) of one GpuContext. Batches in flight
// hold it, and through it their context, so that a re-created device never frees what a batch
// on the old one still uses.
struct FrameSet {
  explicit FrameSet(std::shared_ptr<detail::GpuContext> context);
  ~FrameSet();
  Frame* acquire();
  void release(Frame* frame);

  const std::shared_ptr<detail::GpuContext> context;  // first: destroyed last
  std::mutex mutex;
  std::vector<std::unique_ptr<Frame>> frames;
  std::vector<Frame*> free;
};

class VulkanBatchDevice : public detail::BatchDevice,
                          public std::enable_shared_from_this<VulkanBatchDevice> {
 public:
  // `options` are those `context` was created with: recover() opens the new device with them.
  VulkanBatchDevice(std::shared_ptr<detail::GpuContext> context, std::uint64_t max_request_bytes,
                    DeviceOptions options = {});
  ~VulkanBatchDevice() override;

  std::string name() const override;
  std::size_t max_request_bytes() const override;
  std::unique_ptr<detail::InFlightBatch> submit(std::span<const Request* const> requests) override;
  // Copies inputs into staging on `parallel`'s threads when a batch holds enough of them.
  std::unique_ptr<detail::InFlightBatch> submit(std::span<const Request* const> requests,
                                                detail::ParallelRunner& parallel) override;
  detail::TransferTotals transfers() const override;
  // Checks whether the VkDevice is lost (vkGetSemaphoreCounterValue says VK_ERROR_DEVICE_LOST;
  // Fault::device_lost_check makes it say so) and if so opens a new GpuContext: new VkDevice,
  // memory and kernels (pipelines are rebuilt on first use). Batches in flight keep the old one.
  void recover() override;

  // The context new batches run on (it changes when recover() re-creates the device).
  std::shared_ptr<detail::GpuContext> current_context() const;
  // How many times recover() re-created the device.
  std::uint64_t recreations() const { return recreations_.load(); }
  // Upload bytes from which a batch takes the copy-engine path (copy_engine_threshold()).
  std::uint64_t copy_engine_bytes() const { return copy_engine_bytes_; }

 private:
  std::shared_ptr<FrameSet> current() const;

  std::uint64_t max_request_bytes_;
  DeviceOptions options_;
  std::uint64_t copy_engine_bytes_;  // batches with this many upload bytes use the copy engine
  mutable std::mutex mutex_;        // guards frames_ (the pointer)
  std::shared_ptr<FrameSet> frames_;
  std::mutex recover_mutex_;        // one recovery at a time
  std::atomic<std::uint64_t> recreations_{0};
};

}  // namespace gpubatch::gpu

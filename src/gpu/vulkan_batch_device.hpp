#pragma once
// BatchDevice on Vulkan: packs a batch's inputs into host-visible staging memory, records one
// dispatch per kernel group (ragged segments), and submits it all as one command buffer that
// signals the context's timeline semaphore. Kernels read the staging memory and write the
// host-cached readback memory directly through device addresses, so a batch is one upload pass,
// one submission and one download pass, whatever it holds.
#include <memory>
#include <mutex>
#include <vector>

#include "executor/batch_device.hpp"
#include "gpu/context.hpp"

namespace gpubatch::gpu {

struct Frame;

class VulkanBatchDevice : public detail::BatchDevice,
                          public std::enable_shared_from_this<VulkanBatchDevice> {
 public:
  VulkanBatchDevice(std::shared_ptr<detail::GpuContext> context, std::uint64_t max_request_bytes);
  ~VulkanBatchDevice() override;

  std::string name() const override;
  std::size_t max_request_bytes() const override;
  std::unique_ptr<detail::InFlightBatch> submit(std::span<const Request* const> requests) override;
  detail::TransferTotals transfers() const override;

  detail::GpuContext& context() { return *context_; }
  void release(Frame* frame);

 private:
  Frame* acquire();

  std::shared_ptr<detail::GpuContext> context_;
  std::uint64_t max_request_bytes_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Frame>> frames_;
  std::vector<Frame*> free_;
};

}  // namespace gpubatch::gpu

#include "gpu/resident_ring.hpp"

#include "log.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "gpu/fault_injection.hpp"
#include "gpu/kernels.hpp"
#include "gpu/vk_check.hpp"

namespace gpubatch::gpu {

namespace {

using Clock = std::chrono::steady_clock;

// Must match shaders/resident.comp.
constexpr std::uint32_t kControlWords = 64;
constexpr std::uint32_t kExit = 0, kFirst = 1, kServed = 2;
constexpr std::uint32_t kSeq = 0, kDone = 1, kOp = 2, kCount = 3, kScalar = 4, kResult = 5;
constexpr std::uint32_t kHeaderWords = 16;
constexpr std::uint32_t kDotOp = 16;
constexpr std::uint32_t kMaxDot = 1024;  // one block of dot_partial.comp: the same summation
constexpr std::uint32_t kMaxPolls = 1u << 30;

std::optional<std::uint32_t> resident_op(Op op) noexcept {
  switch (op) {
    case Op::relu: return 0;
    case Op::scale: return 1;
    case Op::sigmoid: return 2;
    case Op::tanh: return 3;
    case Op::swish: return 4;
    case Op::gelu: return 5;
    case Op::add: return 8;
    case Op::sub: return 9;
    case Op::mul: return 10;
    case Op::lerp: return 11;
    case Op::dot: return kDotOp;
    default: return std::nullopt;
  }
}

bool two_inputs(std::uint32_t code) noexcept { return code >= 8; }

constexpr VkMemoryPropertyFlags kRingMemory = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                              VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                              VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;

std::optional<std::uint32_t> ring_memory_type(const VkPhysicalDeviceMemoryProperties& props,
                                              std::uint32_t allowed) {
  for (std::uint32_t i = 0; i < props.memoryTypeCount; ++i)
    if ((allowed & (1u << i)) && (props.memoryTypes[i].propertyFlags & kRingMemory) == kRingMemory)
      return i;
  return std::nullopt;
}

// The results buffer: host memory the CPU caches (not device-local), where the GPU's writes
// arrive over the bus and the host's polls and reads hit its own cache; else any host-cached
// type (lavapipe: its one type, which is also device-local).
std::optional<std::uint32_t> results_memory_type(const VkPhysicalDeviceMemoryProperties& props,
                                                 std::uint32_t allowed) {
  constexpr VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                         VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                                         VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  std::optional<std::uint32_t> any;
  for (std::uint32_t i = 0; i < props.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags f = props.memoryTypes[i].propertyFlags;
    if (!(allowed & (1u << i)) || (f & want) != want) continue;
    if (!(f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) return i;
    if (!any) any = i;
  }
  return any;
}

// A buffer with a device address, bound to new memory of the type `pick` chooses from the
// buffer's requirements, mapped and zeroed. Null (and no buffer) when `pick` finds none.
template <typename Pick>
std::byte* make_mapped_buffer(VkDevice dev, VkDeviceSize bytes, Pick pick, const char* what, VkBuffer& buffer,
                              VkDeviceMemory& memory, std::uint64_t& address) {
  VkBufferCreateInfo buffer_info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  buffer_info.size = bytes;
  buffer_info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  check_vk(vkCreateBuffer(dev, &buffer_info, nullptr, &buffer), what);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev, buffer, &req);
  const std::optional<std::uint32_t> type = pick(req.memoryTypeBits);
  if (!type) {
    vkDestroyBuffer(dev, buffer, nullptr);
    buffer = VK_NULL_HANDLE;
    return nullptr;
  }
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, &flags};
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = *type;
  check_vk(vkAllocateMemory(dev, &alloc, nullptr, &memory), what);
  check_vk(vkBindBufferMemory(dev, buffer, memory, 0), "vkBindBufferMemory");
  void* mapped = nullptr;
  check_vk(vkMapMemory(dev, memory, 0, VK_WHOLE_SIZE, 0, &mapped), "vkMapMemory");
  std::memset(mapped, 0, bytes);
  VkBufferDeviceAddressInfo info{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  info.buffer = buffer;
  address = vkGetBufferDeviceAddress(dev, &info);
  return static_cast<std::byte*>(mapped);
}

// Orders the host's writes of a slot (write-combined on a GPU's BAR) before its doorbell.
inline void store_fence() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_sfence();  // write-combining buffers are not ordered by the fence above
#endif
}

// Copies out of the ring (device-local memory mapped through the BAR: uncached, write-combined).
// Ordinary loads from it are uncached reads across the bus, each waiting for the one before, so a
// plain memcpy of a 1 KiB result costs tens of microseconds; the probe's 3.9 us kernel round
// trip did not include reading the result. MOVNTDQA (SSE4.1 streaming loads) fetches each
// 64-byte line once into a streaming buffer and serves the line's four loads from it.
#if defined(__x86_64__)
__attribute__((target("sse4.1"))) void copy_streaming(void* dst, const void* src, std::size_t bytes) noexcept {
  _mm_mfence();  // after the load of the done word that said the result is there
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  std::size_t i = 0;
  if (reinterpret_cast<std::uintptr_t>(s) % 16 == 0) {
    for (; i + 64 <= bytes; i += 64) {
      auto* p = reinterpret_cast<__m128i*>(const_cast<std::byte*>(s + i));
      const __m128i a = _mm_stream_load_si128(p), b = _mm_stream_load_si128(p + 1);
      const __m128i c = _mm_stream_load_si128(p + 2), e = _mm_stream_load_si128(p + 3);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), a);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    for (; i + 16 <= bytes; i += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                       _mm_stream_load_si128(reinterpret_cast<__m128i*>(const_cast<std::byte*>(s + i))));
  }
  if (i < bytes) std::memcpy(d + i, s + i, bytes - i);
}
const bool kStreamingLoads = __builtin_cpu_supports("sse4.1");
#endif

void copy_from_ring(void* dst, const void* src, std::size_t bytes) noexcept {
#if defined(__x86_64__)
  if (kStreamingLoads) return copy_streaming(dst, src, bytes);
#endif
  std::memcpy(dst, src, bytes);
}

using detail::cpu_relax;  // gpubatch/batch_device.hpp

}  // namespace

// One request in the ring: a batch of one.
class ResidentTicket final : public detail::InFlightBatch {
 public:
  ResidentTicket(std::shared_ptr<ResidentRing> ring, std::uint32_t ticket, bool dot, std::uint32_t n)
      : ring_(std::move(ring)), ticket_(ticket), dot_(dot), n_(n), submitted_(Clock::now()) {}
  ~ResidentTicket() override { ring_->release(ticket_); }

  // Spins on the done word (pause for 50 us, then yield, then 20 us sleeps), looking every 128
  // polls for a kernel that left (re-armed) and for the watchdog.
  bool wait_for(std::chrono::nanoseconds timeout) override {
    const auto start = Clock::now();
    for (std::uint32_t spins = 0;; ++spins) {
      if (ring_->done(ticket_)) return true;
      if ((spins & 127) == 0) {
        ring_->poke(ticket_, submitted_);
        if (ring_->done(ticket_)) return true;
        if (ring_->lost())
          throw Error(ErrorCode::device_lost,
                      "the resident kernel stopped answering (ticket " + std::to_string(ticket_) + ")");
        const auto waited = Clock::now() - start;
        if (waited >= timeout) return false;
        if (waited > std::chrono::milliseconds(1)) std::this_thread::sleep_for(std::chrono::microseconds(20));
        else if (waited > std::chrono::microseconds(50)) std::this_thread::yield();
      }
      cpu_relax();
    }
  }

  void take_result(std::size_t, Result& out) override {
    out.values.resize(dot_ ? 1 : n_);
    out.states.clear();
    ring_->copy_result(ticket_, dot_, n_, out.values.data());
  }

 private:
  std::shared_ptr<ResidentRing> ring_;
  std::uint32_t ticket_;
  bool dot_;
  std::uint32_t n_;
  Clock::time_point submitted_;
};

bool ResidentRing::serves(const Request& r, std::uint32_t slot_bytes) noexcept {
  const auto code = resident_op(r.op);
  if (!code || uses_host_buffers(r)) return false;  // the ring copies vectors
  const std::size_t capacity = (slot_bytes / 4) - kHeaderWords;
  const std::size_t n = r.a.size();
  if (n == 0) return false;
  if (*code == kDotOp) return n <= kMaxDot && 2 * n <= capacity;
  return (two_inputs(*code) ? 2 * n : n) <= capacity;
}

std::shared_ptr<ResidentRing> ResidentRing::create(const std::shared_ptr<detail::GpuContext>& main,
                                                   const DeviceOptions& options,
                                                   const ResidentOptions& resident) {
  if (FaultInjector::fire(Fault::resident_unavailable))
    throw Error(ErrorCode::no_device, "resident mode cannot be set up (injected fault)");
  if (resident.slots == 0 || (resident.slots & (resident.slots - 1)) != 0 ||
      resident.slot_bytes < 256 || resident.slot_bytes % 256 != 0)
    throw Error(ErrorCode::invalid_argument, "resident ring: slots must be a power of two and "
                                             "slot_bytes a multiple of 256");
  if (!ring_memory_type(main->memory_properties(), ~0u))
    throw Error(ErrorCode::no_device, main->info().name +
                                          " has no device-local host-visible memory (ReBAR) for the resident ring");
  std::shared_ptr<ResidentRing> ring(new ResidentRing());
  const char* placement = std::getenv("GPUBATCH_RESIDENT_DEVICE");
  const bool force_own = placement && std::strcmp(placement, "own") == 0;
  if (main->resident_queue() && !force_own) {
    ring->ctx_ = main;
    ring->queue_ = main->resident_queue();
    ring->family_ = main->resident_family();
  } else {
    // One queue in all (lavapipe): a never-ending dispatch there would hold back every batch,
    // so the kernel gets a VkDevice of its own on the same physical device.
    DeviceOptions own = options;
    own.selector = std::to_string(main->info().index);
    ring->ctx_ = detail::GpuContext::create(own);
    ring->own_device_ = true;
    ring->queue_ = ring->ctx_->resident_queue() ? ring->ctx_->resident_queue() : ring->ctx_->queue();
    ring->family_ = ring->ctx_->resident_queue() ? ring->ctx_->resident_family() : ring->ctx_->queue_family();
  }
  if (!ring->ctx_->device_clock())
    throw Error(ErrorCode::no_device, main->info().name +
                                          " lacks shaderDeviceClock (VK_KHR_shader_clock) or the Vulkan "
                                          "memory model at device scope, which the resident kernel needs");
  ring->setup(resident);
  log::debug("gpubatch: resident ring of {} slots on {} ({})", resident.slots, main->info().name,
                ring->own_device_ ? "a VkDevice of its own" : "a second queue");
  return ring;
}

void ResidentRing::setup(const ResidentOptions& resident) {
  options_ = resident;
  slot_words_ = resident.slot_bytes / 4;
  slots_.assign(resident.slots, SlotState{});
  VkDevice dev = ctx_->device();
  const VkDeviceSize bytes = VkDeviceSize{kControlWords} * 4 + VkDeviceSize{resident.slots} * resident.slot_bytes;
  mapped_ = make_mapped_buffer(
      dev, bytes, [&](std::uint32_t allowed) { return ring_memory_type(ctx_->memory_properties(), allowed); },
      "vkCreateBuffer (resident ring)", buffer_, memory_, address_);
  if (!mapped_) throw Error(ErrorCode::no_device, "no device-local host-visible memory type fits the resident ring");
  setup_results();

  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.queueFamilyIndex = family_;
  check_vk(vkCreateCommandPool(dev, &pool_info, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo cmd_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cmd_info.commandPool = pool_;
  cmd_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cmd_info.commandBufferCount = 1;
  check_vk(vkAllocateCommandBuffers(dev, &cmd_info, &commands_), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check_vk(vkCreateFence(dev, &fence_info, nullptr, &fence_), "vkCreateFence");
  record();
}

// Results and done words in host memory of their own: the host polls its done word in its own
// cache (the GPU's write over the bus invalidates the line) and copies the result at cache speed,
// where the ring (device memory behind the BAR) costs a bus round trip per poll and per 64 bytes
// read. The inputs stay in the ring: a kernel reads host memory stale (the probe's "data in
// system memory"), and the host's writes to the BAR are cheap. GPUBATCH_RESIDENT_RESULTS=ring
// writes results over the inputs instead (the layout before; for side-by-side runs).
void ResidentRing::setup_results() {
  const char* where = std::getenv("GPUBATCH_RESIDENT_RESULTS");
  const bool in_ring = where && std::strcmp(where, "ring") == 0;
  out_ = mapped_ + std::size_t{kControlWords} * 4;
  out_address_ = address_ + std::uint64_t{kControlWords} * 4;
  if (in_ring) return;
  std::uint64_t address = 0;
  std::byte* mapped = make_mapped_buffer(
      ctx_->device(), VkDeviceSize{options_.slots} * options_.slot_bytes,
      [&](std::uint32_t allowed) { return results_memory_type(ctx_->memory_properties(), allowed); },
      "vkCreateBuffer (resident results)", results_buffer_, results_memory_, address);
  if (!mapped) return;  // no host-cached type: results in the ring
  host_results_ = true;
  out_ = mapped;
  out_address_ = address;
}

// Recorded once: every (re-)arm submits the same command buffer; where it starts comes from
// the control words the host writes before the submission.
void ResidentRing::record() {
  struct {
    std::uint64_t ring;
    std::uint32_t slots, slot_words, idle_ns, max_polls;
    std::uint64_t out;  // slot 0 of the result side
  } push{address_, options_.slots, slot_words_,
         static_cast<std::uint32_t>(std::min<std::int64_t>(options_.idle.count() * 1000, INT32_MAX)),
         kMaxPolls, out_address_};
  static_assert(sizeof(push) == 32, "must match Params in shaders/resident.comp");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check_vk(vkBeginCommandBuffer(commands_, &begin), "vkBeginCommandBuffer");
  vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, ctx_->kernels().get("resident"));
  vkCmdPushConstants(commands_, ctx_->kernels().layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
  vkCmdDispatch(commands_, 1, 1, 1);
  VkMemoryBarrier to_host{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  to_host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(commands_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                       &to_host, 0, nullptr, 0, nullptr);
  check_vk(vkEndCommandBuffer(commands_), "vkEndCommandBuffer");
}

ResidentRing::~ResidentRing() {
  if (!ctx_) return;
  VkDevice dev = ctx_->device();
  if (mapped_) std::atomic_ref<std::uint32_t>(*word(kExit)).store(1, std::memory_order_release);
  if (submitted_) {
    const VkResult r = vkWaitForFences(dev, 1, &fence_, VK_TRUE, 2'000'000'000ull);
    if (r == VK_TIMEOUT) {
      // The kernel neither served nor left: freeing what it may still write would be worse
      // than keeping it. Keep the memory and the device for the life of the process.
      log::error("gpubatch: the resident kernel did not leave within 2 s; keeping its memory");
      new std::shared_ptr<detail::GpuContext>(ctx_);  // deliberately never freed
      return;
    }
  }
  if (fence_) vkDestroyFence(dev, fence_, nullptr);
  if (results_buffer_) vkDestroyBuffer(dev, results_buffer_, nullptr);
  if (results_memory_) vkFreeMemory(dev, results_memory_, nullptr);  // unmapped with it
  if (pool_) vkDestroyCommandPool(dev, pool_, nullptr);
  if (buffer_) vkDestroyBuffer(dev, buffer_, nullptr);
  if (memory_) {
    if (mapped_) vkUnmapMemory(dev, memory_);
    vkFreeMemory(dev, memory_, nullptr);
  }
}

std::uint32_t* ResidentRing::word(std::size_t index) const {
  return reinterpret_cast<std::uint32_t*>(mapped_) + index;
}

std::uint32_t* ResidentRing::slot_word(std::uint32_t slot, std::uint32_t index) const {
  return word(kControlWords + std::size_t{slot} * slot_words_ + index);
}

std::uint32_t* ResidentRing::out_word(std::uint32_t slot, std::uint32_t index) const {
  return reinterpret_cast<std::uint32_t*>(out_) + std::size_t{slot} * slot_words_ + index;
}

bool ResidentRing::done(std::uint32_t ticket) const noexcept {
  const std::uint32_t slot = (ticket - 1) % options_.slots;
  return std::atomic_ref<std::uint32_t>(*out_word(slot, kDone)).load(std::memory_order_acquire) == ticket;
}

std::unique_ptr<detail::InFlightBatch> ResidentRing::try_submit(const Request& r) {
  const auto code = resident_op(r.op);
  if (!code || !fits(r)) return nullptr;
  const auto n = static_cast<std::uint32_t>(r.a.size());
  std::lock_guard lock(mutex_);
  if (lost()) return nullptr;
  const std::uint32_t ticket = next_ticket_;
  const std::uint32_t slot = (ticket - 1) % options_.slots;
  SlotState& s = slots_[slot];
  // Its last request's batch still holds it, or was dropped before the kernel served it.
  if (s.held || (s.used && !done(s.written))) return nullptr;
  *slot_word(slot, kOp) = *code;
  *slot_word(slot, kCount) = n;
  std::memcpy(slot_word(slot, kScalar), &r.scalar, 4);
  auto* data = reinterpret_cast<float*>(slot_word(slot, kHeaderWords));
  std::memcpy(data, r.a.data(), std::size_t{n} * 4);
  if (two_inputs(*code)) std::memcpy(data + n, r.b.data(), std::size_t{n} * 4);
  store_fence();
  if (!FaultInjector::fire(Fault::resident_stall))  // the stall: a doorbell never rung
    std::atomic_ref<std::uint32_t>(*slot_word(slot, kSeq)).store(ticket, std::memory_order_release);
  s.held = true;
  s.used = true;
  s.written = ticket;
  ++next_ticket_;
  ensure_running_locked();  // when it fails the ring is lost and the wait says so
  return std::make_unique<ResidentTicket>(shared_from_this(), ticket, *code == kDotOp, n);
}

void ResidentRing::ensure_running_locked() {
  if (lost()) return;
  VkDevice dev = ctx_->device();
  if (submitted_) {
    const VkResult r = vkGetFenceStatus(dev, fence_);
    if (r == VK_NOT_READY) return;
    if (r != VK_SUCCESS) return mark_lost_locked("its device was lost");
    submitted_ = false;
  }
  // The kernel has left (after its idle time). Re-arm it at the first ticket it has not served,
  // if one waits. Its writes are visible: the fence has signalled after a barrier to the host.
  const std::uint32_t served = std::atomic_ref<std::uint32_t>(*word(kServed)).load(std::memory_order_acquire);
  if (served + 1 == next_ticket_) return;
  std::atomic_ref<std::uint32_t>(*word(kFirst)).store(served + 1, std::memory_order_relaxed);
  std::atomic_ref<std::uint32_t>(*word(kExit)).store(0, std::memory_order_relaxed);
  if (vkResetFences(dev, 1, &fence_) != VK_SUCCESS) return mark_lost_locked("vkResetFences failed");
  VkSubmitInfo info{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  info.commandBufferCount = 1;
  info.pCommandBuffers = &commands_;
  VkResult r;
  {
    // Not while a pipeline is built on this context (Kernels::get_or_build).
    const auto submissions = ctx_->lock_resident_submissions();
    r = vkQueueSubmit(queue_, 1, &info, fence_);
  }
  if (r != VK_SUCCESS) return mark_lost_locked("its submission failed");
  submitted_ = true;
  arms_.fetch_add(1, std::memory_order_relaxed);
}

void ResidentRing::mark_lost_locked(const char* why) {
  if (lost_.exchange(true, std::memory_order_acq_rel)) return;
  std::atomic_ref<std::uint32_t>(*word(kExit)).store(1, std::memory_order_release);
  log::error("gpubatch: resident ring lost: {}; its requests fail with device_lost", why);
}

void ResidentRing::poke(std::uint32_t ticket, Clock::time_point submitted) {
  std::lock_guard lock(mutex_);
  ensure_running_locked();
  if (!lost() && !done(ticket) && Clock::now() - submitted > options_.watchdog)
    mark_lost_locked("a request had no answer within the watchdog time (batch_timeout)");
}

void ResidentRing::release(std::uint32_t ticket) noexcept {
  std::lock_guard lock(mutex_);
  SlotState& s = slots_[(ticket - 1) % options_.slots];
  if (s.written == ticket) s.held = false;
}

// Under the mutex: it orders this read after the writes of the thread that filled the slot (for
// ThreadSanitizer, which cannot see the kernel's part in between).
void ResidentRing::copy_result(std::uint32_t ticket, bool dot, std::uint32_t n, float* out) {
  std::lock_guard lock(mutex_);
  const std::uint32_t slot = (ticket - 1) % options_.slots;
  if (dot) std::memcpy(out, out_word(slot, kResult), 4);
  else if (host_results_) std::memcpy(out, out_word(slot, kHeaderWords), std::size_t{n} * 4);
  else copy_from_ring(out, out_word(slot, kHeaderWords), std::size_t{n} * 4);
}

bool ResidentRing::kernel_running() {
  std::lock_guard lock(mutex_);
  if (!submitted_) return false;
  return vkGetFenceStatus(ctx_->device(), fence_) == VK_NOT_READY;
}

void ResidentRing::stop() noexcept {
  std::lock_guard lock(mutex_);
  std::atomic_ref<std::uint32_t>(*word(kExit)).store(1, std::memory_order_release);
  if (!submitted_) return;
  const VkResult r = vkWaitForFences(ctx_->device(), 1, &fence_, VK_TRUE, 1'000'000'000ull);
  if (r == VK_SUCCESS) submitted_ = false;
}

}  // namespace gpubatch::gpu

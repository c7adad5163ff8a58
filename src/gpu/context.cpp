#include "gpu/context.hpp"

#include "log.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "gpu/fault_injection.hpp"
#include "gpu/interrupt_cpus.hpp"
#include "gpu/kernels.hpp"
#include "gpu/memory.hpp"
#include "gpu/vk_check.hpp"

namespace gpubatch {
namespace {

std::atomic<std::uint64_t> g_validation_messages{0};

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  g_validation_messages.fetch_add(1, std::memory_order_relaxed);
  const char* text = data && data->pMessage ? data->pMessage : "(no message)";
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
    log::error("vulkan validation: {}", text);
  else
    log::warn("vulkan validation: {}", text);
  return VK_FALSE;
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && (std::strcmp(v, "1") == 0 || std::strcmp(v, "true") == 0 || std::strcmp(v, "on") == 0);
}

bool has_device_extension(VkPhysicalDevice physical, const char* name) {
  std::uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &n, exts.data());
  return std::any_of(exts.begin(), exts.end(),
                     [&](const auto& e) { return std::strcmp(e.extensionName, name) == 0; });
}

// The device's PCI address ("0000:00:06.0") where the driver has VK_EXT_pci_bus_info; empty
// otherwise (lavapipe).
std::string pci_address_of(VkPhysicalDevice physical) {
  if (!has_device_extension(physical, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME)) return {};
  VkPhysicalDevicePCIBusInfoPropertiesEXT pci{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &pci};
  vkGetPhysicalDeviceProperties2(physical, &props);
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", pci.pciDomain, pci.pciBus, pci.pciDevice, pci.pciFunction);
  return text;
}

int type_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

const char* type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

constexpr const char* kNoDeviceHelp =
    "no Vulkan device with compute, Vulkan 1.2, buffer device address, timeline semaphores and "
    "shaderSignedZeroInfNanPreserveFloat32 was found; for a CPU device install Mesa's lavapipe (apt-get install mesa-vulkan-drivers "
    "libvulkan1), or install your GPU's Vulkan driver";

struct Candidate {
  VkPhysicalDevice physical;
  DeviceInfo info;
  int rank;
  std::uint32_t queue_family;
};

// Devices gpubatch can use, in the order it prefers them.
std::vector<Candidate> candidates(VkInstance instance) {
  std::uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance, &count, nullptr);
  std::vector<VkPhysicalDevice> devices(count);
  vkEnumeratePhysicalDevices(instance, &count, devices.data());
  std::vector<Candidate> out;
  for (std::uint32_t i = 0; i < count; ++i) {
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f12};
    VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceVulkan12Properties p12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES, &m3};
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &p12};
    vkGetPhysicalDeviceProperties(devices[i], &props.properties);
    if (props.properties.apiVersion < VK_API_VERSION_1_2) continue;
    vkGetPhysicalDeviceProperties2(devices[i], &props);
    vkGetPhysicalDeviceFeatures2(devices[i], &features);
    if (!f12.bufferDeviceAddress || !f12.timelineSemaphore) continue;
    // The kernels declare SignedZeroInfNanPreserve so that NaN and infinities pass as IEEE says.
    if (!p12.shaderSignedZeroInfNanPreserveFloat32) continue;

    std::uint32_t nfam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &nfam, nullptr);
    std::vector<VkQueueFamilyProperties> fams(nfam);
    vkGetPhysicalDeviceQueueFamilyProperties(devices[i], &nfam, fams.data());
    // A compute-only family, where there is one, keeps us off the queues graphics work uses.
    std::optional<std::uint32_t> family;
    for (std::uint32_t q = 0; q < nfam; ++q) {
      if (!(fams[q].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
      if (!family || !(fams[q].queueFlags & VK_QUEUE_GRAPHICS_BIT)) family = q;
      if (!(fams[q].queueFlags & VK_QUEUE_GRAPHICS_BIT)) break;
    }
    if (!family) continue;

    Candidate c{devices[i], {}, type_rank(props.properties.deviceType), *family};
    c.info.index = i;
    c.info.name = props.properties.deviceName;
    c.info.type = type_name(props.properties.deviceType);
    c.info.driver = std::string(p12.driverName) + " " + p12.driverInfo;
    c.info.api_version = props.properties.apiVersion;
    std::memcpy(c.info.pipeline_cache_uuid.data(), props.properties.pipelineCacheUUID, 16);
    c.info.max_buffer_bytes = m3.maxMemoryAllocationSize;
    c.info.pci_address = pci_address_of(devices[i]);
    out.push_back(std::move(c));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Candidate& a, const Candidate& b) { return a.rank < b.rank; });
  return out;
}

VkInstance create_instance(bool validation, VkDebugUtilsMessengerEXT* messenger) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "gpubatch";
  app.pEngineName = "gpubatch";
  app.apiVersion = VK_API_VERSION_1_2;

  std::vector<const char*> layers, extensions;
  VkDebugUtilsMessengerCreateInfoEXT messenger_info{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger_info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                   VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = on_validation_message;
  if (validation && !validation_layer_installed()) {
    // Validation is a debugging aid: a program (or a test binary on a machine without the
    // layer, such as the GPU machines) runs on without it rather than fail. Said once a process.
    static std::once_flag once;
    std::call_once(once, [] {
      log::warn("gpubatch: validation was requested (DeviceOptions::validation or GPUBATCH_VALIDATION=1) "
                   "but VK_LAYER_KHRONOS_validation is not installed: running without it "
                   "(apt-get install vulkan-validationlayers)");
    });
    validation = false;
  }
  if (validation) {
    layers.push_back("VK_LAYER_KHRONOS_validation");
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pNext = validation ? &messenger_info : nullptr;  // also reports instance creation itself
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<std::uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<std::uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult r = vkCreateInstance(&info, nullptr, &instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED)
    throw Error(ErrorCode::no_device, kNoDeviceHelp);
  gpu::check_vk(r, "vkCreateInstance");
  if (validation) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
    if (create) create(instance, &messenger_info, nullptr, messenger);
  }
  return instance;
}

const Candidate& choose(const std::vector<Candidate>& all, const std::string& selector) {
  if (all.empty()) throw Error(ErrorCode::no_device, kNoDeviceHelp);
  if (selector.empty()) return all.front();
  const bool numeric = std::all_of(selector.begin(), selector.end(),
                                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  for (const auto& c : all) {
    if (numeric ? c.info.index == std::stoul(selector)
                : lower(c.info.name).find(lower(selector)) != std::string::npos)
      return c;
  }
  std::string names;
  for (const auto& c : all) names += (names.empty() ? "" : ", ") + std::to_string(c.info.index) + ": " + c.info.name;
  throw Error(ErrorCode::no_device,
              "device selector '" + selector + "' matches none of the devices [" + names + "]");
}

// Where the copy engine's copies go: a transfer-only family (no graphics, no compute bit: on
// NVIDIA those queues feed the copy engines) unless GPUBATCH_TRANSFER_QUEUE=off; else `compute`.
std::uint32_t transfer_family_of(VkPhysicalDevice physical, std::uint32_t compute) {
  if (const char* v = std::getenv("GPUBATCH_TRANSFER_QUEUE"); v && lower(v) == "off") return compute;
  std::uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &n, fams.data());
  for (std::uint32_t q = 0; q < n; ++q) {
    const VkQueueFlags f = fams[q].queueFlags;
    if ((f & VK_QUEUE_TRANSFER_BIT) && !(f & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT)) && fams[q].queueCount > 0)
      return q;
  }
  return compute;
}

}  // namespace

std::uint64_t validation_message_count() noexcept {
  return g_validation_messages.load(std::memory_order_relaxed);
}

bool validation_layer_installed() {
  std::uint32_t n = 0;
  if (vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> available(n);
  if (vkEnumerateInstanceLayerProperties(&n, available.data()) < 0) return false;  // VK_INCOMPLETE is fine
  available.resize(n);
  return std::any_of(available.begin(), available.end(), [](const VkLayerProperties& l) {
    return std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0;
  });
}

namespace {
// One VkInstance per process and validation setting, made on first use and kept until the process
// ends (never destroyed: its messenger's logging must not run during static destruction, and the
// driver keeps what it needs of it anyway). NVIDIA's driver 580 lets a process create about 29
// instances, destroyed or not: on the H100 a plain Vulkan program got 28-29, then
// VK_ERROR_INITIALIZATION_FAILED, while 100 devices opened and closed on one kept instance were
// fine (build/churn's vkchurn, 2026-11-25). With an instance per Device, the thirtieth Device of a
// process (or the thirtieth recover()) failed with no_device.
struct ProcessInstance {
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
};

const ProcessInstance& process_instance(bool validation) {
  // Keyed by what the loader reads when an instance is made, as well: a program (or a test) that
  // points the loader at other drivers gets an instance that sees them.
  std::string key = validation ? "v" : "-";
  for (const char* name : {"VK_DRIVER_FILES", "VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES"}) {
    const char* value = std::getenv(name);
    key += '|';
    if (value) key += value;
  }
  static std::mutex mutex;
  static auto* kept = new std::map<std::string, ProcessInstance>;  // reachable: not a leak to LSan
  std::lock_guard lock(mutex);
  auto found = kept->find(key);
  if (found != kept->end()) return found->second;
  ProcessInstance made;
  made.instance = create_instance(validation, &made.messenger);  // throws: nothing kept
  detail::GpuContext::instances_made_.fetch_add(1, std::memory_order_relaxed);
  return kept->emplace(std::move(key), made).first->second;
}
}  // namespace

namespace detail {

// DeviceInfo::interrupt_cpus, read when a context opens and said beside "using device": a lone
// caller's thread on those CPUs waits about three times longer (interrupt_cpus.hpp). At debug
// level, as that line: said on every open, it is not news at info.
static void note_interrupt_cpus(DeviceInfo& info) {
  info.interrupt_cpus = gpu::interrupt_cpus_of(info.pci_address);
  if (info.interrupt_cpus.empty()) return;
  log::debug("gpubatch: {} ({}) has its interrupts taken by CPU {}: a thread that submits and waits "
                "from there answers a lone request about three times slower (on the H200 47-53 us against "
                "14-17); keep latency-critical callers off it (docs/DESIGN.md \"The GPU's interrupt CPU\")",
                info.name, info.pci_address, gpu::format_cpu_list(info.interrupt_cpus));
}

std::vector<DeviceInfo> GpuContext::enumerate() {
  std::vector<DeviceInfo> out;
  for (auto& c : candidates(process_instance(false).instance)) out.push_back(c.info);
  return out;
}

namespace {
constexpr std::uint32_t kNoFamily = ~0u;


// Where the device can import a host allocation into a buffer of the pool's usage
// (VK_EXT_external_memory_host, import without a dedicated allocation): its
// minImportedHostPointerAlignment. 0 otherwise, and where a test armed host_import_unavailable.
VkDeviceSize host_import_alignment_of(VkPhysicalDevice physical) {
  if (gpu::FaultInjector::fire(gpu::Fault::host_import_unavailable)) return 0;
  if (!has_device_extension(physical, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME)) return 0;
  constexpr auto kHandle = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkPhysicalDeviceExternalBufferInfo buffer{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO};
  buffer.usage = gpu::kBufferUsage;
  buffer.handleType = kHandle;
  VkExternalBufferProperties external{VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES};
  vkGetPhysicalDeviceExternalBufferProperties(physical, &buffer, &external);
  const auto& m = external.externalMemoryProperties;
  // A dedicated-only import would need the allocation's size to equal the buffer's requirement,
  // which a caller's aligned size need not: such a device counts as one without import.
  if (!(m.externalMemoryFeatures & VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT) ||
      (m.externalMemoryFeatures & VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT) ||
      !(m.compatibleHandleTypes & kHandle))
    return 0;
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &host};
  vkGetPhysicalDeviceProperties2(physical, &props);
  return host.minImportedHostPointerAlignment;
}
}  // namespace

// The queues to create: the batches' queue, and a second compute queue for the resident kernel
// where the device offers one (a second queue of the same family, else another compute family),
// so that a persistent dispatch never blocks batches. Lavapipe offers one queue in all: there the
// resident ring opens a VkDevice of its own instead (resident_ring.cpp). Returns the count.
std::uint32_t GpuContext::resident_queue_plan(GpuContext& ctx, VkDeviceQueueCreateInfo* infos,
                                             const float* priorities) {
  std::uint32_t nfam = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(ctx.physical_, &nfam, nullptr);
  std::vector<VkQueueFamilyProperties> fams(nfam);
  vkGetPhysicalDeviceQueueFamilyProperties(ctx.physical_, &nfam, fams.data());
  infos[0] = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  infos[0].queueFamilyIndex = ctx.queue_family_;
  infos[0].queueCount = 1;
  infos[0].pQueuePriorities = priorities;
  ctx.resident_family_ = kNoFamily;
  if (fams[ctx.queue_family_].queueCount >= 2) {
    infos[0].queueCount = 2;
    ctx.resident_family_ = ctx.queue_family_;
    return 1;
  }
  for (std::uint32_t q = 0; q < nfam; ++q) {
    if (q == ctx.queue_family_ || !(fams[q].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    infos[1] = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    infos[1].queueFamilyIndex = q;
    infos[1].queueCount = 1;
    infos[1].pQueuePriorities = priorities;
    ctx.resident_family_ = q;
    return 2;
  }
  return 1;
}

// The batches' SubmitQueue and the copy engine's (submit_queue.hpp; the latter a share of the
// batches' VkQueue where the device has no transfer family). GPUBATCH_SEMAPHORE_WAIT picks how
// hosts wait on them.
void GpuContext::open_submit_queues() {
  auto mode = SubmitQueue::WaitMode::serial;
  if (const char* env = std::getenv("GPUBATCH_SEMAPHORE_WAIT")) {
    if (lower(env) == "concurrent") mode = SubmitQueue::WaitMode::concurrent;
    else if (lower(env) != "serial")
      log::warn("gpubatch: GPUBATCH_SEMAPHORE_WAIT={} is neither serial nor concurrent; using serial", env);
  }
  batches_ = std::make_unique<SubmitQueue>(device_, queue_, *counters_, SubmitQueue::Carries::batches, mode);
  transfers_ = std::make_unique<SubmitQueue>(device_, transfer_queue_, *counters_, SubmitQueue::Carries::copies,
                                             mode, transfer_queue_ == queue_ ? batches_.get() : nullptr);
}

// The device this context runs on (its batches on `family`), and what it reads off it once.
void GpuContext::adopt(VkPhysicalDevice physical, const DeviceInfo& info, std::uint32_t family) {
  physical_ = physical;
  info_ = info;
  queue_family_ = family;
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(physical_, &props);
  limits_ = props.limits;
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_props_);
  max_allocation_ = info.max_buffer_bytes;
  std::uint32_t nfam = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nfam, nullptr);
  std::vector<VkQueueFamilyProperties> fams(nfam);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nfam, fams.data());
  if (fams[queue_family_].timestampValidBits > 0) timestamp_period_ns_ = props.limits.timestampPeriod;
}

// Every queue to create (resident_queue_plan(), then the copy engine's: a transfer-only family
// where there is one and it is not the resident kernel's, else the batches' own queue); returns
// the count.
std::uint32_t GpuContext::queue_plan(VkDeviceQueueCreateInfo* infos, const float* priorities) {
  std::uint32_t count = resident_queue_plan(*this, infos, priorities);
  transfer_family_ = transfer_family_of(physical_, queue_family_);
  if (count == 2 && infos[1].queueFamilyIndex == transfer_family_) transfer_family_ = queue_family_;
  if (transfer_family_ != queue_family_) {
    infos[count] = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    infos[count].queueFamilyIndex = transfer_family_;
    infos[count].queueCount = 1;
    infos[count].pQueuePriorities = priorities;
    ++count;
  }
  return count;
}

// The features and extensions the device is opened with (their structs chain through pNext, so
// `f` stays where the caller made it).
void GpuContext::enable_features(DeviceFeatures& f) {
  f.f12.bufferDeviceAddress = VK_TRUE;
  f.f12.timelineSemaphore = VK_TRUE;
  if (has_device_extension(physical_, VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME)) {
    f.extensions.push_back(VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME);
    creation_feedback_ = true;
  }
  // The resident kernel times its idle exit with the device clock (VK_KHR_shader_clock) ...
  if (has_device_extension(physical_, VK_KHR_SHADER_CLOCK_EXTENSION_NAME)) {
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f.clock};
    vkGetPhysicalDeviceFeatures2(physical_, &features);
    if (f.clock.shaderDeviceClock) {
      f.clock.shaderSubgroupClock = VK_FALSE;
      f.clock.pNext = nullptr;
      f.f12.pNext = &f.clock;
      f.extensions.push_back(VK_KHR_SHADER_CLOCK_EXTENSION_NAME);
      device_clock_ = true;
    }
  }
  // ... and orders its polls with the Vulkan memory model (acquire/release, device scope).
  VkPhysicalDeviceVulkan12Features have{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &have};
  vkGetPhysicalDeviceFeatures2(physical_, &features);
  if (have.vulkanMemoryModel && have.vulkanMemoryModelDeviceScope) {
    f.f12.vulkanMemoryModel = VK_TRUE;
    f.f12.vulkanMemoryModelDeviceScope = VK_TRUE;
  } else {
    device_clock_ = false;  // resident mode needs both
  }
  // Device::import_host: a caller's own host memory used in place, where the device can import it.
  host_import_alignment_ = host_import_alignment_of(physical_);
  if (host_import_alignment_ > 0) f.extensions.push_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
}

// vkCreateDevice and its queues.
void GpuContext::open_device() {
  const float priorities[2] = {1.0f, 1.0f};
  VkDeviceQueueCreateInfo queue_infos[3]{};
  const std::uint32_t queue_count = queue_plan(queue_infos, priorities);
  DeviceFeatures features;
  enable_features(features);
  VkDeviceCreateInfo device_info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &features.f12};
  device_info.enabledExtensionCount = static_cast<std::uint32_t>(features.extensions.size());
  device_info.ppEnabledExtensionNames = features.extensions.data();
  device_info.queueCreateInfoCount = queue_count;
  device_info.pQueueCreateInfos = queue_infos;
  gpu::check_vk(vkCreateDevice(physical_, &device_info, nullptr, &device_), "vkCreateDevice");
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  if (resident_family_ != kNoFamily)
    vkGetDeviceQueue(device_, resident_family_, resident_family_ == queue_family_ ? 1 : 0, &resident_queue_);
  vkGetDeviceQueue(device_, transfer_family_, 0, &transfer_queue_);
  if (host_import_alignment_ > 0)
    host_pointer_properties_ = reinterpret_cast<PFN_vkGetMemoryHostPointerPropertiesEXT>(
        vkGetDeviceProcAddr(device_, "vkGetMemoryHostPointerPropertiesEXT"));
  if (!host_pointer_properties_) host_import_alignment_ = 0;
}

std::shared_ptr<GpuContext> GpuContext::create(const DeviceOptions& options,
                                               std::shared_ptr<AtomicCounters> counters) {
  std::shared_ptr<GpuContext> ctx(new GpuContext());
  ctx->counters_ = counters ? std::move(counters) : std::make_shared<AtomicCounters>();
  const bool validation = options.validation.value_or(env_flag("GPUBATCH_VALIDATION"));
  ctx->instance_ = process_instance(validation).instance;  // the process's, not this context's
  std::string selector = options.selector;
  if (selector.empty())
    if (const char* env = std::getenv("GPUBATCH_DEVICE")) selector = env;
  const auto all = candidates(ctx->instance_);
  const Candidate& chosen = choose(all, selector);
  ctx->adopt(chosen.physical, chosen.info, chosen.queue_family);
  ctx->open_device();
  ctx->open_submit_queues();
  ctx->memory_ = std::make_unique<gpu::MemoryPool>(*ctx);
  ctx->kernels_ = std::make_unique<gpu::Kernels>(*ctx, options.pipeline_cache_dir);
  log::debug("gpubatch: using device {} ({}, {})", ctx->info_.name, ctx->info_.type, ctx->info_.driver);
  note_interrupt_cpus(ctx->info_);
  return ctx;
}

GpuContext::GpuContext() { live_.fetch_add(1, std::memory_order_relaxed); }

GpuContext::~GpuContext() {
  live_.fetch_sub(1, std::memory_order_relaxed);
  if (device_) vkDeviceWaitIdle(device_);
  kernels_.reset();
  memory_.reset();
  transfers_.reset();  // first: it may hold the batches' lock
  batches_.reset();
  if (device_) vkDestroyDevice(device_, nullptr);
  // instance_ is the process's (process_instance): it stays.
}

VkResult GpuContext::host_pointer_properties(const void* pointer,
                                             VkMemoryHostPointerPropertiesEXT* properties) const {
  return host_pointer_properties_(device_, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, pointer,
                                  properties);
}

std::uint64_t GpuContext::submit(VkCommandBuffer commands, std::uint64_t wait_upload) {
  return batches_->submit(commands, transfers_->timeline(), wait_upload);
}

GpuContext::SubmissionPause GpuContext::pause_submissions() {
  SubmissionPause pause{std::unique_lock(batches_->queue_lock(), std::defer_lock),
                        std::unique_lock(transfers_->queue_lock(), std::defer_lock),
                        std::unique_lock(resident_mutex_, std::defer_lock)};
  if (dedicated_transfer_queue()) std::lock(pause.batches, pause.transfers, pause.resident);
  else std::lock(pause.batches, pause.resident);  // one queue: its copies take the batches' lock too
  return pause;
}

std::unique_lock<std::mutex> GpuContext::lock_resident_submissions() {
  return std::unique_lock(resident_queue_ ? resident_mutex_ : batches_->queue_lock());
}

std::uint64_t GpuContext::submit_upload(VkCommandBuffer commands) { return transfers_->submit(commands); }

void GpuContext::wait_upload(std::uint64_t value, std::chrono::nanoseconds timeout) noexcept {
  VkSemaphoreWaitInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  info.semaphoreCount = 1;
  const VkSemaphore timeline = transfers_->timeline();
  info.pSemaphores = &timeline;
  info.pValues = &value;
  (void)vkWaitSemaphores(device_, &info, static_cast<std::uint64_t>(timeout.count()));
}

std::uint64_t GpuContext::upload_counter() {
  std::uint64_t value = 0;
  vkGetSemaphoreCounterValue(device_, transfers_->timeline(), &value);
  return value;
}

}  // namespace detail
}  // namespace gpubatch

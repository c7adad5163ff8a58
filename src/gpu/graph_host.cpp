// GpuCommandBatch and the caller's pinned memory (HostBuffer, Device::allocate_host): uploads and
// imports read in place from a HostBuffer, results delivered straight into one. No CPU copy of
// either: with Transfers::copy the execute's command buffer copies from and to the buffer
// (vkCmdCopyBuffer), with Transfers::direct the kernels read and write it through its device
// address (graph_record.cpp). The batch holds each buffer's memory until the execute that uses it
// has completed.
#include <string>

#include "gpu/context.hpp"
#include "gpu/device_identity.hpp"
#include "gpu/graph_impl.hpp"
#include "gpu/host_memory.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/graph.hpp"

namespace gpubatch {
namespace {

using gpu::graph::kImport;
using gpu::graph::Source;
using Value = gpu::graph::Value;

[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorCode::invalid_argument, message); }

GpuCommandBatch::Impl& checked(const std::unique_ptr<GpuCommandBatch::Impl>& impl) {
  if (!impl) invalid("use of a moved-from GpuCommandBatch");
  return *impl;
}

const char* kForeign = ": the HostBuffer belongs to another device, or to one that recover() replaced "
                       "(take it from this batch's device's allocate_host or import_host)";

}  // namespace

void GpuCommandBatch::Impl::check_host(const HostBuffer& buffer, const char* what) const {
  if (buffer.empty()) invalid(std::string(what) + ": empty HostBuffer (allocate it with Device::allocate_host)");
  if (!gpu::host_memory_on(buffer.memory(), identity->context().get())) invalid(std::string(what) + kForeign);
  if (dynamic_cast<const detail::HostMemoryView*>(buffer.memory().get()))  // the executor's own, never a caller's
    invalid(std::string(what) + ": a range of a HostBuffer (the graph takes whole buffers)");
}

void GpuCommandBatch::Impl::check_unused_host(const detail::HostMemory* memory, const char* what) const {
  for (std::size_t i = 0; i < pending.size(); ++i)
    if (pending[i].host.get() == memory)
      invalid(std::string(what) + ": this HostBuffer is already " +
              (pending[i].source == Source::upload ? "uploaded as" : "the delivery target of") + " buffer #" +
              std::to_string(i) + " of this execute; one execute reads or writes a HostBuffer once");
}

void GpuCommandBatch::Impl::hold_host_buffers(std::span<const Value> values) {
  host_refs.clear();
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i].host) {
      if (!gpu::host_memory_on(values[i].host, ctx.get())) invalid("execute: buffer #" + std::to_string(i) + kForeign);
      host_refs.push_back(values[i].host);
    }
  for (std::size_t i = 0; i < imports.size(); ++i)
    if (imports[i].host_memory && !imports[i].uploaded) {
      if (!gpu::host_memory_on(imports[i].host_memory, ctx.get()))
        invalid("execute: imported buffer #" + std::to_string(i) + kForeign);
      host_refs.push_back(imports[i].host_memory);
    }
}

BufferId GpuCommandBatch::upload(const HostBuffer& data) {
  Impl& g = checked(impl_);
  g.check_host(data, "upload");
  g.check_unused_host(data.memory().get(), "upload");
  Value v;
  v.source = Source::upload;
  v.floats = g.checked_floats(data.size(), "upload");
  v.host = data.memory();
  if (g.pending.size() >= kImport - 1) invalid("too many buffers in one execute");
  g.pending.push_back(std::move(v));
  return make_id(g.serial, g.generation, static_cast<std::uint32_t>(g.pending.size() - 1));
}

BufferId GpuCommandBatch::import_buffer(const HostBuffer& data) {
  Impl& g = checked(impl_);
  g.check_host(data, "import_buffer");
  Impl::Imported im;
  im.floats = g.checked_floats(data.size(), "import_buffer");
  im.host_memory = data.memory();
  if (g.imports.size() >= kImport - 1) invalid("too many imported buffers");
  g.imports.push_back(std::move(im));
  return make_id(g.serial, 0, static_cast<std::uint32_t>(g.imports.size() - 1));
}

void GpuCommandBatch::deliver_to(BufferId id, HostBuffer& out) {
  Impl& g = checked(impl_);
  const std::uint32_t ref = g.input_ref(id.batch_, id.generation_, id.index_, "deliver_to");
  if (ref & kImport) invalid("deliver_to: an imported buffer is an input, not a result");
  Value& v = g.pending[ref];
  const std::string name = "buffer #" + std::to_string(ref);
  if (v.source != Source::op) invalid("deliver_to: " + name + " is an upload, not a result");
  if (v.host) invalid("deliver_to: " + name + " is already delivered into a HostBuffer");
  g.check_host(out, "deliver_to");
  if (out.size() != v.floats)
    invalid("deliver_to: size mismatch: " + name + " has " + std::to_string(v.floats) + " floats, the HostBuffer " +
            std::to_string(out.size()));
  g.check_unused_host(out.memory().get(), "deliver_to");
  v.host = out.memory();
}

}  // namespace gpubatch

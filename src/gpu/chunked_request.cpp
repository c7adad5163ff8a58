#include "gpu/chunked_request.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "gpu/context.hpp"
#include "gpu/host_memory.hpp"
#include "gpu/parallel_copy.hpp"
#include "gpu/vulkan_batch_device.hpp"

namespace gpubatch::gpu {

bool splittable(const Request& r) noexcept {
  if (uses_host_buffers(r) || r.a.empty()) return false;
  if (r.op == Op::chain) return r.chain != nullptr && r.inputs.empty();
  if (r.op == Op::dot) return r.b.size() == r.a.size();
  if (r.op == Op::matmul)
    return r.m >= 2 && r.a.size() == std::size_t{r.m} * r.k && r.b.size() == std::size_t{r.k} * r.n;
  if (static_cast<std::size_t>(r.op) >= kOpCount) return false;
  const OpInfo& info = op_info(r.op);
  return info.kind == OpKind::ew && (info.arity == 1 || r.b.size() == r.a.size());
}

namespace {

// The set's b buffers, made on the first request of two inputs that leases it.
void give_b_buffers(ChunkSet& set) {
  if (!set.in_b.empty()) return;
  try {
    for (std::size_t i = 0; i < ChunkPool::kSlots; ++i) set.in_b.push_back(allocate_host(set.context, set.floats));
  } catch (...) {
    set.in_b.clear();
    throw;
  }
}

}  // namespace

std::unique_ptr<ChunkSet> ChunkPool::lease(const std::shared_ptr<detail::GpuContext>& context,
                                           std::size_t chunk_floats) {
  std::unique_ptr<ChunkSet> set;
  {
    std::lock_guard lock(mutex_);
    if (leased_ >= kMaxSets) return nullptr;
    // A set of a context a recovery replaced holds memory of the lost device: let it go.
    std::erase_if(free_, [&](const auto& s) { return s->context != context || s->floats != chunk_floats; });
    if (!free_.empty()) {
      set = std::move(free_.back());
      free_.pop_back();
    }
    ++leased_;
  }
  if (set) return set;
  try {
    set = std::make_unique<ChunkSet>();
    set->context = context;
    set->floats = chunk_floats;
    for (std::size_t i = 0; i < kSlots; ++i) {
      set->in.push_back(allocate_host(context, chunk_floats));
      set->out.push_back(allocate_host(context, chunk_floats));
    }
    return set;
  } catch (...) {
    std::lock_guard lock(mutex_);
    --leased_;
    throw;
  }
}

void ChunkPool::give_back(std::unique_ptr<ChunkSet> set) {
  std::lock_guard lock(mutex_);
  --leased_;
  if (set) free_.push_back(std::move(set));
}

void ChunkPool::drop() noexcept {
  std::lock_guard lock(mutex_);
  --leased_;
}

namespace {

using Clock = std::chrono::steady_clock;

// A chunk is `chunk_` items: elements (element-wise ops, dot) or rows of A and of the result
// (matmul, whose B is copied once into the set's first b buffer and read by every chunk).
struct ChunkShape {
  std::size_t items = 0;      // elements, or matmul's M rows
  std::size_t in_width = 1;   // floats of a (and b) per item: matmul's K
  std::size_t out_width = 1;  // floats of the result per item: matmul's N
};

class ChunkedInFlight final : public detail::InFlightBatch {
 public:
  ChunkedInFlight(std::shared_ptr<VulkanBatchDevice> device, ChunkPool& pool, std::unique_ptr<ChunkSet> set,
                  Request& request, ChunkShape shape, std::size_t chunk_items, detail::ParallelRunner& parallel)
      : device_(std::move(device)),
        pool_(pool),
        set_(std::move(set)),
        data_(std::move(request.a)),
        b_(std::move(request.b)),
        shape_(shape),
        chunk_(chunk_items),
        chunks_((shape.items + chunk_items - 1) / chunk_items),
        parallel_(parallel),
        slots_(ChunkPool::kSlots) {
    proto_.op = request.op;
    proto_.scalar = request.scalar;
    proto_.scalar2 = request.scalar2;
    proto_.chain = request.chain;
    proto_.k = request.k;
    proto_.n = request.n;
  }

  ~ChunkedInFlight() override {
    const bool idle = std::none_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.inflight != nullptr; });
    for (Slot& s : slots_) s.inflight.reset();  // an unfinished chunk keeps its frame and buffers
    if (!idle) {
      pool_.drop();
      return;
    }
    for (auto* buffers : {&set_->in, &set_->in_b, &set_->out})
      for (HostBuffer& b : *buffers) b.memory()->floats = set_->floats;
    pool_.give_back(std::move(set_));
  }

  // The first chunk (and a matmul's B); the batch is not usable when this throws.
  void start() {
    if (proto_.op == Op::matmul) {
      HostBuffer& shared_b = set_->in_b.front();
      shared_b.memory()->floats = b_.size();
      split_copy(shared_b.data(), b_.data(), b_.size() * sizeof(float), parallel_);
      // The result in A's buffer where it is no longer (N <= K: result row r ends before A's row
      // r + 1, and a chunk's rows are out only after it went in), else a buffer of its own.
      if (shape_.out_width > shape_.in_width) result_.resize(shape_.items * shape_.out_width);
    }
    submit_next();
  }
  // Gives the request its vectors back (the first submit failed).
  void give_back(Request& request) {
    request.a = std::move(data_);
    request.b = std::move(b_);
  }

  bool wait_for(std::chrono::nanoseconds timeout) override {
    const auto until = Clock::now() + timeout;
    fill();
    while (next_out_ < chunks_) {
      Slot& s = slots_[next_out_ % slots_.size()];
      if (!detail::poll_until(*s.inflight, until)) return false;
      Result part;
      s.inflight->take_result(0, part);  // a chunk's own error (its kernel, its buffers) fails the request
      s.inflight.reset();                // its frame goes back
      if (proto_.op == Op::dot) {
        sum_ += part.values.at(0);  // the partial sums add up in double
      } else {
        const std::size_t first = next_out_ * chunk_, items = std::min(chunk_, shape_.items - first);
        float* result = result_.empty() ? data_.data() : result_.data();
        split_copy(result + first * shape_.out_width, set_->out[next_out_ % slots_.size()].data(),
                   items * shape_.out_width * sizeof(float), parallel_);
      }
      ++next_out_;
      fill();
    }
    return true;
  }

  void take_result(std::size_t, Result& out) override {
    out.states.clear();
    if (proto_.op == Op::dot) {
      out.values.assign(1, static_cast<float>(sum_));
    } else if (!result_.empty()) {
      out.values = std::move(result_);
    } else {
      data_.resize(shape_.items * shape_.out_width);  // a matmul's N < K: shrinks, in place
      out.values = std::move(data_);
    }
  }

  std::string pending_state() override {
    std::string s = "chunk " + std::to_string(next_out_) + " of " + std::to_string(chunks_);
    const Slot& slot = slots_[next_out_ % slots_.size()];
    return slot.inflight ? s + ": " + slot.inflight->pending_state() : s;
  }

 private:
  struct Slot {
    Request request;  // lives while its chunk is on the device
    std::unique_ptr<detail::InFlightBatch> inflight;
  };

  // Chunks up to kSlots ahead of the oldest unfinished one.
  void fill() {
    while (next_in_ < chunks_ && next_in_ - next_out_ < slots_.size()) submit_next();
  }

  void submit_next() {
    const std::size_t k = next_in_ % slots_.size(), first = next_in_ * chunk_;
    const std::size_t items = std::min(chunk_, shape_.items - first);
    const std::size_t in_floats = items * shape_.in_width, offset = first * shape_.in_width;
    HostBuffer& in = set_->in[k];
    HostBuffer& out = set_->out[k];
    // The pool's buffers are this batch's alone while leased: each chunk uses a prefix of them.
    in.memory()->floats = in_floats;
    out.memory()->floats = items * shape_.out_width;
    split_copy(in.data(), data_.data() + offset, in_floats * sizeof(float), parallel_);
    Slot& s = slots_[k];
    s.request = proto_;
    s.request.host_a = in.memory();
    if (proto_.op == Op::matmul) {
      s.request.m = static_cast<std::uint32_t>(items);
      s.request.host_b = set_->in_b.front().memory();
    } else if (!b_.empty()) {
      HostBuffer& in_b = set_->in_b[k];
      in_b.memory()->floats = in_floats;
      split_copy(in_b.data(), b_.data() + offset, in_floats * sizeof(float), parallel_);
      s.request.host_b = in_b.memory();
    }
    if (proto_.op != Op::dot) s.request.host_result = out.memory();  // a dot's partial sum comes back as a value
    const Request* one[] = {&s.request};
    s.inflight = device_->submit(one);
    ++next_in_;
  }

  std::shared_ptr<VulkanBatchDevice> device_;
  ChunkPool& pool_;
  std::unique_ptr<ChunkSet> set_;
  std::vector<float> data_;    // the request's input a, then its result (not a dot's; a matmul's when N <= K)
  std::vector<float> b_;       // input b (ops of two inputs; matmul's B)
  std::vector<float> result_;  // a matmul's result when N > K
  double sum_ = 0.0;           // a dot's partial sums so far
  Request proto_;              // op, scalars, chain, matmul's K and N: what every chunk runs
  const ChunkShape shape_;
  const std::size_t chunk_, chunks_;  // items per chunk; chunks
  detail::ParallelRunner& parallel_;
  std::vector<Slot> slots_;
  std::size_t next_in_ = 0, next_out_ = 0;
};

}  // namespace

std::size_t chunk_floats_for(std::size_t n, std::size_t max_chunk_floats) noexcept {
  const std::size_t half = ((n + 1) / 2 + 15) & ~std::size_t{15};  // whole cache lines
  return std::clamp(half, std::min(kMinChunkFloats, max_chunk_floats), max_chunk_floats);
}

std::size_t matmul_chunk_rows(std::size_t m, std::size_t k, std::size_t n, std::size_t buffer_floats) noexcept {
  if (m < 2 || k * n > buffer_floats || std::max(k, n) > buffer_floats) return 0;
  return std::min((m + 1) / 2, buffer_floats / std::max(k, n));
}

std::unique_ptr<detail::InFlightBatch> submit_chunked(std::shared_ptr<VulkanBatchDevice> device, ChunkPool& pool,
                                                      Request& request, std::size_t max_chunk_floats,
                                                      detail::ParallelRunner& parallel) {
  if (request.op == Op::matmul && matmul_chunk_rows(request.m, request.k, request.n, max_chunk_floats) == 0)
    return nullptr;
  auto set = pool.lease(device->current_context(), max_chunk_floats);
  if (!set) return nullptr;
  if (has_float_b(request)) {  // b's slices (a matmul's B) need buffers of their own
    try {
      give_b_buffers(*set);
    } catch (...) {
      pool.give_back(std::move(set));
      throw;
    }
  }
  ChunkShape shape{request.a.size(), 1, 1};
  std::size_t chunk = chunk_floats_for(request.a.size(), max_chunk_floats);
  if (request.op == Op::matmul) {
    shape = {request.m, request.k, request.n};
    chunk = matmul_chunk_rows(request.m, request.k, request.n, max_chunk_floats);
  }
  auto batch = std::make_unique<ChunkedInFlight>(std::move(device), pool, std::move(set), request, shape, chunk, parallel);
  try {
    batch->start();
  } catch (...) {
    batch->give_back(request);
    throw;
  }
  return batch;
}

}  // namespace gpubatch::gpu

// libFuzzer target: request validation. Builds a Request from the bytes (any op of the table,
// lengths, matmul dimensions, both scalars, interpolation mode, packed states, chain steps), calls validate(), which may
// refuse it only with gpubatch::Error(invalid_argument); a request it accepts must run on the CPU
// reference, produce output_bytes() of output, and pass reference::check against itself. Sizes
// stay small (at most 64 elements, 8x8 matrices). Built by fuzz/run.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <cstring>
#include <memory>
#include <vector>

#include "gpubatch/error.hpp"
#include "gpubatch/ops.hpp"
#include "gpubatch/reference.hpp"

namespace {

struct Bytes {
  const std::uint8_t* p;
  std::size_t n;
  std::uint8_t u8() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  float f32() {
    std::uint32_t bits = 0;
    for (int i = 0; i < 4; ++i) bits |= std::uint32_t(u8()) << (8 * i);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  std::vector<float> floats(std::size_t count) {
    std::vector<float> v(count);
    for (auto& x : v) x = (u8() & 0x80) ? f32() : float(int(u8()) - 128) / 16.0f;  // mostly tame values
    return v;
  }
  std::vector<std::uint8_t> bytes(std::size_t count) {
    std::vector<std::uint8_t> v(count);
    for (auto& x : v) x = u8();
    return v;
  }
};

[[noreturn]] void fail(const char* why, const gpubatch::Request& r, const std::string& detail = {}) {
  std::fprintf(stderr, "request_fuzzer: %s: %s %s\n", why, gpubatch::describe_op(r).c_str(), detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpubatch;
  Bytes in{data, size};
  Request r;
  const std::uint8_t op = in.u8();
  r.op = static_cast<Op>(op % kOpCount);  // every op of the table: built-ins, chain, custom (no kernel)
  const std::size_t la = in.u8() % 65, lb = in.u8() % 65;
  r.a = in.floats(la);
  r.b = in.floats(lb);
  r.m = in.u8() % 9;
  r.k = in.u8() % 9;
  r.n = in.u8() % 9;
  if (in.u8() & 1) {  // matmul with consistent sizes more often than chance would give
    r.a = in.floats(std::size_t(r.m) * r.k);
    r.b = in.floats(std::size_t(r.k) * r.n);
  }
  r.scalar = (in.u8() & 1) ? in.f32() : float(in.u8()) / 255.0f;
  r.scalar2 = (in.u8() & 1) ? in.f32() : float(in.u8()) / 255.0f;  // clamp's hi; below lo or NaN at times
  r.mode = static_cast<InterpolationMode>(in.u8() % 3);  // 2 is not a mode
  const std::size_t sa = in.u8() % 70, sb = (in.u8() & 1) ? sa : in.u8() % 70;
  r.states_a = in.bytes(sa);
  r.states_b = in.bytes(sb);
  if (r.op == Op::chain) {
    std::vector<ChainStep> steps(in.u8() % 6);
    const std::uint32_t inputs = in.u8() % 3;
    for (auto& s : steps) {
      s.op = static_cast<Op>(in.u8() % kOpCount);
      s.scalar = float(int(in.u8()) - 128) / 32.0f;
      s.scalar2 = float(int(in.u8()) - 128) / 32.0f;
      s.input = std::int32_t(in.u8() % 4) - 1;
    }
    try {
      r.chain = std::make_shared<ChainShape>(std::move(steps), inputs);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::invalid_argument) fail("ChainShape threw a code other than invalid_argument", r, e.what());
      return 0;
    }
    for (std::uint32_t i = 0; i < inputs + (in.u8() & 1); ++i) r.inputs.push_back(in.floats((in.u8() & 1) ? la : la + 1));
    if (in.u8() & 1) r.b.clear();
  }
  try {
    validate(r);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument) fail("validate threw a code other than invalid_argument", r, e.what());
    return 0;
  }
  if (r.op == Op::custom) fail("a custom request without a kernel passed validation", r);  // a custom request without a kernel must be refused
  Result got;
  try {
    got = reference::run(r);
  } catch (const Error& e) {
    // Only chains with a custom step have no reference, and this target makes no custom steps.
    fail("reference::run refused a valid request", r, e.what());
  }
  const std::size_t out = r.op == Op::interpolate ? got.states.size() : got.values.size() * sizeof(float);
  if (out != output_bytes(r)) fail("output size differs from output_bytes()", r);
  if (auto bad = reference::check(r, got)) fail("reference::check refused the reference's own result", r, *bad);
  return 0;
}

#pragma once
// The host-side twin of shaders/common.glsl: the segment record, the push constants and the
// sizes every kernel assumes. A change here is a change there. Pure data: the plan layer
// (src/plan) lays batches out in these terms, the gpu layer records them.
#include <cstdint>

namespace gpubatch::plan {

inline constexpr std::uint32_t kWorkgroupSize = 256;       // WORKGROUP_SIZE
inline constexpr std::uint32_t kDotBlock = 256 * 4;         // DOT_BLOCK: elements per dot workgroup
inline constexpr std::uint32_t kMatmulTile = 16;            // TILE

struct SegmentRecord {
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  std::uint64_t dst = 0;
  std::uint32_t start = 0;
  std::uint32_t len = 0;
  float p0 = 0.0f;
  std::uint32_t u0 = 0, u1 = 0, u2 = 0;
};
static_assert(sizeof(SegmentRecord) == 48, "must match struct Segment in common.glsl (std430)");

struct PushConstants {
  std::uint64_t segments = 0;
  std::uint64_t blocks = 0;
  std::uint64_t scratch = 0;
  std::uint32_t block_count = 0;
  std::uint32_t grid_x = 0;
  std::uint32_t segment_count = 0;
  std::uint32_t scratch_count = 0;  // dot_final: partial sums in scratch
  float table[16] = {};
};
static_assert(sizeof(PushConstants) <= 128, "push constants must fit the guaranteed 128 bytes");

}  // namespace gpubatch::plan

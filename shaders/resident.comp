#version 460
// Resident mode (DESIGN.md "Resident mode"): one persistent workgroup serves a ring of request
// slots in device-local host-visible memory, without a submission per request. The host writes a
// slot's op, sizes, scalar and data, then its doorbell (the request's ticket); this kernel serves
// tickets in order, writes the result and then the done word on the result side. It leaves when
// the host sets the exit word, or after idle_ns without a request (the host re-arms it).
// Layout (words; must match src/gpu/resident_ring.cpp):
//   control, words 0..63: 0 exit, 1 first ticket to serve, 2 last ticket served, 3 starts
//   slot i at 64 + i * slot_words: 0 doorbell (ticket), 1 done (ticket), 2 op, 3 n, 4 scalar,
//   5 dot's result; data from word 16: a[n], then b[n] for two-input ops.
//   The result side (pc.results): slots of the same layout, in a host-memory buffer of their own
//   (words 1 done, 5 dot's result, 16.. the result), or the ring's own slots (results over a).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_spirv_intrinsics : require
#extension GL_EXT_shader_realtime_clock : require
#extension GL_KHR_memory_scope_semantics : require
#pragma use_vulkan_memory_model
// As in common.glsl: NaN, infinities and -0 pass as IEEE says (relu of NaN is NaN).
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4466], 4461, 32);
#include "math.glsl"

#define WG 256
layout(local_size_x = WG) in;

// The Vulkan memory model orders the protocol: the doorbell is read with acquire and the done
// word written with release, at device scope, so the slot's contents are read only after the
// doorbell and the results are visible before the done word. (Plain volatile reads were not
// enough: lavapipe's compiler hoisted the slot-header reads above the polling loop and served
// stale sizes.) coherent: every access is made available/visible at device scope, which is
// what host-coherent memory needs to be seen by the host while the kernel still runs.
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer RingWords { uint w[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer RingFloats { float v[]; };

layout(push_constant) uniform Params {
  uvec2 ring;       // device address of the ring
  uint slots;       // slots in the ring
  uint slot_words;  // words per slot
  uint idle_ns;     // leave after this long without a request (device clock, nanoseconds)
  uint max_polls;   // ... or after this many polls (a bound that needs no clock)
  uvec2 results;    // the result side's slot 0: a host-memory buffer of slots of the same layout
                    // (done, dot's result, data from word 16), or the ring's slot 0 (in place)
} pc;

const uint CTL_EXIT = 0u, CTL_FIRST = 1u, CTL_SERVED = 2u, CTL_STARTS = 3u, CTL_WORDS = 64u;
const uint SEQ = 0u, DONE = 1u, OP = 2u, COUNT = 3u, SCALAR = 4u, RESULT = 5u, HEADER_WORDS = 16u;
// Resident op codes (src/gpu/resident_ring.cpp resident_op()).
const uint R_RELU = 0u, R_SCALE = 1u, R_SIGMOID = 2u, R_TANH = 3u, R_SWISH = 4u, R_GELU = 5u;
const uint R_ADD = 8u, R_SUB = 9u, R_MUL = 10u, R_LERP = 11u, R_DOT = 16u;

// What thread 0 saw in poll i, in s_work[i & 1]: 0 nothing yet, 1 the doorbell, 2 leave. Two
// entries so that one barrier per poll suffices: thread 0 writes the entry for poll i + 2 only
// after everyone passed the barrier of poll i + 1, so after everyone read poll i's entry.
shared uint s_work[2];
shared uint s_op;
shared uint s_n;
shared float s_p;
shared float partial[WG];

// The same formulas as relu.comp ... gelu.comp (and the CPU reference).
float unary(uint op, float x, float p) {
  if (op == R_RELU) return x < 0.0 ? 0.0 : x;
  if (op == R_SCALE) return x * p;
  if (op == R_SIGMOID) return stable_sigmoid(x);
  if (op == R_TANH) return stable_tanh(x);
  if (op == R_SWISH) return x * stable_sigmoid(x);
  return x * stable_sigmoid(gelu_argument(x));  // R_GELU
}

float binary(uint op, float a, float b, float p) {
  if (op == R_ADD) return a + b;
  if (op == R_SUB) return a - b;
  if (op == R_MUL) return a * b;
  return a + p * (b - a);  // R_LERP, as lerp.comp
}

// Same order of summation as dot_partial.comp for one block (n <= 1024): 4 items per thread,
// then the shared-memory tree, so that the reference's bound for dot holds unchanged.
float dot_of(RingFloats f, uint data, uint n) {
  uint lid = gl_LocalInvocationIndex;
  float sum = 0.0;
  for (uint i = 0u; i < 4u; ++i) {
    uint k = i * WG + lid;
    if (k < n) sum += f.v[data + k] * f.v[data + n + k];
  }
  partial[lid] = sum;
  barrier();
  for (uint stride = WG / 2u; stride > 0u; stride /= 2u) {
    if (lid < stride) partial[lid] += partial[lid + stride];
    barrier();
  }
  return partial[0];
}

// Every loop here runs the same number of times in every invocation, and the doorbell is polled
// in a loop that all invocations run (thread 0 reads, a barrier shares what it saw): lavapipe
// runs a workgroup's invocations as coroutines that switch at barriers and on loop back-edges,
// so a loop only thread 0 runs (the first design) let the others run through barriers
// unsynchronised. On a GPU the barrier per poll costs little next to the poll's memory read.
void main() {
  RingWords r = RingWords(pc.ring);
  RingFloats f = RingFloats(pc.ring);
  RingWords o = RingWords(pc.results);
  RingFloats fo = RingFloats(pc.results);
  uint lid = gl_LocalInvocationIndex;
  uint ticket = r.w[CTL_FIRST];  // written by the host before the submission
  if (lid == 0u) r.w[CTL_STARTS] = r.w[CTL_STARTS] + 1u;
  for (;;) {
    uint base = CTL_WORDS + ((ticket - 1u) % pc.slots) * pc.slot_words;
    uint start = clockRealtime2x32EXT().x;  // low word: differences of a few ms never wrap badly
    for (uint polls = 1u;; ++polls) {
      if (lid == 0u) {
        uint state = 0u;
        if (atomicLoad(r.w[base + SEQ], gl_ScopeDevice, gl_StorageSemanticsBuffer,
                       gl_SemanticsAcquire | gl_SemanticsMakeVisible) == ticket) {
          state = 1u;  // after the acquire: the host wrote the header before the doorbell
          s_op = r.w[base + OP];
          s_n = r.w[base + COUNT];
          s_p = uintBitsToFloat(r.w[base + SCALAR]);
        } else if (atomicLoad(r.w[CTL_EXIT], gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed) != 0u ||
                   clockRealtime2x32EXT().x - start > pc.idle_ns || polls >= pc.max_polls) {
          state = 2u;
        }
        s_work[polls & 1u] = state;
      }
      barrier();  // shares what thread 0 saw (workgroup memory only: cheap, once per poll)
      uint state = s_work[polls & 1u];
      if (state == 2u) return;
      if (state == 1u) break;
    }
    // Every invocation reads the slot after thread 0 saw its doorbell (its acquire, then this
    // barrier's release/acquire on buffer memory): once per request, not once per poll.
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                   gl_SemanticsAcquireRelease | gl_SemanticsMakeAvailable | gl_SemanticsMakeVisible);
    uint op = s_op;  // rewritten only for a later ticket, after the barrier below
    uint n = s_n;
    float p = s_p;
    uint data = base + HEADER_WORDS;
    uint obase = ((ticket - 1u) % pc.slots) * pc.slot_words;  // on the result side
    uint odata = obase + HEADER_WORDS;
    if (op == R_DOT) {
      float d = dot_of(f, data, n);
      if (lid == 0u) fo.v[obase + RESULT] = d;
    } else if (op >= R_ADD) {
      for (uint k0 = 0u; k0 < n; k0 += WG) {
        uint k = k0 + lid;
        if (k < n) fo.v[odata + k] = binary(op, f.v[data + k], f.v[data + n + k], p);
      }
    } else {
      for (uint k0 = 0u; k0 < n; k0 += WG) {
        uint k = k0 + lid;
        if (k < n) fo.v[odata + k] = unary(op, f.v[data + k], p);
      }
    }
    // Results before the done word: every invocation's writes are made available, then thread
    // 0 (after the barrier, so after all of them) publishes done with release.
    controlBarrier(gl_ScopeWorkgroup, gl_ScopeDevice, gl_StorageSemanticsBuffer | gl_StorageSemanticsShared,
                   gl_SemanticsAcquireRelease | gl_SemanticsMakeAvailable | gl_SemanticsMakeVisible);
    if (lid == 0u) {
      atomicStore(r.w[CTL_SERVED], ticket, gl_ScopeDevice, gl_StorageSemanticsBuffer, gl_SemanticsRelaxed);
      atomicStore(o.w[obase + DONE], ticket, gl_ScopeDevice, gl_StorageSemanticsBuffer,
                  gl_SemanticsRelease | gl_SemanticsMakeAvailable);
    }
    ticket += 1u;
  }
}

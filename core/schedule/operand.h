// SPDX-License-Identifier: Apache-2.0
// Operand: one buffer an op reads or writes. Ops list their operands in their program's operand
// table (RankProgram::operands, Op::first_operand / Op::num_operands), so every consumer binds
// buffers from the IR instead of inferring them: a transient buffer by its id, a resident buffer
// by its index in RankProgram::resident; the group whose layout indexes it and which part of the
// layout it holds (Extent, core/schedule/group_geometry.h) place its elements.
#pragma once

#include <cstdint>
#include <string_view>

namespace fsdp {

enum class BufferSpace : std::uint8_t {
  kTransient,  // allocated and freed within the step: id in [0, RankProgram::num_buffers)
  kResident,   // lives across steps: index into RankProgram::resident
};

// How an op uses an operand. kWrite overwrites every element the op touches; kReadWrite reads
// them first (accumulation, in-place reduction, an optimizer update).
enum class Access : std::uint8_t { kRead, kWrite, kReadWrite };

// Which part of a group's layout a buffer holds: the whole layout (element 0 is layout element
// 0), or one rank's local range under the parameter, gradient or optimizer placements (element 0
// is that range's start, which depends on the rank). kNone: the buffer is not indexed by a
// layout (activations).
enum class Extent : std::uint8_t { kNone, kFull, kParameter, kGradient, kOptimizer };

struct Operand {
  BufferSpace space = BufferSpace::kTransient;
  Access access = Access::kRead;
  Extent extent = Extent::kNone;
  std::int32_t buffer = -1;  // transient id or resident index
  std::int32_t group = -1;   // flat index into the schedule's geometry groups; -1 for none
  friend bool operator==(const Operand&, const Operand&) = default;
};

inline bool reads(Access a) { return a != Access::kWrite; }

// How a unit's forward, backward or recompute names the weights of one of its groups: a read of a
// layout-indexed buffer (the unsharded buffer, the synced or the resident weight).
inline bool is_weight_read(const Operand& o) {
  return o.access == Access::kRead && o.group >= 0 &&
         (o.extent == Extent::kFull || o.extent == Extent::kParameter ||
          o.extent == Extent::kOptimizer);
}
inline bool writes(Access a) { return a != Access::kRead; }

std::string_view to_string(BufferSpace space);  // "transient", "resident"
std::string_view to_string(Access access);      // "read", "write", "read-write"
std::string_view to_string(Extent extent);      // "none", "full", "parameter", ...

}  // namespace fsdp

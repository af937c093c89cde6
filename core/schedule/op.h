// SPDX-License-Identifier: Apache-2.0
// Op: one instruction of a rank's schedule program. Ops are issued in program order (the order a
// host thread enqueues work) onto streams; each stream runs its ops in that order, and streams
// synchronise only through record/wait events. A plain, trivially copyable record of indices.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/model/dtype.h"

namespace fsdp {

// Streams of one rank: compute, all-gather, reduce-scatter. With a unified communication stream
// the reduce-scatter work is issued on the all-gather stream (§4.9).
enum class StreamKind : std::uint8_t { kCompute = 0, kAllGather = 1, kReduceScatter = 2 };
inline constexpr int kNumStreams = 3;

enum class OpKind : std::uint8_t {
  kAlloc,           // allocate `bytes` for buffer `buffer` (class `buffer_class`)
  kFree,            // release buffer `buffer`
  kAllGather,       // collective on mesh axis `axis`: this rank contributes `elements`
  kReduceScatter,   // collective on `axis`: this rank receives `elements` (reduced)
  kAllReduce,       // collective on `axis` over `elements`
  kForward,         // a unit's forward pass: `flops`, `mem_bytes`
  kBackward,        // a unit's backward pass (2x forward FLOPs)
  kRecompute,       // the forward recomputed inside backward (activation checkpointing)
  kGradCopy,        // copy autograd grads into the partial-grad buffer (`mem_bytes`)
  kCast,            // cast main weights into model weights after the step (`mem_bytes`)
  kOptimizerStep,   // the optimizer update over this rank's shard (`flops`, `mem_bytes`)
  kGradAccumulate,  // add a local gradient into the main-grad accumulator (`mem_bytes`)
  kRecord,          // record event `event` on this stream
  kWait,            // this stream waits until event `event` has been recorded and reached
  kAllToAll,        // collective on `axis`: this rank sends `elements` in all, 1/n to each member
};
inline constexpr int kNumOpKinds = static_cast<int>(OpKind::kAllToAll) + 1;

// What a buffer holds (fsdp-behaviour.md §5). Resident classes live across steps; the rest are transient.
enum class BufferClass : std::uint8_t {
  kShardedWeights,    // main weights and model-weight shards (resident)
  kMainGrads,         // main gradients (resident, or per step for ZeRO-1/HFSDP)
  kOptimizerState,    // e.g. Adam's two moments (resident)
  kUnshardedWeights,  // full weights of a unit while it computes, gathered model weights
  kPartialGrads,      // full partial-grad buffers awaiting reduction
  kUnitGrads,         // autograd's full gradients of a unit before the copy
  kActivations,       // activations kept from forward for backward
};
inline constexpr int kNumBufferClasses = 7;

enum class Phase : std::uint8_t { kForward, kBackward, kStep };

struct Op {
  OpKind kind = OpKind::kRecord;
  StreamKind stream = StreamKind::kCompute;
  Phase phase = Phase::kForward;
  DType dtype = DType::kBf16;
  BufferClass buffer_class = BufferClass::kUnshardedWeights;
  std::int32_t unit = -1;        // model unit, -1 for none
  std::int32_t group = -1;       // parameter group within the unit, -1 for none
  std::int32_t microbatch = -1;  // -1 for step-level ops
  std::int32_t axis = -1;        // mesh axis of a collective
  std::int32_t event = -1;       // record/wait
  std::int32_t buffer = -1;      // alloc/free
  std::int32_t collective = -1;  // index into Schedule::collectives()
  std::int64_t elements = 0;     // collectives and allocations
  std::int64_t bytes = 0;        // allocation size; collective payload of this rank
  std::int64_t flops = 0;        // compute ops
  std::int64_t mem_bytes = 0;    // compute ops: bytes read and written
  // The op's operands: RankProgram::operands[first_operand, first_operand + num_operands).
  std::int32_t first_operand = 0;
  std::int32_t num_operands = 0;
  friend bool operator==(const Op&, const Op&) = default;
};

std::string_view to_string(StreamKind stream);       // "compute", "all-gather", "reduce-scatter"
std::string_view to_string(OpKind kind);             // "alloc", "all-gather", "forward", ...
std::string_view to_string(BufferClass buffer_class);  // "unsharded_weights", ...
std::string_view to_string(Phase phase);             // "forward", "backward", "step"

inline bool is_collective(OpKind k) {
  return k == OpKind::kAllGather || k == OpKind::kReduceScatter || k == OpKind::kAllReduce ||
         k == OpKind::kAllToAll;
}
inline bool is_compute(OpKind k) {
  return k == OpKind::kForward || k == OpKind::kBackward || k == OpKind::kRecompute ||
         k == OpKind::kGradCopy || k == OpKind::kCast || k == OpKind::kOptimizerStep ||
         k == OpKind::kGradAccumulate;
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// Internal to sim/engine. StreamProgram: a Schedule compiled for the event loop, once per
// PreparedSimulation. Each program's ops are split into per-stream lists of 16-byte Steps in issue
// order (one serial list without overlap), every op's base cost is computed (compute durations,
// collective latency and transfer terms, bus bytes), op ids are checked against their programs'
// ranges, and the per-class state a run starts from (resident buffers allocated in the
// caching-allocator model) is built. Read-only while the loop runs. See docs/design/simulator.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/expected.h"
#include "core/hardware/hardware.h"
#include "core/schedule/op.h"
#include "core/schedule/schedule.h"
#include "sim/engine/rank_classes.h"
#include "sim/engine/sim_result.h"
#include "sim/engine/sim_time.h"
#include "sim/engine/simulator.h"
#include "sim/model/caching_allocator.h"
#include "sim/model/cost_model.h"

namespace fsdp::sim::internal {

// What the loop needs of one op, stored at the op's position in its program's stream lists (so a
// stream walks a contiguous array instead of the 72-byte Ops of its program): 16 bytes, as the
// loop is bound by the loads of its per-op data. The op's index in its program, needed only for
// traces and messages, sits in a parallel array.
struct Step {
  OpKind kind = OpKind::kRecord;
  StreamKind stream = StreamKind::kCompute;  // the op's own stream (also without overlap)
  std::uint8_t buffer_class = 0;             // alloc/free, clamped to [0, kNumBufferClasses)
  std::int32_t arg = 0;    // alloc/free: buffer; record/wait: event; collectives: index into colls
  std::int64_t value = 0;  // alloc: size in bytes; compute: base duration in ps
};
static_assert(sizeof(Step) == 16);

// The costs of one collective op (at its position in the stream lists).
struct CollStep {
  SimDuration latency;   // unshared
  SimDuration transfer;  // bandwidth term at the full link rate
  double bus_bytes = 0;
  std::int32_t axis = 0;
  std::uint8_t link = 0;  // 1 the node's NICs, 0 NVLink (LinkSharing's link index)
};

struct StreamProgram {
  std::int32_t num_classes = 0;
  std::vector<AxisLink> links;  // per mesh axis
  // Per program: its first op's index in the flat op numbering.
  std::vector<std::int64_t> op_base;
  // Per position in the stream lists (program by program, stream by stream; a stream's cursor
  // walks them).
  std::vector<Step> steps;
  std::vector<std::int32_t> step_op;  // index into the program's ops
  std::vector<CollStep> colls;        // the collectives' costs, in position order
  // Per program stream list p * kNumStreams + s: its positions [list_begin, list_end).
  std::vector<std::int64_t> list_begin, list_end;
  // Per class (size num_classes + 1): the first of its events and buffers in the flat per-run
  // arrays.
  std::vector<std::int64_t> event_base, buffer_base;
  // Per class: the state at the start of a run (resident buffers allocated), and the capacities
  // to reserve for its interval lists.
  std::vector<MemoryResult> init_memory;
  std::vector<CachingAllocator> init_allocator;
  std::vector<std::size_t> comm_reserve;
  std::size_t trace_reserve = 0;  // ops of all classes: the trace's capacity
};

// Validates the schedule against `classes` and compiles it. Errors: kFailedPrecondition for no
// programs or collective sequences that differ between programs; kOutOfRange for an op naming a
// stream, mesh axis, event or buffer outside its range.
Expected<StreamProgram> compile_program(const Schedule& schedule, const Hardware& hardware,
                                        const SimOptions& options, const SimClasses& classes);

// "12 (forward, unit 'layers.3', microbatch 1)": op `op_index` of class `cls`'s program, for
// messages.
std::string describe_op(const Schedule& schedule, const SimClasses& classes, std::int32_t cls,
                        std::int32_t op_index);

}  // namespace fsdp::sim::internal

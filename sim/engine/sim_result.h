// SPDX-License-Identifier: Apache-2.0
// SimResult: what one simulated optimizer step produced (step time, per-class compute, exposed
// communication, memory, bus bandwidth, and optionally a trace and an op log). The value types
// only: renderers (sim/report, viz) include this header; code that runs a simulation includes
// sim/engine/simulator.h. Field meanings and formulas: docs/design/simulator.md ("Results").
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/schedule/op.h"
#include "sim/engine/sim_time.h"
#include "sim/model/cost_model.h"

namespace fsdp::sim {

// Communication of one class on one stream and mesh axis.
struct CommStat {
  StreamKind stream = StreamKind::kAllGather;
  std::int32_t axis = 0;
  std::int64_t count = 0;
  SimDuration busy;     // sum of collective durations
  SimDuration exposed;  // the part of `busy` not overlapped by the class's compute
  friend bool operator==(const CommStat&, const CommStat&) = default;
};

struct MemoryResult {
  // Device memory less what the runtime holds outside the caching allocator (CUDA context,
  // NCCL buffers): what the IR's buffers and the allocator's segments may use.
  std::int64_t capacity_bytes = 0;
  std::int64_t runtime_outside_allocator_bytes = 0;
  // The runtime's workspaces served by the allocator (cuBLAS): in the reserved bytes only.
  std::int64_t runtime_allocator_bytes = 0;
  std::int64_t resident_bytes = 0;  // buffers live across steps
  std::array<std::int64_t, kNumBufferClasses> resident_by_class{};
  std::int64_t peak_bytes = 0;      // resident + transient at the peak instant
  std::array<std::int64_t, kNumBufferClasses> peak_by_class{};  // composition at the peak
  SimTime peak_time;
  std::int32_t peak_op = -1;        // op (program index) that reached the peak; -1: resident only
  bool fits = true;  // the allocated bytes alone stay within capacity_bytes
  std::int32_t first_overflow_op = -1;  // first op exceeding capacity; -1 if resident does
  SimTime first_overflow_time;
  std::int64_t end_bytes = 0;       // resident + transient after the step
  // The caching-allocator model (sim/model/caching_allocator.h): segments reserved from the device.
  std::int64_t peak_reserved_bytes = 0;
  std::int64_t end_reserved_bytes = 0;  // never below the peak: segments are not returned
  bool reserved_fits = true;
  std::int32_t first_reserved_overflow_op = -1;  // first op whose reservation exceeds capacity
  // Most bytes live at any instant per class (resident included), each class on its own.
  std::array<std::int64_t, kNumBufferClasses> high_water_by_class{};
  friend bool operator==(const MemoryResult&, const MemoryResult&) = default;
};

struct ClassResult {
  std::int64_t representative_rank = 0;
  std::int64_t num_ranks = 0;
  std::int32_t program = 0;        // index into Schedule::programs()
  bool straggler = false;          // its ranks are stragglers
  SimTime end;                     // the last op of the class finishes
  SimDuration compute;             // compute-stream busy time
  SimDuration communication;       // union of collective intervals on all streams
  SimDuration exposed_communication;  // that union minus the compute intervals
  double overlap_fraction = 1.0;   // 1 - exposed / communication (1 when there is none)
  std::vector<CommStat> comm;      // per (stream, axis) that has collectives, sorted
  MemoryResult memory;
  friend bool operator==(const ClassResult&, const ClassResult&) = default;
};

struct CollectiveKindStat {
  OpKind kind = OpKind::kAllGather;
  std::int32_t axis = 0;
  std::int64_t count = 0;     // over all classes
  double bus_bytes = 0;
  SimDuration time;
  double bus_bytes_per_s() const {
    return time.ps() > 0 ? bus_bytes / time.seconds() : 0.0;
  }
  friend bool operator==(const CollectiveKindStat&, const CollectiveKindStat&) = default;
};

// One op that took simulated time (compute or collective), for traces. `cls` indexes
// SimResult::classes; `op` indexes the ops of that class's program (ClassResult::program).
struct TraceRecord {
  std::int32_t cls = 0;
  StreamKind stream = StreamKind::kCompute;
  std::int32_t op = 0;
  SimTime start;
  SimTime end;
  friend bool operator==(const TraceRecord&, const TraceRecord&) = default;
};

// The live bytes of class `cls` after an alloc or free at `t` (SimOptions::record_trace only),
// also split by buffer class: by_class sums to bytes.
struct MemorySample {
  std::int32_t cls = 0;
  SimTime t;
  std::int64_t bytes = 0;  // resident + transient after the op at t
  std::array<std::int64_t, kNumBufferClasses> by_class{};  // indexed by BufferClass
  friend bool operator==(const MemorySample&, const MemorySample&) = default;
};

// One op as the simulator executed it (SimOptions::record_ops), for cross-checks with a real
// backend: records, waits, allocs and frees run at an instant (start == end). memory_delta is
// what an alloc (+bytes) or free (-bytes of its alloc) changed, 0 for other ops.
struct OpRecord {
  std::int32_t cls = 0;
  StreamKind stream = StreamKind::kCompute;
  std::int32_t op = 0;
  SimTime start;
  SimTime end;
  std::int64_t memory_delta = 0;
  friend bool operator==(const OpRecord&, const OpRecord&) = default;
};

struct SimResult {
  SimTime step_time;                 // the slowest class's end
  // Stragglers: how many ranks, and the step time of the same run without them (== step_time
  // when there are none), so step_time - baseline_step_time is what they cost.
  std::int64_t straggler_ranks = 0;
  SimTime baseline_step_time;
  // One per simulated class: the Schedule's programs, split further by stragglers (class c is
  // program c when there are none).
  std::vector<ClassResult> classes;
  std::vector<CollectiveKindStat> collectives;  // per (kind, axis), sorted
  std::vector<AxisLink> links;       // per mesh axis
  // Every class fits device memory: its caching allocator's peak reservation plus the runtime
  // outside the allocator within the device (the one fit verdict, docs/cli.md "Fit").
  bool fits = true;
  // SimOptions::stop_at_memory_overflow ended the run early (fits is false): the figures cover
  // only the part that ran.
  bool stopped_at_memory_overflow = false;
  std::int64_t events = 0;           // events processed
  std::vector<TraceRecord> trace;    // when SimOptions::record_trace
  std::vector<MemorySample> memory_trace;  // when SimOptions::record_trace
  std::vector<OpRecord> op_log;      // when SimOptions::record_ops, in execution order
  friend bool operator==(const SimResult&, const SimResult&) = default;
};

}  // namespace fsdp::sim

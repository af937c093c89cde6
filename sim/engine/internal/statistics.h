// SPDX-License-Identifier: Apache-2.0
// Internal to sim/engine. The statistics of one run, accumulated by the event loop as it goes
// (docs/design/simulator.md, "Results"): per class the compute time and the exposure of its
// communication (ClassClock: no interval lists are merged afterwards), each collective as it ran
// (CommInterval), and the memory over time (live bytes by buffer class, high-water marks, the
// peak and its composition, the first overflows); assemble_result turns them into the SimResult.
// The accounting called per op is inline: the loop runs it at every event.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/schedule/op.h"
#include "sim/engine/internal/program.h"
#include "sim/engine/rank_classes.h"
#include "sim/engine/sim_result.h"
#include "sim/engine/sim_time.h"
#include "sim/model/caching_allocator.h"

namespace fsdp::sim::internal {

// One collective of a class as it ran, for the statistics in assemble_result().
struct CommInterval {
  SimTime start;
  SimTime end;
  SimDuration exposed;    // the part of [start, end) during which the class computed nothing
  std::int32_t coll = 0;  // index into StreamProgram::colls
  StreamKind stream = StreamKind::kAllGather;
  OpKind kind = OpKind::kAllGather;
};

// Time accounting of one class, kept as the run goes so that the exposure of communication needs
// no pass over interval lists afterwards. compute_before(t), the time before t during which at
// least one compute op of the class ran, is compute_union plus the open stretch since
// compute_since; the compute overlap of any [s, e) is compute_before(e) - compute_before(s), so a
// collective (or a stretch of communication) records compute_before at its start and subtracts
// at its end.
struct ClassClock {
  std::int32_t computing = 0;           // compute ops running
  SimTime compute_since;                // when `computing` last became positive
  std::int64_t compute_union = 0;       // ps with computing > 0 before compute_since
  SimDuration compute;                  // sum of compute op durations
  SimTime comm_since;                   // when the class's collectives in flight last became > 0
  std::int64_t comm_compute_start = 0;  // compute_before(comm_since)
  SimDuration communication;            // union of collective intervals so far
  SimDuration exposed;                  // that union minus compute

  // Compute time of the class before `now` (now is not before any event seen so far).
  std::int64_t compute_before(SimTime now) const {
    return compute_union + (computing > 0 ? (now - compute_since).ps() : 0);
  }
  // A compute op starts at `now`.
  void begin_compute(SimTime now) {
    if (computing++ == 0) {
      compute_since = now;
    }
  }
  // A compute op that started at `start` ends at `now`.
  void end_compute(SimTime start, SimTime now) {
    compute += now - start;
    if (--computing == 0) {
      compute_union += (now - compute_since).ps();
    }
  }
  // The class's first collective in flight starts at `now` (a stretch of communication begins).
  void begin_communication(SimTime now) {
    comm_since = now;
    comm_compute_start = compute_before(now);
  }
  // Its last collective in flight ends at `now`: the stretch joins the union, less its compute.
  void end_communication(SimTime now) {
    const SimDuration stretch = now - comm_since;
    communication += stretch;
    exposed += stretch - SimDuration::ps(compute_before(now) - comm_compute_start);
  }
  // The exposure of a collective that ran [start, now) and noted compute_before(start).
  SimDuration exposed_since(SimTime start, std::int64_t compute_at_start, SimTime now) const {
    return (now - start) - SimDuration::ps(compute_before(now) - compute_at_start);
  }
};

// Memory over time of one class: `by_class` and `total` are its live bytes (resident included),
// `m` its MemoryResult. Called with the loop's hoisted references (see Simulator::advance).
using ClassBytes = std::array<std::int64_t, kNumBufferClasses>;

// An alloc of `delta` bytes of buffer class `bc`: the live bytes and the class's high-water mark.
[[gnu::always_inline]] inline void add_live_bytes(MemoryResult& m, ClassBytes& by_class,
                                                  std::int64_t& total, std::size_t bc,
                                                  std::int64_t delta) {
  by_class[bc] += delta;
  total += delta;
  m.high_water_by_class[bc] = std::max(m.high_water_by_class[bc], by_class[bc]);
}

// After an alloc by op `op` at `now`: a new peak records its composition, time and op, and the
// first overflow of the capacity.
[[gnu::always_inline]] inline void note_peak(MemoryResult& m, const ClassBytes& by_class,
                                             std::int64_t total, const SimTime& now,
                                             const std::int32_t& op) {
  if (total > m.peak_bytes) {
    m.peak_bytes = total;
    m.peak_by_class = by_class;
    m.peak_time = now;
    m.peak_op = op;
    // The first overflow is a new peak: an earlier peak above the capacity already cleared
    // fits. When the resident buffers alone overflow, fits is false and no op is blamed.
    if (total > m.capacity_bytes && m.fits) {
      m.fits = false;
      m.first_overflow_op = op;
      m.first_overflow_time = now;
    }
  }
}

// After an alloc by op `op`: the caching allocator's peak reservation and its first overflow.
[[gnu::always_inline]] inline void note_reserved(MemoryResult& m, std::int64_t reserved,
                                                 const std::int32_t& op) {
  if (reserved > m.peak_reserved_bytes) {
    m.peak_reserved_bytes = reserved;
    if (reserved > m.capacity_bytes && m.reserved_fits) {
      m.reserved_fits = false;
      m.first_reserved_overflow_op = op;
    }
  }
}

// A free of `delta` (< 0) bytes of buffer class `bc`. It lowers the totals and reserves nothing,
// so it moves no high-water mark, peak or overflow: those only change at an alloc.
[[gnu::always_inline]] inline void remove_live_bytes(ClassBytes& by_class, std::int64_t& total,
                                                     std::size_t bc, std::int64_t delta) {
  by_class[bc] += delta;
  total += delta;
}

// Everything a run accumulates for its result.
struct RunStats {
  // Per class.
  std::vector<ClassClock> clock;
  std::vector<std::vector<CommInterval>> comm_intervals;  // in end order
  std::vector<ClassBytes> mem_by_class;                   // live bytes by buffer class
  std::vector<std::int64_t> mem_total;                    // live bytes
  std::vector<MemoryResult> memory;
  // Per stream g = class * kNumStreams + s.
  std::vector<SimTime> stream_end_time;
  std::vector<std::int64_t> coll_compute_start;  // compute_before(op start) of a collective
  // When SimOptions::record_trace / record_ops.
  std::vector<TraceRecord> trace;
  std::vector<MemorySample> memory_trace;
  std::vector<OpRecord> op_log;

  // The state at the start of a run: the program's resident memory, nothing else. Keeps the
  // capacity of the previous run's vectors.
  void reset(const StreamProgram& program, bool record_trace);
};

// The SimResult of a finished run (every stream done); moves the trace and op log out of
// `stats`. `allocator`: per class, the caching allocator at the end; `num_axes`: the mesh's
// axes; `events`: events processed. baseline_step_time is step_time.
SimResult assemble_result(RunStats& stats, const StreamProgram& program,
                          const SimClasses& classes, std::span<const CachingAllocator> allocator,
                          std::int64_t num_axes, std::int64_t events);

}  // namespace fsdp::sim::internal

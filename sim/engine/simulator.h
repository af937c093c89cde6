// SPDX-License-Identifier: Apache-2.0
// simulate: executes one optimizer step of a Schedule on a virtual mesh of `hardware` devices as a
// discrete-event simulation. Each rank class (identical ranks, refined by stragglers; see
// rank_classes.h) is simulated once; per class each stream runs its ops in issue order; a wait
// blocks only its stream until the record of its event has run; a collective starts when every
// class of its axis group has reached it (matched by position among its stream's collectives),
// shares link bandwidth with concurrent collectives on the same links, and ends for all of them
// together; compute slows while collectives run on the device (SM contention); buffers are
// allocated and freed at the simulated instant their op runs, through a caching-allocator model.
// Deterministic: the same inputs give the same SimResult bit for bit. See docs/design/simulator.md.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/base/expected.h"
#include "core/hardware/hardware.h"
#include "core/schedule/schedule.h"
#include "sim/engine/sim_time.h"
#include "sim/engine/straggler.h"
#include "sim/model/cost_model.h"

namespace fsdp::sim {

struct SimOptions {
  CostOptions cost;
  Straggler straggler;        // when active, the step is also simulated without it (baseline)
  bool contention = true;     // concurrent collectives on the same links share their bandwidth
  bool overlap = true;        // false: each class runs all its ops one at a time, in issue order
  bool record_trace = false;  // fill SimResult::trace and SimResult::memory_trace
  bool record_ops = false;    // fill SimResult::op_log (every op, instant ones included)
};

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
  std::int64_t capacity_bytes = 0;  // device memory
  std::int64_t resident_bytes = 0;  // buffers live across steps
  std::array<std::int64_t, kNumBufferClasses> resident_by_class{};
  std::int64_t peak_bytes = 0;      // resident + transient at the peak instant
  std::array<std::int64_t, kNumBufferClasses> peak_by_class{};  // composition at the peak
  SimTime peak_time;
  std::int32_t peak_op = -1;        // op (program index) that reached the peak; -1: resident only
  bool fits = true;
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

struct MemorySample {
  std::int32_t cls = 0;
  SimTime t;
  std::int64_t bytes = 0;  // resident + transient after the op at t
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
  bool fits = true;                  // every class fits device memory
  std::int64_t events = 0;           // events processed
  std::vector<TraceRecord> trace;    // when SimOptions::record_trace
  std::vector<MemorySample> memory_trace;
  std::vector<OpRecord> op_log;      // when SimOptions::record_ops, in execution order
  friend bool operator==(const SimResult&, const SimResult&) = default;
};

// Errors: kOutOfRange for a straggler rank outside the mesh; kFailedPrecondition for a deadlock
// (a wait whose event is never recorded, a collective some member class never reaches), naming
// each blocked class (by representative rank), stream and op; for a buffer allocated twice or
// freed while not allocated; for classes whose collective sequences differ on a stream.
// kOutOfRange for an op id outside its program's ranges. Same as prepare_simulation + run.
Expected<SimResult> simulate(const Schedule& schedule, const Hardware& hardware,
                             const SimOptions& options = {});

// A schedule prepared once for simulation: the rank classes, every op's base cost, the stream
// lists and the resident-memory state are computed by prepare_simulation; run() then only executes
// the event loop (reusing its buffers), so repeated steps and benchmarks of the engine pay the
// preparation once. Every run() returns the same SimResult as simulate() with the same arguments.
// References `schedule` and `hardware`, which must outlive it. Movable, not copyable; run() is not
// thread-safe (use one PreparedSimulation per thread).
class PreparedSimulation {
 public:
  PreparedSimulation(PreparedSimulation&&) noexcept;
  PreparedSimulation& operator=(PreparedSimulation&&) noexcept;
  ~PreparedSimulation();

  // Errors: those of simulate() found while running (deadlocks, buffers allocated twice or freed
  // while not allocated).
  Expected<SimResult> run();

 private:
  struct Impl;
  explicit PreparedSimulation(std::unique_ptr<Impl> impl);
  friend Expected<PreparedSimulation> prepare_simulation(const Schedule&, const Hardware&,
                                                         const SimOptions&);
  std::unique_ptr<Impl> impl_;
};

// Errors: those of simulate() found before running (stragglers outside the mesh, ops naming
// streams, axes, events or buffers outside their ranges, collective sequences that differ).
Expected<PreparedSimulation> prepare_simulation(const Schedule& schedule, const Hardware& hardware,
                                                const SimOptions& options = {});

}  // namespace fsdp::sim

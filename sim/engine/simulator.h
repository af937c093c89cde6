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
// The result types are in sim_result.h (renderers include that one); the engine's parts are
// program.cc (the per-stream program compiled from the Schedule), event_loop.cc (the event loop),
// internal/link_sharing.h (the flow and contention model) and statistics.cc (exposure, memory
// over time, the SimResult).
#pragma once

#include <memory>

#include "core/base/expected.h"
#include "core/hardware/hardware.h"
#include "core/schedule/schedule.h"
#include "sim/engine/sim_result.h"
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
  // End the run as soon as a class's caching-allocator reservation passes the device's memory:
  // the configuration cannot fit, and the rest of its step is not needed (the planner,
  // docs/design/planner.md). The result then has fits false, stopped_at_memory_overflow set and
  // figures of the part that ran.
  bool stop_at_memory_overflow = false;
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

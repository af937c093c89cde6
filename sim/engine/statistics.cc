// SPDX-License-Identifier: Apache-2.0
// The statistics of a run (internal/statistics.h): the per-run reset of what the loop accumulates,
// and the SimResult assembled from it once every stream is done.
#include "sim/engine/internal/statistics.h"

#include <utility>

namespace fsdp::sim::internal {

void RunStats::reset(const StreamProgram& program, bool record_trace) {
  const std::size_t nc = static_cast<std::size_t>(program.num_classes);
  const std::size_t ns = nc * kNumStreams;
  stream_end_time.assign(ns, SimTime());
  coll_compute_start.assign(ns, 0);
  clock.assign(nc, ClassClock());
  // Copy-assignment keeps the capacity of the previous run's vectors.
  memory = program.init_memory;
  mem_by_class.resize(nc);
  mem_total.resize(nc);
  comm_intervals.resize(nc);
  for (std::size_t c = 0; c < nc; ++c) {
    mem_by_class[c] = program.init_memory[c].resident_by_class;
    mem_total[c] = program.init_memory[c].resident_bytes;
    comm_intervals[c].clear();
    comm_intervals[c].reserve(program.comm_reserve[c]);
  }
  trace.clear();
  memory_trace.clear();
  op_log.clear();
  if (record_trace) {
    trace.reserve(program.trace_reserve);
    memory_trace.reserve(program.trace_reserve);
  }
}

SimResult assemble_result(RunStats& stats, const StreamProgram& program,
                          const SimClasses& classes, std::span<const CachingAllocator> allocator,
                          std::int64_t num_axes, std::int64_t events) {
  SimResult result;
  result.links = program.links;
  result.events = events;
  result.baseline_step_time = SimTime();
  std::vector<CollectiveKindStat> kinds;
  // Collective axes were checked against the mesh in compile_program().
  const std::size_t ndim = static_cast<std::size_t>(num_axes);
  std::vector<std::int32_t> comm_slot(kNumStreams * ndim);       // per class
  std::vector<std::int32_t> kind_slots(kNumOpKinds * ndim, -1);  // over all classes
  for (std::size_t c = 0; c < static_cast<std::size_t>(program.num_classes); ++c) {
    ClassResult cr;
    cr.representative_rank = classes.representative[c];
    cr.num_ranks = classes.num_ranks[c];
    cr.program = classes.program[c];
    cr.straggler = classes.straggler[c] != 0;
    if (cr.straggler) {
      result.straggler_ranks += cr.num_ranks;
    }
    for (std::size_t s = 0; s < kNumStreams; ++s) {
      cr.end = std::max(cr.end, stats.stream_end_time[c * kNumStreams + s]);
    }
    const ClassClock& clock = stats.clock[c];
    cr.compute = clock.compute;
    // The union of the class's communication and its part outside compute were accumulated as
    // the run went (ClassClock), as was each collective's exposure.
    cr.communication = clock.communication;
    cr.exposed_communication = clock.exposed;
    // The stat of a (stream, axis) and of a (kind, axis) is found through a table indexed by
    // both (-1: none).
    std::fill(comm_slot.begin(), comm_slot.end(), -1);
    for (const CommInterval& iv : stats.comm_intervals[c]) {
      const std::size_t s = static_cast<std::size_t>(iv.stream);
      const CollStep& coll = program.colls[static_cast<std::size_t>(iv.coll)];
      const std::size_t axis = static_cast<std::size_t>(coll.axis);
      std::int32_t& slot = comm_slot[s * ndim + axis];
      if (slot < 0) {
        slot = static_cast<std::int32_t>(cr.comm.size());
        cr.comm.push_back(CommStat{iv.stream, coll.axis, 0, SimDuration(), SimDuration()});
      }
      CommStat& stat = cr.comm[static_cast<std::size_t>(slot)];
      ++stat.count;
      stat.busy += iv.end - iv.start;
      stat.exposed += iv.exposed;
      std::int32_t& kind_slot = kind_slots[static_cast<std::size_t>(iv.kind) * ndim + axis];
      if (kind_slot < 0) {
        kind_slot = static_cast<std::int32_t>(kinds.size());
        kinds.push_back(CollectiveKindStat{iv.kind, coll.axis, 0, 0.0, SimDuration()});
      }
      CollectiveKindStat& kind = kinds[static_cast<std::size_t>(kind_slot)];
      ++kind.count;
      kind.bus_bytes += coll.bus_bytes;
      kind.time += iv.end - iv.start;
    }
    std::sort(cr.comm.begin(), cr.comm.end(), [](const CommStat& a, const CommStat& b) {
      return std::pair(a.stream, a.axis) < std::pair(b.stream, b.axis);
    });
    cr.overlap_fraction = cr.communication.ps() > 0
                              ? 1.0 - static_cast<double>(cr.exposed_communication.ps()) /
                                          static_cast<double>(cr.communication.ps())
                              : 1.0;
    cr.memory = stats.memory[c];
    cr.memory.end_bytes = stats.mem_total[c];
    cr.memory.end_reserved_bytes = allocator[c].reserved_bytes();
    // The one fit verdict (docs/cli.md, "Fit"): the allocator's reservation, which holds every
    // allocated byte, plus the runtime outside it within the device.
    result.fits = result.fits && cr.memory.fits && cr.memory.reserved_fits;
    result.step_time = std::max(result.step_time, cr.end);
    result.classes.push_back(std::move(cr));
  }
  std::sort(kinds.begin(), kinds.end(), [](const CollectiveKindStat& a, const CollectiveKindStat& b) {
    return std::pair(a.kind, a.axis) < std::pair(b.kind, b.axis);
  });
  result.collectives = std::move(kinds);
  result.baseline_step_time = result.step_time;
  result.trace = std::move(stats.trace);
  result.memory_trace = std::move(stats.memory_trace);
  result.op_log = std::move(stats.op_log);
  return result;
}

}  // namespace fsdp::sim::internal

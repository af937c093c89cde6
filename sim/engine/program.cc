// SPDX-License-Identifier: Apache-2.0
// compile_program: the Schedule compiled into the per-stream lists the event loop walks
// (internal/program.h). Every rate-to-duration conversion happens here, in the cost models, so
// the loop does integer work only.
#include "sim/engine/internal/program.h"

#include <algorithm>
#include <array>
#include <utility>

#include "core/base/strings.h"
#include "sim/model/kernel_cost.h"

namespace fsdp::sim::internal {
namespace {

// "op 12 (forward, unit 'layers.3', microbatch 1) of program 0", for messages.
std::string describe_program_op(const Schedule& schedule, std::size_t program, std::size_t index) {
  const Op& op = schedule.programs()[program].ops[index];
  std::string text = str_cat("op ", index, " (", to_string(op.kind));
  if (op.unit >= 0 && static_cast<std::size_t>(op.unit) < schedule.unit_names().size()) {
    text += str_cat(", unit '", schedule.unit_names()[static_cast<std::size_t>(op.unit)], "'");
  }
  if (op.microbatch >= 0) {
    text += str_cat(", microbatch ", op.microbatch);
  }
  return str_cat(text, ") of program ", program);
}

// Simulated time is int64 ps; the loop's sums stay below 2^62 ps (about 53 days), which leaves
// headroom for its rounding (docs/design/simulator.md, "Range").
constexpr double kStepBoundLimitPs = 4611686018427387904.0;  // 2^62

}  // namespace

namespace {

// The per-op compute model prices a unit's forward, backward and recompute in bf16 or fp8 math
// when the schedule knows the unit's kernels and the hardware has a compute profile (and no
// measured rate for the kind, and the FLOP model was not asked for); every other op costs from
// its FLOPs and bytes.
Expected<SimDuration> op_compute_cost(const Op& op, const Schedule& schedule,
                                      const Hardware& hardware, const CostOptions& options) {
  const bool unit_op =
      op.kind == OpKind::kForward || op.kind == OpKind::kBackward || op.kind == OpKind::kRecompute;
  const UnitWork* work = unit_op ? schedule.unit_work(op.unit) : nullptr;
  const ComputeProfile* profile = hardware.compute_profile();
  const bool measured = hardware.calibration() != nullptr &&
                        find_compute_rate(*hardware.calibration(), op.kind) != nullptr;
  if (work != nullptr && profile != nullptr && options.per_op_compute && !measured &&
      op.dtype != DType::kFp32) {
    return unit_compute_cost(op, *work, schedule.workload(), hardware, *profile);
  }
  return compute_cost(op, hardware, options);
}

}  // namespace

Expected<StreamProgram> compile_program(const Schedule& schedule, const Hardware& hardware,
                                        const SimOptions& options, const SimClasses& classes) {
  StreamProgram out;
  const auto& programs = schedule.programs();
  out.num_classes = classes.num_classes();
  // The schedule is verified (Schedule::make): ids, streams, events, buffers and every class's
  // collective sequence are in range and consistent, so nothing here re-checks them.
  out.links = axis_links(schedule.mesh(), hardware);
  const std::size_t np = programs.size();
  const std::size_t nc = static_cast<std::size_t>(out.num_classes);
  out.op_base.resize(np + 1);
  for (std::size_t p = 0; p < np; ++p) {
    out.op_base[p + 1] = out.op_base[p] + static_cast<std::int64_t>(programs[p].ops.size());
  }
  out.steps.assign(static_cast<std::size_t>(out.op_base[np]), Step());
  out.step_op.assign(static_cast<std::size_t>(out.op_base[np]), 0);
  std::int64_t filled = 0;
  out.list_begin.resize(np * kNumStreams);
  out.list_end.resize(np * kNumStreams);
  // Collectives per program, to reserve the collective lists.
  std::vector<std::size_t> collectives(np, 0);
  const auto& infos = schedule.collectives();
  struct CachedCost {
    bool valid = false;
    OpKind kind = OpKind::kAllGather;
    DType dtype = DType::kBf16;
    std::int32_t axis = 0;
    std::int64_t elements = 0;
    CollectiveCost cost;
  };
  std::vector<CachedCost> cost_cache(infos.size());
  // Per program: its compute durations, collective latencies and transfers summed (ps, in double:
  // the sums are compared against the range below, never converted back).
  std::vector<double> compute_sum(np, 0.0), latency_sum(np, 0.0), transfer_sum(np, 0.0);
  for (std::size_t p = 0; p < np; ++p) {
    const RankProgram& prog = programs[p];
    std::array<std::int64_t, kNumStreams> count{};
    for (const Op& op : prog.ops) {
      ++count[options.overlap ? static_cast<std::size_t>(op.stream) : 0];
      collectives[p] += is_collective(op.kind) ? 1u : 0u;
    }
    std::array<std::int64_t, kNumStreams> fill{};
    for (std::size_t s = 0; s < kNumStreams; ++s) {
      const std::size_t list = p * kNumStreams + s;
      out.list_begin[list] = s == 0 ? filled : out.list_end[list - 1];
      out.list_end[list] = out.list_begin[list] + count[s];
      fill[s] = out.list_begin[list];
    }
    filled = out.list_end[p * kNumStreams + kNumStreams - 1];
    for (std::size_t i = 0; i < prog.ops.size(); ++i) {
      const Op& op = prog.ops[i];
      // Without overlap every op runs on one serial list (stream 0) in issue order.
      const std::size_t stream = options.overlap ? static_cast<std::size_t>(op.stream) : 0;
      const std::int32_t idx = static_cast<std::int32_t>(i);
      const std::size_t f = static_cast<std::size_t>(fill[stream]++);
      Step& step = out.steps[f];
      step.kind = op.kind;
      step.stream = op.stream;
      out.step_op[f] = idx;
      if (is_collective(op.kind)) {
        // Every program (class) issues the same collective: its cost, linear in the group size
        // for uneven members, is computed once per distinct (collective, kind, size).
        CachedCost& cached = cost_cache[static_cast<std::size_t>(op.collective)];
        if (!cached.valid || cached.kind != op.kind || cached.elements != op.elements ||
            cached.dtype != op.dtype || cached.axis != op.axis) {
          auto cost = uneven_collective_cost(
              op.kind, op.elements, infos[static_cast<std::size_t>(op.collective)].member_elements,
              op.dtype, out.links[static_cast<std::size_t>(op.axis)], options.cost);
          if (!cost) {
            return cost.error().with_context(describe_program_op(schedule, p, i));
          }
          cached = CachedCost{true, op.kind, op.dtype, op.axis, op.elements, *cost};
        }
        const CollectiveCost& cost = cached.cost;
        latency_sum[p] += static_cast<double>(cost.latency.ps());
        transfer_sum[p] += static_cast<double>(cost.transfer.ps());
        step.arg = static_cast<std::int32_t>(out.colls.size());
        out.colls.push_back(CollStep{
            cost.latency, cost.transfer, cost.bus_bytes, op.axis,
            static_cast<std::uint8_t>(
                out.links[static_cast<std::size_t>(op.axis)].flow_links == kNetworkLink ? 1 : 0)});
      } else if (is_compute(op.kind)) {
        auto cost = op_compute_cost(op, schedule, hardware, options.cost);
        if (!cost) {
          return cost.error().with_context(describe_program_op(schedule, p, i));
        }
        step.value = cost->ps();
        compute_sum[p] += static_cast<double>(step.value);
      } else if (op.kind == OpKind::kRecord || op.kind == OpKind::kWait) {
        step.arg = op.event;
      } else if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) {
        step.arg = op.buffer;
        step.value = op.bytes;
        step.buffer_class = static_cast<std::uint8_t>(op.buffer_class);
      }
    }
  }
  // A bound on the step, proved once so that the loop's time arithmetic needs no checks: time
  // advances only while some op is in progress, so the step lasts at most the sum over classes of
  // every op's longest duration: compute slowed by the class's straggler factor and the SM
  // slowdown, a collective's transfer by the slowest member's link factor and the largest link
  // share (one flow per stream), plus its latency. Every event time, scaled duration and
  // statistic the loop forms is below it.
  const Straggler& straggler = options.straggler;
  const bool any_straggler = std::any_of(classes.straggler.begin(), classes.straggler.end(),
                                         [](char f) { return f != 0; });
  const double link_factor = any_straggler ? std::max(1.0, straggler.link_factor) : 1.0;
  const double sm_factor = std::max(1.0, options.cost.sm_slowdown);
  double bound = 0.0;
  for (std::size_t c = 0; c < nc; ++c) {
    const std::size_t p = static_cast<std::size_t>(classes.program[c]);
    const double compute_factor =
        classes.straggler[c] != 0 ? std::max(1.0, straggler.compute_factor) : 1.0;
    bound += compute_sum[p] * compute_factor * sm_factor + latency_sum[p] +
             transfer_sum[p] * link_factor * static_cast<double>(kNumStreams);
  }
  if (!(bound < kStepBoundLimitPs)) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("the step may last up to ", bound * 1e-12, " s (every op's duration over ",
                         nc, nc == 1 ? " rank class" : " rank classes", "), beyond the range of simulated time (2^62 ps, about "
                         "53 days)"));
  }
  out.event_base.resize(nc + 1);
  out.buffer_base.resize(nc + 1);
  for (std::size_t c = 0; c < nc; ++c) {
    const RankProgram& prog = programs[static_cast<std::size_t>(classes.program[c])];
    out.event_base[c + 1] = out.event_base[c] + std::max(prog.num_events, 0);
    out.buffer_base[c + 1] = out.buffer_base[c] + std::max(prog.num_buffers, 0);
  }
  // The state every run starts from: resident buffers allocated, per class.
  out.init_memory.assign(nc, MemoryResult());
  out.init_allocator.assign(nc, CachingAllocator());
  out.comm_reserve.assign(nc, 0);
  out.trace_reserve = 0;
  for (std::size_t c = 0; c < nc; ++c) {
    const std::size_t p = static_cast<std::size_t>(classes.program[c]);
    MemoryResult& m = out.init_memory[c];
    // The allocator can use the device memory beside the runtime's own (CUDA context, NCCL);
    // the runtime's workspaces come from the allocator before the step (docs/design/simulator.md,
    // "Runtime memory").
    const RuntimeMemory& runtime = schedule.runtime_memory();
    m.capacity_bytes =
        std::max<std::int64_t>(hardware.memory_bytes() - runtime.outside_allocator_bytes, 0);
    m.runtime_outside_allocator_bytes = runtime.outside_allocator_bytes;
    m.runtime_allocator_bytes = runtime.allocator_bytes;
    for (const ResidentBuffer& b : programs[p].resident) {
      m.resident_by_class[static_cast<std::size_t>(b.buffer_class)] += b.bytes;
      m.resident_bytes += b.bytes;
      out.init_allocator[c].allocate(static_cast<int>(StreamKind::kCompute), b.bytes);
    }
    if (runtime.allocator_bytes > 0) {
      out.init_allocator[c].allocate(static_cast<int>(StreamKind::kCompute),
                                     runtime.allocator_bytes);
    }
    m.high_water_by_class = m.resident_by_class;
    m.peak_bytes = m.resident_bytes;
    m.peak_by_class = m.resident_by_class;
    m.peak_reserved_bytes = out.init_allocator[c].reserved_bytes();
    m.fits = m.resident_bytes <= m.capacity_bytes;
    m.reserved_fits = m.peak_reserved_bytes <= m.capacity_bytes;
    out.comm_reserve[c] = collectives[p];
    out.trace_reserve += programs[p].ops.size();
  }
  return out;
}

std::string describe_op(const Schedule& schedule, const SimClasses& classes, std::int32_t cls,
                        std::int32_t op_index) {
  const Op& op = schedule.programs()[static_cast<std::size_t>(
                                         classes.program[static_cast<std::size_t>(cls)])]
                     .ops[static_cast<std::size_t>(op_index)];
  std::string text = str_cat(op_index, " (", to_string(op.kind));
  if (op.unit >= 0 && static_cast<std::size_t>(op.unit) < schedule.unit_names().size()) {
    text += str_cat(", unit '", schedule.unit_names()[static_cast<std::size_t>(op.unit)], "'");
  } else if (op.unit >= 0) {
    text += str_cat(", unit ", op.unit);
  }
  if (op.microbatch >= 0) {
    text += str_cat(", microbatch ", op.microbatch);
  }
  return text + ")";
}

}  // namespace fsdp::sim::internal

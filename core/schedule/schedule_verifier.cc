// SPDX-License-Identifier: Apache-2.0
// The checks read each program once in issue order and answer happens-before questions from the
// vector clocks of HappensBefore, so a check costs O(ops x streams + operands) per rank class.
// The rules are described in docs/design/schedule-ir.md ("Checks").
#include "core/schedule/schedule_verifier.h"

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "core/base/check.h"
#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/schedule/group_geometry.h"

namespace fsdp {
namespace {

std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

}  // namespace

// --- memory ------------------------------------------------------------------------------------

Expected<MemoryTally> tally_memory(const RankProgram& program) {
  MemoryTally tally;
  for (const ResidentBuffer& b : program.resident) {
    if (!checked_add(tally.resident_bytes, b.bytes, &tally.resident_bytes)) {
      return Error(ErrorCode::kOutOfRange, "resident bytes overflow int64");
    }
  }
  if (program.num_buffers < 0) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("program has num_buffers ", program.num_buffers, "; expected >= 0"));
  }
  std::vector<std::int64_t> live_bytes(idx(program.num_buffers), -1);
  std::vector<bool> freed(idx(program.num_buffers), false);
  std::int64_t live = 0;
  for (std::size_t i = 0; i < program.ops.size(); ++i) {
    const Op& op = program.ops[i];
    if (op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) {
      continue;
    }
    if (op.buffer < 0 || op.buffer >= program.num_buffers) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat(describe_op(program, i, nullptr), ": buffer ", op.buffer, " outside [0, ",
                           program.num_buffers, ")"));
    }
    const std::size_t b = idx(op.buffer);
    if (op.kind == OpKind::kAlloc) {
      if (live_bytes[b] >= 0) {
        return Error(ErrorCode::kFailedPrecondition,
                     str_cat(describe_op(program, i, nullptr), ": allocates buffer ", op.buffer,
                             " a second time"));
      }
      live_bytes[b] = op.bytes;
      if (!checked_add(live, op.bytes, &live)) {
        return Error(ErrorCode::kOutOfRange, "live transient bytes overflow int64");
      }
      tally.peak_transient_bytes = std::max(tally.peak_transient_bytes, live);
    } else {
      if (live_bytes[b] < 0 || freed[b]) {
        return Error(ErrorCode::kFailedPrecondition,
                     str_cat(describe_op(program, i, nullptr), ": frees buffer ", op.buffer,
                             freed[b] ? " a second time" : " before it is allocated"));
      }
      freed[b] = true;
      live -= live_bytes[b];
    }
  }
  tally.end_transient_bytes = live;
  return tally;
}

// --- checks ------------------------------------------------------------------------------------

namespace {

constexpr int kNumPhases = static_cast<int>(Phase::kStep) + 1;

bool valid_stream(StreamKind s) { return static_cast<int>(s) < kNumStreams; }
bool valid_kind(OpKind k) { return static_cast<int>(k) < kNumOpKinds; }

// Names a rank class and its ops in error messages.
class Where {
 public:
  Where(const ScheduleParts& schedule, std::size_t cls) : schedule_(schedule), cls_(cls) {}

  const RankProgram& program() const { return schedule_.programs[cls_]; }
  std::string prefix() const {
    return str_cat("rank class ", cls_, " (rank ", program().representative_rank, ")");
  }
  std::string op(std::size_t i) const {
    return describe_op(program(), i, &schedule_.unit_names);
  }
  Error fail(ErrorCode code, std::size_t i, std::string_view what) const {
    return Error(code, str_cat(prefix(), " ", op(i), ": ", what));
  }
  Error fail(ErrorCode code, std::string_view what) const {
    return Error(code, str_cat(prefix(), ": ", what));
  }

 private:
  const ScheduleParts& schedule_;
  std::size_t cls_;
};

std::string describe(const Operand& o) {
  return str_cat(to_string(o.space), " buffer ", o.buffer, " (", to_string(o.access), ")");
}

// An activation collective names an entry of its unit's work.collectives, of the same kind, on
// the mesh axis that entry's parallel axis names, and no geometry group.
Status activation_collective_impl(const ScheduleParts& s, std::size_t k) {
  const CollectiveInfo& info = s.collectives[k];
  const auto fail = [&](std::string_view what) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("collective ", k, " (activation collective ", info.activation, " of unit ",
                         info.unit, ") ", what));
  };
  if (info.geometry_group >= 0) {
    return fail(str_cat("names geometry group ", info.geometry_group,
                        "; expected none (it moves activations, not a parameter group)"));
  }
  if (info.unit < 0 || idx(info.unit) >= s.unit_work.size() ||
      idx(info.activation) >= s.unit_work[idx(info.unit)].collectives.size()) {
    return fail("names no entry of its unit's work.collectives");
  }
  const ActivationCollective& a = s.unit_work[idx(info.unit)].collectives[idx(info.activation)];
  const OpKind expected = a.kind == ActivationCollectiveKind::kAllReduce   ? OpKind::kAllReduce
                          : a.kind == ActivationCollectiveKind::kAllGather ? OpKind::kAllGather
                          : a.kind == ActivationCollectiveKind::kReduceScatter
                              ? OpKind::kReduceScatter
                              : OpKind::kAllToAll;
  if (info.kind != expected) {
    return fail(str_cat("is a ", to_string(info.kind), "; its entry ", a.site, " is a ",
                        to_string(a.kind)));
  }
  if (info.axis < 0 || info.axis >= s.mesh.ndim() ||
      s.mesh.axis_name(info.axis) != to_string(a.axis)) {
    return fail(str_cat("runs on mesh axis ", info.axis, "; its entry ", a.site, " runs over the '",
                        to_string(a.axis), "' axis"));
  }
  return ok_status();
}

// Every collective of the table that names a geometry group names a step of one of its legs
// that performs the collective's kind on the collective's axis.
Status geometry_impl(const ScheduleParts& s) {
  const ShardGeometry& geo = s.groups();
  for (std::size_t k = 0; k < s.collectives.size(); ++k) {
    const CollectiveInfo& info = s.collectives[k];
    if (info.activation >= 0) {
      FSDP_RETURN_IF_ERROR(activation_collective_impl(s, k));
      continue;
    }
    if (info.kind == OpKind::kAllToAll) {
      return Error(ErrorCode::kFailedPrecondition,
                   str_cat("collective ", k,
                           " is an all-to-all of no unit's activations: expected all-to-alls "
                           "only as activation collectives (a parameter group never moves by "
                           "all-to-all)"));
    }
    if (info.geometry_group < 0) {
      continue;
    }
    if (idx(info.geometry_group) >= geo.groups.size()) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("collective ", k, " names geometry group ", info.geometry_group,
                           "; the schedule has ", geo.groups.size()));
    }
    const GroupGeometry& g = geo.groups[idx(info.geometry_group)];
    if (static_cast<int>(info.leg) >= kNumCollectiveLegs) {
      return Error(ErrorCode::kOutOfRange, str_cat("collective ", k, " has no valid leg"));
    }
    const RedistributeLeg& leg = g.leg(info.leg);
    if (g.unit != info.unit || g.group != info.group || info.leg_step < 0 ||
        idx(info.leg_step) >= leg.steps.size()) {
      return Error(ErrorCode::kFailedPrecondition,
                   str_cat("collective ", k, " (", to_string(info.leg), " step ", info.leg_step,
                           " of unit ", info.unit, " group ", info.group,
                           ") names no step of geometry group ", info.geometry_group,
                           " (unit ", g.unit, " group ", g.group, ", ", leg.steps.size(),
                           " steps)"));
    }
    const RedistributeStep& step = leg.steps[idx(info.leg_step)];
    const auto mesh_axis = static_cast<std::int32_t>(g.placements.dp_axes()[idx(step.axis)]);
    if (collective_kind(step.kind) != info.kind || mesh_axis != info.axis) {
      return Error(ErrorCode::kFailedPrecondition,
                   str_cat("collective ", k, " is a ", to_string(info.kind), " on axis ",
                           info.axis, "; its leg step is a ",
                           to_string(collective_kind(step.kind)), " on axis ", mesh_axis));
    }
  }
  return ok_status();
}

// The operands of one op: in range, and of the shape its kind needs.
Status operand_shape_impl(const ScheduleParts& s, std::size_t c) {
  const Where where(s, c);
  const RankProgram& p = s.programs[c];
  const ShardGeometry& geo = s.groups();
  const auto n_groups = static_cast<std::int64_t>(geo.groups.size());
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (op.first_operand < 0 || op.num_operands < 0 ||
        static_cast<std::int64_t>(op.first_operand) + op.num_operands >
            static_cast<std::int64_t>(p.operands.size())) {
      return where.fail(ErrorCode::kOutOfRange, i,
                        str_cat("operands [", op.first_operand, ", +", op.num_operands,
                                ") outside the program's ", p.operands.size()));
    }
    const std::span<const Operand> operands = p.operands_of(op);
    for (const Operand& o : operands) {
      if (static_cast<int>(o.space) > static_cast<int>(BufferSpace::kResident) ||
          static_cast<int>(o.access) > static_cast<int>(Access::kReadWrite) ||
          static_cast<int>(o.extent) > static_cast<int>(Extent::kOptimizer)) {
        return where.fail(ErrorCode::kOutOfRange, i, "operand space, access or extent outside its enum");
      }
      const std::int64_t limit = o.space == BufferSpace::kTransient
                                     ? p.num_buffers
                                     : static_cast<std::int64_t>(p.resident.size());
      if (o.buffer < 0 || o.buffer >= limit) {
        return where.fail(ErrorCode::kOutOfRange, i,
                          str_cat("operand ", describe(o), " outside [0, ", limit, ")"));
      }
      if (o.group < -1 || o.group >= n_groups || (o.extent != Extent::kNone && o.group < 0)) {
        return where.fail(ErrorCode::kOutOfRange, i,
                          str_cat("operand ", describe(o), " names group ", o.group, " (",
                                  n_groups, " groups) with extent ", to_string(o.extent)));
      }
      if (o.space == BufferSpace::kResident && o.group >= 0 &&
          p.resident[idx(o.buffer)].geometry_group != o.group) {
        return where.fail(ErrorCode::kFailedPrecondition, i,
                          str_cat("operand ", describe(o), " names group ", o.group,
                                  "; the resident buffer belongs to group ",
                                  p.resident[idx(o.buffer)].geometry_group));
      }
    }
    const auto n = static_cast<std::size_t>(op.num_operands);
    const auto access = [&](std::size_t k) { return operands[k].access; };
    const auto shape_error = [&](std::string_view expected) {
      return where.fail(ErrorCode::kFailedPrecondition, i,
                        str_cat("has ", n, " operands; expected ", expected));
    };
    const bool activation = is_collective(op.kind) && op.collective >= 0 &&
                            idx(op.collective) < s.collectives.size() &&
                            s.collectives[idx(op.collective)].activation >= 0;
    if (activation) {
      // Activations live in no IR buffer; the layer's compute waits for them.
      if (n != 0 || op.stream != StreamKind::kCompute) {
        return where.fail(
            ErrorCode::kFailedPrecondition, i,
            str_cat("is an activation collective with ", n, " operands on the ",
                    to_string(op.stream), " stream; expected none, on the compute stream"));
      }
      continue;
    }
    switch (op.kind) {
      case OpKind::kAllToAll:
        return shape_error("none: an all-to-all is an activation collective");
      case OpKind::kAlloc:
      case OpKind::kFree:
      case OpKind::kRecord:
      case OpKind::kWait:
        if (n != 0) {
          return shape_error("none (allocations and events name no operands)");
        }
        break;
      case OpKind::kAllGather:
        if (n != 2 || !reads(access(0)) || !writes(access(1))) {
          return shape_error("a send buffer it reads and a receive buffer it writes");
        }
        break;
      case OpKind::kReduceScatter:
        if ((n != 2 && n != 3) || !reads(access(0)) || !writes(access(1)) ||
            (n == 3 && !writes(access(2)))) {
          return shape_error(
              "a send buffer it reads, a receive buffer it writes and optionally the "
              "accumulator the output is added into");
        }
        break;
      case OpKind::kAllReduce:
        if (n != 1 || access(0) != Access::kReadWrite) {
          return shape_error("one buffer it reduces in place (read-write)");
        }
        break;
      // The per-group ops (hand-written simulator inputs may name no group: then they are
      // compute of the given cost and nothing else).
      case OpKind::kGradCopy:
      case OpKind::kCast:
      case OpKind::kGradAccumulate:
        if (op.group >= 0 && (n != 2 || !reads(access(0)) || !writes(access(1)))) {
          return shape_error("a buffer it reads and one it writes");
        }
        break;
      case OpKind::kOptimizerStep:
        if (op.group >= 0 && (n < 2 || access(0) != Access::kReadWrite || !reads(access(1)))) {
          return shape_error("the main weight it updates and the gradient it reads first");
        }
        break;
      case OpKind::kForward:
      case OpKind::kBackward:
      case OpKind::kRecompute: {
        if (op.unit < 0 || idx(op.unit) >= geo.unit_groups.size()) {
          break;  // a unit the geometry does not describe (hand-written simulator inputs)
        }
        // Exactly one weight operand per group of the unit, in group order.
        std::vector<std::int32_t> weight_groups;
        for (const Operand& o : operands) {
          if (is_weight_read(o)) {
            weight_groups.push_back(o.group);
          }
        }
        if (weight_groups != geo.unit_groups[idx(op.unit)]) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            str_cat("reads the weights of ", weight_groups.size(),
                                    " groups; its unit has ",
                                    geo.unit_groups[idx(op.unit)].size(),
                                    " (one weight operand per group, in group order)"));
        }
        break;
      }
    }
    if (is_collective(op.kind) && op.collective >= 0 && idx(op.collective) < s.collectives.size()) {
      const std::int32_t g = s.collectives[idx(op.collective)].geometry_group;
      for (const Operand& o : operands) {
        if (g >= 0 && o.group != g) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            str_cat("operand ", describe(o), " belongs to group ", o.group,
                                    "; collective ", op.collective, " moves group ", g));
        }
      }
    }
  }
  return ok_status();
}

Status structure_impl(const ScheduleParts& s) {
  if (s.programs.empty()) {
    return Error(ErrorCode::kFailedPrecondition, "schedule has no rank programs");
  }
  const std::size_t n_classes = s.programs.size();
  std::vector<std::int64_t> count(n_classes, 0);
  std::vector<std::int64_t> lowest(n_classes, -1);
  for (std::size_t r = 0; r < s.rank_class.size(); ++r) {
    const std::int32_t c = s.rank_class[r];
    if (c < 0 || idx(c) >= n_classes) {
      return Error(ErrorCode::kOutOfRange, str_cat("rank ", r, " maps to rank class ", c,
                                                   ", outside [0, ", n_classes, ")"));
    }
    if (count[idx(c)]++ == 0) {
      lowest[idx(c)] = static_cast<std::int64_t>(r);
    }
  }
  for (std::size_t c = 0; c < n_classes; ++c) {
    const RankProgram& p = s.programs[c];
    if (count[c] == 0 || p.num_ranks != count[c] || p.representative_rank != lowest[c]) {
      return Error(
          ErrorCode::kFailedPrecondition,
          str_cat("rank class ", c, " claims ", p.num_ranks, " ranks with representative rank ",
                  p.representative_rank, ", but rank_class maps ", count[c],
                  " ranks to it, the lowest ", lowest[c]));
    }
  }
  const std::int64_t ndim = s.mesh.ndim();
  for (std::size_t k = 0; k < s.collectives.size(); ++k) {
    const CollectiveInfo& info = s.collectives[k];
    if (info.axis < 0 || info.axis >= ndim || !is_collective(info.kind)) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("collective ", k, " has kind ", to_string(info.kind), " on axis ",
                           info.axis, "; expected a collective on an axis in [0, ", ndim, ")"));
    }
  }
  const auto n_units = static_cast<std::int64_t>(s.unit_names.size());
  if (!s.unit_work.empty() && static_cast<std::int64_t>(s.unit_work.size()) != n_units) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("unit_work has ", s.unit_work.size(),
                         " entries; expected none or one per unit (", n_units, ")"));
  }
  for (std::size_t u = 0; u < s.unit_work.size(); ++u) {
    FSDP_RETURN_IF_ERROR(
        validate_unit_work(s.unit_work[u], str_cat("unit '", s.unit_names[u], "'")));
  }
  if (s.workload.seq_len < 1 || s.workload.micro_batch_size < 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("workload is ", s.workload.seq_len, " x ", s.workload.micro_batch_size,
                         " tokens; expected seq_len and micro_batch_size >= 1"));
  }
  for (std::size_t c = 0; c < n_classes; ++c) {
    const Where where(s, c);
    const RankProgram& p = s.programs[c];
    if (p.num_events < 0 || p.num_buffers < 0) {
      return where.fail(ErrorCode::kOutOfRange, "negative num_events or num_buffers");
    }
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const Op& op = p.ops[i];
      if (!valid_stream(op.stream) || !valid_kind(op.kind) ||
          static_cast<int>(op.phase) >= kNumPhases ||
          static_cast<int>(op.buffer_class) >= kNumBufferClasses) {
        return where.fail(ErrorCode::kOutOfRange, i,
                          "stream, kind, phase or buffer class outside its enum");
      }
      if (op.unit < -1 || op.unit >= n_units || op.group < -1 || op.microbatch < -1 ||
          op.microbatch >= s.num_microbatches) {
        return where.fail(ErrorCode::kOutOfRange, i,
                          str_cat("unit ", op.unit, ", group ", op.group, " or microbatch ",
                                  op.microbatch, " out of range (", n_units, " units, ",
                                  s.num_microbatches, " microbatches)"));
      }
      if (op.elements < 0 || op.bytes < 0 || op.flops < 0 || op.mem_bytes < 0) {
        return where.fail(ErrorCode::kOutOfRange, i,
                          "negative elements, bytes, flops or mem_bytes");
      }
      const bool needs_event = op.kind == OpKind::kRecord || op.kind == OpKind::kWait;
      if (needs_event && (op.event < 0 || op.event >= p.num_events)) {
        return where.fail(ErrorCode::kOutOfRange, i,
                          str_cat("event ", op.event, " outside [0, ", p.num_events, ")"));
      }
      const bool needs_buffer = op.kind == OpKind::kAlloc || op.kind == OpKind::kFree;
      if (needs_buffer && (op.buffer < 0 || op.buffer >= p.num_buffers)) {
        return where.fail(ErrorCode::kOutOfRange, i,
                          str_cat("buffer ", op.buffer, " outside [0, ", p.num_buffers, ")"));
      }
      if (is_collective(op.kind)) {
        if (op.collective < 0 || idx(op.collective) >= s.collectives.size()) {
          return where.fail(
              ErrorCode::kOutOfRange, i,
              str_cat("collective ", op.collective, " outside [0, ", s.collectives.size(), ")"));
        }
        if (op.axis < 0 || op.axis >= ndim) {
          return where.fail(ErrorCode::kOutOfRange, i,
                            str_cat("mesh axis ", op.axis, " outside [0, ", ndim, ")"));
        }
      }
    }
  }
  FSDP_RETURN_IF_ERROR(geometry_impl(s));
  for (std::size_t c = 0; c < n_classes; ++c) {
    FSDP_RETURN_IF_ERROR(operand_shape_impl(s, c));
  }
  return ok_status();
}

// Builds every program's HappensBefore; the errors name the rank class.
Expected<std::vector<HappensBefore>> build_orders(const ScheduleParts& s) {
  std::vector<HappensBefore> orders;
  orders.reserve(s.programs.size());
  for (std::size_t c = 0; c < s.programs.size(); ++c) {
    auto hb = HappensBefore::make(s.programs[c], &s.unit_names);
    if (!hb) {
      return hb.error().with_context(Where(s, c).prefix());
    }
    orders.push_back(std::move(*hb));
  }
  return orders;
}

// Every record is issued before the waits on its event (HappensBefore::make has already checked
// that each waited event has exactly one record).
Status record_order_impl(const ScheduleParts& s) {
  for (std::size_t c = 0; c < s.programs.size(); ++c) {
    const Where where(s, c);
    const RankProgram& p = s.programs[c];
    std::vector<bool> recorded(idx(p.num_events), false);
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const Op& op = p.ops[i];
      if (op.kind == OpKind::kRecord) {
        recorded[idx(op.event)] = true;
      } else if (op.kind == OpKind::kWait && !recorded[idx(op.event)]) {
        return where.fail(ErrorCode::kFailedPrecondition, i,
                          str_cat("waits on event ", op.event,
                                  " before its record is issued (a stream issued in program "
                                  "order would not wait)"));
      }
    }
  }
  return ok_status();
}

Status buffers_program(const ScheduleParts& s, std::size_t c, const HappensBefore& hb) {
  const Where where(s, c);
  const RankProgram& p = s.programs[c];
  std::vector<std::int32_t> alloc(idx(p.num_buffers), -1);
  std::vector<std::int32_t> freed(idx(p.num_buffers), -1);
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) {
      continue;
    }
    const std::size_t b = idx(op.buffer);
    if (op.kind == OpKind::kAlloc) {
      if (alloc[b] >= 0) {
        return where.fail(ErrorCode::kFailedPrecondition, i,
                          str_cat("allocates buffer ", op.buffer, " again (first allocated by ",
                                  where.op(idx(alloc[b])), ")"));
      }
      std::int64_t bytes = 0;
      if (!checked_mul(op.elements, dtype_bytes(op.dtype), &bytes) || bytes != op.bytes) {
        return where.fail(ErrorCode::kFailedPrecondition, i,
                          str_cat("allocates ", op.bytes, " bytes for ", op.elements,
                                  " elements of ", to_string(op.dtype)));
      }
      alloc[b] = static_cast<std::int32_t>(i);
      continue;
    }
    if (alloc[b] < 0) {
      return where.fail(ErrorCode::kFailedPrecondition, i,
                        str_cat("frees buffer ", op.buffer, " before it is allocated"));
    }
    if (freed[b] >= 0) {
      return where.fail(ErrorCode::kFailedPrecondition, i,
                        str_cat("frees buffer ", op.buffer, " again (first freed by ",
                                where.op(idx(freed[b])), ")"));
    }
    const Op& a = p.ops[idx(alloc[b])];
    if (a.buffer_class != op.buffer_class || a.unit != op.unit || a.group != op.group) {
      return where.fail(
          ErrorCode::kFailedPrecondition, i,
          str_cat("frees buffer ", op.buffer, " as ", to_string(op.buffer_class), " but ",
                  where.op(idx(alloc[b])), " allocated it as ", to_string(a.buffer_class)));
    }
    if (!hb.before(alloc[b], static_cast<std::int64_t>(i))) {
      return where.fail(ErrorCode::kFailedPrecondition, i,
                        str_cat("frees buffer ", op.buffer, " without happening after ",
                                where.op(idx(alloc[b])), ", which allocates it"));
    }
    freed[b] = static_cast<std::int32_t>(i);
  }
  for (std::size_t b = 0; b < alloc.size(); ++b) {
    if (alloc[b] < 0) {
      return where.fail(ErrorCode::kFailedPrecondition,
                        str_cat("transient buffer ", b, " is never allocated"));
    }
    if (freed[b] < 0) {
      return where.fail(ErrorCode::kFailedPrecondition, idx(alloc[b]),
                        str_cat("allocates buffer ", b, ", which is not freed by the step's end"));
    }
  }
  auto tally = tally_memory(p);
  if (!tally) {
    return tally.error().with_context(where.prefix());
  }
  if (tally->end_transient_bytes != 0) {
    return where.fail(ErrorCode::kFailedPrecondition,
                      str_cat(tally->end_transient_bytes,
                              " transient bytes are live at the step's end; expected 0"));
  }
  return ok_status();
}

// The accesses to one buffer seen so far in issue order: the latest write and the reads after it.
struct Track {
  std::int32_t last_write = -1;
  std::vector<std::int32_t> reads;
};

Status operands_program(const ScheduleParts& s, std::size_t c, const HappensBefore& hb) {
  const Where where(s, c);
  const RankProgram& p = s.programs[c];
  const ShardGeometry& geo = s.groups();
  std::vector<std::int32_t> alloc(idx(p.num_buffers), -1);
  std::vector<std::int32_t> freed(idx(p.num_buffers), -1);
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (op.kind == OpKind::kAlloc) {
      alloc[idx(op.buffer)] = static_cast<std::int32_t>(i);
    } else if (op.kind == OpKind::kFree) {
      freed[idx(op.buffer)] = static_cast<std::int32_t>(i);
    }
  }
  std::vector<Track> transient(idx(p.num_buffers));
  std::vector<Track> resident(p.resident.size());
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    const auto me = static_cast<std::int32_t>(i);
    for (const Operand& o : p.operands_of(op)) {
      const bool is_transient = o.space == BufferSpace::kTransient;
      Track& t = is_transient ? transient[idx(o.buffer)] : resident[idx(o.buffer)];
      if (is_transient) {
        const std::int32_t a = alloc[idx(o.buffer)];
        const std::int32_t f = freed[idx(o.buffer)];
        if (!hb.before(a, me) || !hb.before(me, f)) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            str_cat("uses ", describe(o), " outside its lifetime (",
                                    where.op(idx(a)), " allocates it, ", where.op(idx(f)),
                                    " frees it)"));
        }
        const Op& a_op = p.ops[idx(a)];
        if (o.group >= 0) {
          const GroupGeometry& g = geo.groups[idx(o.group)];
          if (a_op.unit != g.unit || a_op.group != g.group) {
            return where.fail(ErrorCode::kFailedPrecondition, i,
                              str_cat("uses ", describe(o), " as group ", o.group, " (unit ",
                                      g.unit, " group ", g.group, "), but ", where.op(idx(a)),
                                      " allocates it"));
          }
        }
        if (reads(o.access) && t.last_write < 0) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            str_cat("reads ", describe(o), " before any op writes it"));
        }
      }
      if (t.last_write >= 0 && t.last_write != me && !hb.before(t.last_write, me)) {
        return where.fail(ErrorCode::kFailedPrecondition, i,
                          str_cat("uses ", describe(o), " without happening after ",
                                  where.op(idx(t.last_write)), ", which writes it"));
      }
      if (writes(o.access)) {
        for (const std::int32_t r : t.reads) {
          if (r != me && !hb.before(r, me)) {
            return where.fail(ErrorCode::kFailedPrecondition, i,
                              str_cat("writes ", describe(o), " without happening after ",
                                      where.op(idx(r)), ", which reads it"));
          }
        }
        t.last_write = me;
        t.reads.clear();
      } else {
        t.reads.push_back(me);
      }
    }
  }
  return ok_status();
}

// A parameter collective's operands hold the layout ranges it moves on the rank class's
// representative rank: the send operand's extent covers the step's input range, the receive
// operand's (and the accumulator's) its output range, and an all-reduce's operand its range. A
// buffer of extent E holds exactly the rank's range of E (the backends address it that way), so
// a step whose output lies outside its receive operand's extent would write past that buffer. A
// reduce-scatter before the last of a chain writes into the partial buffer it reads (extent
// kFull), in place, which passes.
Status operand_ranges_program(const ScheduleParts& s, std::size_t c) {
  const Where where(s, c);
  const RankProgram& p = s.programs[c];
  const ShardGeometry& geo = s.groups();
  const std::int64_t rank = p.representative_rank;
  std::map<std::int32_t, CollectiveGeometry> cache;  // by collective index
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (!is_collective(op.kind) || op.num_operands == 0) {
      continue;
    }
    const CollectiveInfo& info = s.collectives[idx(op.collective)];
    if (info.activation >= 0 || info.geometry_group < 0) {
      continue;
    }
    const GroupGeometry& g = geo.groups[idx(info.geometry_group)];
    auto it = cache.find(op.collective);
    if (it == cache.end()) {
      auto cg = collective_geometry(g, info.leg, idx(info.leg_step), s.mesh, rank);
      if (!cg) {
        return where.fail(cg.error().code(), i, cg.error().message());
      }
      it = cache.emplace(op.collective, std::move(*cg)).first;
    }
    const CollectiveGeometry& cg = it->second;
    const std::span<const Operand> operands = p.operands_of(op);
    for (std::size_t k = 0; k < operands.size(); ++k) {
      const Operand& o = operands[k];
      if (o.extent == Extent::kNone) {
        continue;
      }
      // Operand 0 is the send buffer (an all-reduce's only one); the others receive.
      const bool input = k == 0;
      const Range want = input || op.kind == OpKind::kAllReduce ? cg.in : cg.out;
      auto have = extent_range(g, o.extent, rank);
      if (!have) {
        return where.fail(have.error().code(), i, have.error().message());
      }
      if (want.numel > 0 && (want.start < have->start || want.end() > have->end())) {
        return where.fail(
            ErrorCode::kFailedPrecondition, i,
            str_cat("operand ", describe(o), " of extent ", to_string(o.extent), " holds [",
                    have->start, ", ", have->end(), "); the ", to_string(info.leg), " step ",
                    info.leg_step, input ? " reads [" : " writes [", want.start, ", ", want.end(),
                    ")"));
      }
    }
  }
  return ok_status();
}

// Indices of the collective ops of each stream, in issue order.
std::array<std::vector<std::int32_t>, kNumStreams> collectives_by_stream(const RankProgram& p) {
  std::array<std::vector<std::int32_t>, kNumStreams> out;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (is_collective(p.ops[i].kind)) {
      out[static_cast<std::size_t>(p.ops[i].stream)].push_back(static_cast<std::int32_t>(i));
    }
  }
  return out;
}

Status collectives_impl(const ScheduleParts& s) {
  const RankProgram& ref = s.programs.front();
  const auto ref_seq = collectives_by_stream(ref);
  const auto describe = [&](const Op& op) {
    return str_cat("(", to_string(op.kind), ", axis '", s.mesh.axis_name(op.axis),
                   "', collective ", op.collective, ")");
  };
  for (std::size_t c = 0; c < s.programs.size(); ++c) {
    const Where where(s, c);
    const RankProgram& p = s.programs[c];
    FSDP_TRY(MeshCoordinate coord, s.mesh.coordinate(p.representative_rank));
    const auto seq = collectives_by_stream(p);
    std::vector<bool> issued(s.collectives.size(), false);
    for (const std::vector<std::int32_t>& stream_ops : seq) {
      for (const std::int32_t i : stream_ops) {
        issued[idx(p.ops[idx(i)].collective)] = true;
      }
    }
    const auto missing = std::find(issued.begin(), issued.end(), false);
    if (missing != issued.end()) {
      const auto k = static_cast<std::size_t>(missing - issued.begin());
      const CollectiveInfo& info = s.collectives[k];
      return where.fail(ErrorCode::kFailedPrecondition,
                        str_cat("never issues collective ", k, " (", to_string(info.kind), " ",
                                to_string(info.leg), " of unit ", info.unit, " group ",
                                info.group, ")"));
    }
    for (std::size_t st = 0; st < seq.size(); ++st) {
      for (std::size_t k = 0; k < seq[st].size(); ++k) {
        const std::size_t i = idx(seq[st][k]);
        const Op& op = p.ops[i];
        if (k >= ref_seq[st].size()) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            str_cat("is collective ", k + 1,
                                    " of its stream, but rank class 0 "
                                    "issues only ",
                                    ref_seq[st].size(), " there"));
        }
        const Op& r = ref.ops[idx(ref_seq[st][k])];
        if (op.kind != r.kind || op.axis != r.axis || op.collective != r.collective) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            str_cat("issues ", describe(op), " as collective ", k,
                                    " of its stream where rank class 0 issues ", describe(r)));
        }
        const CollectiveInfo& info = s.collectives[idx(op.collective)];
        if (op.kind != info.kind || op.axis != info.axis || op.unit != info.unit ||
            op.group != info.group || op.dtype != info.dtype) {
          return where.fail(
              ErrorCode::kFailedPrecondition, i,
              str_cat("disagrees with collective ", op.collective, " (", to_string(info.kind),
                      " of unit ", info.unit, " group ", info.group, " in ", to_string(info.dtype),
                      " on axis ", info.axis, ")"));
        }
        std::int64_t bytes = 0;
        if (!checked_mul(op.elements, dtype_bytes(op.dtype), &bytes) || bytes != op.bytes) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            str_cat("moves ", op.bytes, " bytes for ", op.elements, " elements of ",
                                    to_string(op.dtype)));
        }
        if (!info.member_elements.empty()) {
          const std::int64_t size = s.mesh.axis_size(info.axis);
          const std::int64_t member = coord.local_ranks[idx(info.axis)];
          if (static_cast<std::int64_t>(info.member_elements.size()) != size) {
            return where.fail(ErrorCode::kFailedPrecondition, i,
                              str_cat("collective ", op.collective, " lists ",
                                      info.member_elements.size(), " member counts for axis '",
                                      s.mesh.axis_name(info.axis), "' of size ", size));
          }
          if (info.member_elements[idx(member)] != op.elements) {
            return where.fail(
                ErrorCode::kFailedPrecondition, i,
                str_cat("moves ", op.elements, " elements where collective ", op.collective,
                        " lists ", info.member_elements[idx(member)], " for member ", member));
          }
        } else if (op.elements != r.elements) {
          return where.fail(
              ErrorCode::kFailedPrecondition, i,
              str_cat("moves ", op.elements, " elements where rank class 0 moves ", r.elements,
                      " and collective ", op.collective, " lists no per-member counts"));
        }
      }
      if (seq[st].size() < ref_seq[st].size()) {
        return where.fail(ErrorCode::kFailedPrecondition,
                          str_cat("issues ", seq[st].size(), " collectives on the ",
                                  to_string(static_cast<StreamKind>(st)),
                                  " stream where rank class 0 issues ", ref_seq[st].size()));
      }
    }
  }
  return ok_status();
}

}  // namespace

Status check_structure(const ScheduleParts& schedule) { return structure_impl(schedule); }

Status check_events(const ScheduleParts& schedule) {
  FSDP_RETURN_IF_ERROR(structure_impl(schedule));
  FSDP_TRY(std::vector<HappensBefore> orders, build_orders(schedule));
  (void)orders;
  return record_order_impl(schedule);
}

Status check_buffer_lifetimes(const ScheduleParts& schedule) {
  FSDP_RETURN_IF_ERROR(structure_impl(schedule));
  FSDP_TRY(std::vector<HappensBefore> orders, build_orders(schedule));
  for (std::size_t c = 0; c < orders.size(); ++c) {
    FSDP_RETURN_IF_ERROR(buffers_program(schedule, c, orders[c]));
  }
  return ok_status();
}

Status check_operands(const ScheduleParts& schedule) {
  FSDP_RETURN_IF_ERROR(structure_impl(schedule));
  FSDP_TRY(std::vector<HappensBefore> orders, build_orders(schedule));
  for (std::size_t c = 0; c < orders.size(); ++c) {
    FSDP_RETURN_IF_ERROR(buffers_program(schedule, c, orders[c]));
    FSDP_RETURN_IF_ERROR(operands_program(schedule, c, orders[c]));
    FSDP_RETURN_IF_ERROR(operand_ranges_program(schedule, c));
  }
  return ok_status();
}

Status check_collective_order(const ScheduleParts& schedule) {
  FSDP_RETURN_IF_ERROR(structure_impl(schedule));
  return collectives_impl(schedule);
}

Status verify_schedule(const ScheduleParts& schedule) {
  FSDP_RETURN_IF_ERROR(structure_impl(schedule));
  FSDP_TRY(std::vector<HappensBefore> orders, build_orders(schedule));
  FSDP_RETURN_IF_ERROR(record_order_impl(schedule));
  for (std::size_t c = 0; c < orders.size(); ++c) {
    FSDP_RETURN_IF_ERROR(buffers_program(schedule, c, orders[c]));
    FSDP_RETURN_IF_ERROR(operands_program(schedule, c, orders[c]));
    FSDP_RETURN_IF_ERROR(operand_ranges_program(schedule, c));
  }
  return collectives_impl(schedule);
}

}  // namespace fsdp

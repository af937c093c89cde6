// SPDX-License-Identifier: Apache-2.0
// The builder walks the model as fully_shard's hooks would (fsdp-behaviour.md §4.3-§4.7, §4.9) and writes what
// each hook enqueues, stream by stream. See docs/design/schedule-ir.md for the op sequence of one
// unit and the buffer sizes (§5).
#include "core/schedule/schedule_builder.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/layout/local_range.h"
#include "core/mesh/placements.h"
#include "core/mesh/redistribute.h"
#include "core/model/unit_work.h"
#include "core/policy/recompute_policy.h"
#include "core/schedule/shard_plan.h"

namespace fsdp {
namespace {

// A group's geometry (core/schedule/group_geometry.h) plus, per leg, the indices of its
// collectives in the schedule's table.
struct GroupPlan {
  const GroupGeometry* geo = nullptr;
  std::array<std::vector<std::int32_t>, kNumCollectiveLegs> collectives;
  const std::vector<std::int32_t>& of(CollectiveLeg leg) const {
    return collectives[static_cast<std::size_t>(leg)];
  }
};

struct UnitPlan {
  std::vector<std::int32_t> groups;  // indices into the group plans
  std::int64_t param_elements = 0;   // for prefetch budgets
  // Per entry of the unit's work.collectives: its index in the collectives table, mesh axis,
  // elements and dtype (docs/design/parallelism.md).
  struct Activation {
    std::int32_t collective = -1;
    std::int32_t axis = -1;
    std::int64_t elements = 0;
    DType dtype = DType::kBf16;
  };
  std::vector<Activation> activations;
};

OpKind activation_op_kind(ActivationCollectiveKind kind) {
  switch (kind) {
    case ActivationCollectiveKind::kAllReduce:
      return OpKind::kAllReduce;
    case ActivationCollectiveKind::kAllGather:
      return OpKind::kAllGather;
    case ActivationCollectiveKind::kReduceScatter:
      return OpKind::kReduceScatter;
    case ActivationCollectiveKind::kAllToAll:
      return OpKind::kAllToAll;
  }
  return OpKind::kAllReduce;
}

// §4.12/§5.1: an MXFP8 weight buffer of n elements holds the row-wise and the column-wise
// payload (one byte per element each) and one E8M0 scale byte per 32-element block of each
// plane, counted as fp8 (one-byte) elements; both planes are gathered per unshard (§4.5, as the
// MCore/TE integration asks for both usages). Other groups: n.
Expected<std::int64_t> weight_elements(const GroupGeometry& g, std::int64_t n) {
  if (!g.mxfp8) {
    return n;
  }
  std::int64_t planes = 0;
  if (!checked_mul(n, 2, &planes) || !checked_add(planes, 2 * ((n + 31) / 32), &planes)) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("MXFP8 planes of ", n, " elements overflow int64"));
  }
  return planes;
}

std::vector<AxisPlacement> axis_placements(const std::vector<Placement>& ps) {
  std::vector<AxisPlacement> out;
  out.reserve(ps.size());
  for (const Placement& p : ps) {
    out.push_back(p.axis_placement());
  }
  return out;
}

// Local element count of `rank` for placements `ps` of layout `layout`.
Expected<std::int64_t> local_elements(const GroupGeometry& g, const std::vector<Placement>& ps,
                                      std::int64_t rank) {
  FSDP_TRY(MeshCoordinate coord, g.placements.dp_coordinate(rank));
  const std::vector<AxisPlacement> aps = axis_placements(ps);
  FSDP_TRY(Range r, get_local_range(g.layout, coord, aps));
  return r.numel;
}

// The elements this rank moves in a step: all-gather contributes its input shard, reduce-scatter
// receives its output shard, all-reduce reduces its (unchanged) local range.
Expected<std::int64_t> step_elements(const GroupGeometry& g, const std::vector<Placement>& before,
                                     const RedistributeStep& step, const Placement& target,
                                     std::int64_t rank) {
  if (step.kind == RedistributeKind::kReduceScatter) {
    std::vector<Placement> after = before;
    after[static_cast<std::size_t>(step.axis)] = target;
    return local_elements(g, after, rank);
  }
  return local_elements(g, before, rank);
}

// Builds one rank class's program. The builder knows, while it emits each op, which buffers the
// op reads and writes; it writes them down as the op's operands (core/schedule/operand.h).
class ProgramBuilder {
 public:
  ProgramBuilder(const Model& model, const FsdpConfig& config, const Workload& workload,
                 const std::vector<GroupPlan>& groups, const std::vector<UnitPlan>& units,
                 const std::vector<std::int32_t>& forward_order,
                 const std::vector<std::int32_t>& backward_order, std::int64_t rank)
      : model_(model),
        config_(config),
        workload_(workload),
        groups_(groups),
        units_(units),
        forward_order_(forward_order),
        backward_order_(backward_order),
        rank_(rank) {
    unified_ = config.schedule().unify_communication_stream();
    rs_ = unified_ ? StreamKind::kAllGather : StreamKind::kReduceScatter;
    gathered_event_.assign(units.size(), -1);
    unsharded_buffer_.assign(groups.size(), -1);
    copy_out_buffer_.assign(groups.size(), -1);
    synced_weight_buffer_.assign(groups.size(), -1);
    main_grad_buffer_.assign(groups.size(), -1);
    final_grad_buffer_.assign(groups.size(), -1);
    unit_grad_buffer_.assign(groups.size(), -1);
    resident_.assign(groups.size(), GroupResident{});
    activation_buffer_.assign(units.size(), -1);
    checkpoints_ = checkpoints_of(config.recompute(), model, workload.compile);
    forward_position_.assign(units.size(), -1);
    backward_position_.assign(units.size(), -1);
    for (std::size_t i = 0; i < forward_order.size(); ++i) {
      forward_position_[static_cast<std::size_t>(forward_order[i])] = static_cast<std::int64_t>(i);
    }
    for (std::size_t i = 0; i < backward_order.size(); ++i) {
      backward_position_[static_cast<std::size_t>(backward_order[i])] =
          static_cast<std::int64_t>(i);
    }
    for (std::int32_t u : forward_order) {
      forward_elements_.push_back(units[static_cast<std::size_t>(u)].param_elements);
      if (model.units()[static_cast<std::size_t>(u)].activations().block &&
          !units[static_cast<std::size_t>(u)].groups.empty()) {
        last_block_ = u;
      }
    }
    for (std::int32_t u : backward_order) {
      backward_elements_.push_back(units[static_cast<std::size_t>(u)].param_elements);
    }
  }

  Expected<RankProgram> build() {
    program_.representative_rank = rank_;
    // Once per program; unshard then reads each position's targets only.
    FSDP_RETURN_IF_ERROR(check_prefetch_elements(forward_elements_));
    FSDP_RETURN_IF_ERROR(check_prefetch_elements(backward_elements_));
    FSDP_RETURN_IF_ERROR(add_resident());
    tokens_ = workload_.seq_len * workload_.micro_batch_size;
    const std::int64_t n_mb = config_.num_microbatches();
    for (std::int64_t mb = 0; mb < n_mb; ++mb) {
      mb_ = static_cast<std::int32_t>(mb);
      is_last_ = config_.is_last_microbatch(mb);
      phase_ = Phase::kForward;
      for (std::int32_t root : model_.children(Unit::kNoParent)) {
        FSDP_RETURN_IF_ERROR(forward_unit(root));
      }
      phase_ = Phase::kBackward;
      // Every unit is a backward-prefetch candidate again in each microbatch's backward.
      std::fill(done_backward_.begin(), done_backward_.end(), false);
      const std::span<const std::int32_t> roots = model_.children(Unit::kNoParent);
      for (auto it = roots.rbegin(); it != roots.rend(); ++it) {
        FSDP_RETURN_IF_ERROR(backward_unit(*it));
      }
      if (is_last_) {
        // The autograd completion callback: compute waits for every reduction (§4.4).
        sync(rs_, StreamKind::kCompute);
      }
    }
    FSDP_RETURN_IF_ERROR(optimizer_step());
    program_.num_events = next_event_;
    program_.num_buffers = next_buffer_;
    return std::move(program_);
  }

 private:
  // Indices into RankProgram::resident of a group's resident buffers; -1 where it has none.
  struct GroupResident {
    std::int32_t main_weight = -1;
    std::int32_t model_weight = -1;  // -1 when the model weight aliases the main weight
    std::int32_t main_grad = -1;
    std::int32_t optimizer_state = -1;
  };

  const GroupGeometry& geo(std::int32_t gi) const {
    return *groups_[static_cast<std::size_t>(gi)].geo;
  }

  // --- operands -------------------------------------------------------------------------------
  static Operand transient(std::int32_t buffer, Access access, std::int32_t gi, Extent extent) {
    return Operand{BufferSpace::kTransient, access, extent, buffer, gi};
  }
  static Operand resident(std::int32_t index, Access access, std::int32_t gi, Extent extent) {
    return Operand{BufferSpace::kResident, access, extent, index, gi};
  }

  // The weights compute reads for a group (§4.5): the unsharded buffer; for a replicated
  // parameter, the synced model weight (ZeRO-1/2), else the resident model weight (no-shard).
  Operand weight_operand(std::int32_t gi) const {
    const GroupGeometry& g = geo(gi);
    const auto gidx = static_cast<std::size_t>(gi);
    if (!g.param_replicated) {
      if (copy_out_buffer_[gidx] >= 0) {
        return transient(copy_out_buffer_[gidx], Access::kRead, gi, Extent::kFull);
      }
      return transient(unsharded_buffer_[gidx], Access::kRead, gi, Extent::kFull);
    }
    if (g.needs_weight_sync) {
      return transient(synced_weight_buffer_[gidx], Access::kRead, gi, Extent::kParameter);
    }
    return resident_weight(gi, Access::kRead);
  }

  // The resident weight in the compute dtype: the model weight, or the main weight it aliases.
  Operand resident_weight(std::int32_t gi, Access access) const {
    const GroupResident& r = resident_[static_cast<std::size_t>(gi)];
    return resident(r.model_weight >= 0 ? r.model_weight : r.main_weight, access, gi,
                    Extent::kOptimizer);
  }

  // The group's main-grad accumulator: resident, or the step's accumulation buffer.
  Operand accumulator(std::int32_t gi, Access access) const {
    const GroupResident& r = resident_[static_cast<std::size_t>(gi)];
    if (r.main_grad >= 0) {
      return resident(r.main_grad, access, gi, Extent::kGradient);
    }
    return transient(main_grad_buffer_[static_cast<std::size_t>(gi)], access, gi,
                     Extent::kGradient);
  }

  // Appends `op` with its operands.
  void emit(Op op, std::initializer_list<Operand> operands) {
    emit(op, std::span<const Operand>(operands.begin(), operands.size()));
  }
  void emit(Op op, std::span<const Operand> operands) {
    op.first_operand = static_cast<std::int32_t>(program_.operands.size());
    op.num_operands = static_cast<std::int32_t>(operands.size());
    program_.operands.insert(program_.operands.end(), operands.begin(), operands.end());
    program_.ops.push_back(op);
  }

  // --- emission helpers ---------------------------------------------------------------------
  Op base(OpKind kind, StreamKind stream, std::int32_t unit = -1, std::int32_t group = -1) const {
    Op op;
    op.kind = kind;
    op.stream = stream;
    op.phase = phase_;
    op.unit = unit;
    op.group = group;
    op.microbatch = phase_ == Phase::kStep ? -1 : mb_;
    op.first_operand = static_cast<std::int32_t>(program_.operands.size());
    return op;
  }

  void sync(StreamKind from, StreamKind to) {
    if (from == to) {
      return;
    }
    const std::int32_t e = next_event_++;
    Op rec = base(OpKind::kRecord, from);
    rec.event = e;
    program_.ops.push_back(rec);
    Op wait = base(OpKind::kWait, to);
    wait.event = e;
    program_.ops.push_back(wait);
  }

  std::int32_t record(StreamKind stream, std::int32_t unit) {
    const std::int32_t e = next_event_++;
    Op rec = base(OpKind::kRecord, stream, unit);
    rec.event = e;
    program_.ops.push_back(rec);
    return e;
  }

  void wait(StreamKind stream, std::int32_t event, std::int32_t unit) {
    Op w = base(OpKind::kWait, stream, unit);
    w.event = event;
    program_.ops.push_back(w);
  }

  Expected<std::int32_t> alloc(StreamKind stream, BufferClass cls, std::int32_t unit,
                               std::int32_t group, DType dtype, std::int64_t elements) {
    std::int64_t bytes = 0;
    if (!checked_mul(elements, dtype_bytes(dtype), &bytes)) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("buffer of ", elements, " elements of ", to_string(dtype),
                           " overflows int64 bytes"));
    }
    Op op = base(OpKind::kAlloc, stream, unit, group);
    op.buffer = next_buffer_++;
    op.buffer_class = cls;
    op.dtype = dtype;
    op.elements = elements;
    op.bytes = bytes;
    program_.ops.push_back(op);
    return op.buffer;
  }

  void free_buffer(StreamKind stream, std::int32_t buffer, BufferClass cls, std::int32_t unit,
                   std::int32_t group) {
    Op op = base(OpKind::kFree, stream, unit, group);
    op.buffer = buffer;
    op.buffer_class = cls;
    program_.ops.push_back(op);
  }

  // `dp_axis` indexes the placement lists; the op names the mesh axis, as CollectiveInfo does.
  Status collective(const GroupGeometry& g, std::int32_t collective_index, OpKind kind,
                    std::int32_t dp_axis, DType dtype, std::int64_t elements, StreamKind stream,
                    std::initializer_list<Operand> operands) {
    Op op = base(kind, stream, g.unit, g.group);
    op.axis = static_cast<std::int32_t>(g.placements.dp_axes()[static_cast<std::size_t>(dp_axis)]);
    op.collective = collective_index;
    op.dtype = dtype;
    op.elements = elements;
    if (!checked_mul(elements, dtype_bytes(dtype), &op.bytes)) {
      return Error(ErrorCode::kOutOfRange, "collective payload overflows int64 bytes");
    }
    emit(op, operands);
    return ok_status();
  }

  // The unit's activation collectives of `pass`, in their order, on the compute stream: a
  // tensor-parallel layer's compute waits for them (Megatron-LM issues them synchronously).
  Status activation_collectives(std::int32_t u, CollectivePass pass) {
    const Unit& unit = model_.units()[static_cast<std::size_t>(u)];
    const std::vector<ActivationCollective>& list = unit.work().collectives;
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (list[i].pass != pass) {
        continue;
      }
      const UnitPlan::Activation& a = units_[static_cast<std::size_t>(u)].activations[i];
      Op op = base(activation_op_kind(list[i].kind), StreamKind::kCompute, u, -1);
      op.axis = a.axis;
      op.collective = a.collective;
      op.dtype = a.dtype;
      op.elements = a.elements;
      if (!checked_mul(a.elements, dtype_bytes(a.dtype), &op.bytes)) {
        return Error(ErrorCode::kOutOfRange, str_cat("collective ", list[i].site, " of unit '",
                                                     unit.name(), "' overflows int64 bytes"));
      }
      emit(op, {});
    }
    return ok_status();
  }

  void compute(OpKind kind, std::int32_t unit, std::int32_t group, std::int64_t flops,
               std::int64_t mem_bytes, std::span<const Operand> operands,
               DType dtype = DType::kBf16) {
    Op op = base(kind, StreamKind::kCompute, unit, group);
    op.flops = flops;
    op.mem_bytes = mem_bytes;
    op.dtype = dtype;
    emit(op, operands);
  }

  // The math dtype of unit u's forward, backward and recompute: the widest compute dtype of its
  // parameter groups (the MixedPrecisionPolicy's), bf16 for a unit without parameters. The cost
  // model prices fp32 math at the GPU's fp32 rate, not its bf16 tensor rate.
  DType unit_compute_dtype(std::int32_t u) const {
    DType widest = DType::kBf16;
    bool any = false;
    for (std::int32_t gi : units_[static_cast<std::size_t>(u)].groups) {
      const DType d = geo(gi).compute_dtype;
      if (!any || dtype_bytes(d) > dtype_bytes(widest)) {
        widest = d;
      }
      any = true;
    }
    return widest;
  }

  // --- §5.1 resident buffers ------------------------------------------------------------------
  Status add_resident() {
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      const GroupGeometry& g = *groups_[gi].geo;
      GroupResident& r = resident_[gi];
      FSDP_TRY(std::int64_t opt, local_elements(g, g.placements.optimizer(), rank_));
      FSDP_TRY(std::int64_t grad, local_elements(g, g.placements.gradient(), rank_));
      auto add = [&](BufferClass cls, ResidentKind kind, DType dtype, std::int64_t elements,
                     std::int64_t bytes_per_element, std::int32_t* index) -> Status {
        ResidentBuffer b;
        b.buffer_class = cls;
        b.kind = kind;
        b.unit = g.unit;
        b.group = g.group;
        b.geometry_group = static_cast<std::int32_t>(gi);
        b.dtype = dtype;
        b.elements = elements;
        if (!checked_mul(elements, bytes_per_element, &b.bytes)) {
          return Error(ErrorCode::kOutOfRange, str_cat(to_string(kind), " bytes overflow int64"));
        }
        *index = static_cast<std::int32_t>(program_.resident.size());
        program_.resident.push_back(b);
        return ok_status();
      };
      FSDP_RETURN_IF_ERROR(add(BufferClass::kShardedWeights, ResidentKind::kMainWeight,
                               g.main_dtype, opt, dtype_bytes(g.main_dtype), &r.main_weight));
      // PyTorch FSDP keeps no low-precision shard: FSDP2 casts the fp32 shard while copying it
      // into the all-gather input, FSDP1 into a transient _mp_shard (framework_profile.h).
      if (!g.aliases_main &&
          (g.param_replicated || config_.framework().keeps_model_weight_shard())) {
        FSDP_TRY(std::int64_t model_elements, weight_elements(g, opt));
        FSDP_RETURN_IF_ERROR(add(BufferClass::kShardedWeights, ResidentKind::kModelWeight,
                                 g.compute_dtype, model_elements, dtype_bytes(g.compute_dtype),
                                 &r.model_weight));
      }
      if (g.trainable && g.main_grad_resident && !config_.framework().transient_main_grads()) {
        FSDP_RETURN_IF_ERROR(add(BufferClass::kMainGrads, ResidentKind::kMainGrad,
                                 g.main_grad_dtype, grad, dtype_bytes(g.main_grad_dtype),
                                 &r.main_grad));
      }
      const std::int64_t states = config_.optimizer().num_states();
      if (g.trainable && states > 0) {
        FSDP_RETURN_IF_ERROR(add(BufferClass::kOptimizerState, ResidentKind::kOptimizerState,
                                 config_.optimizer().state_dtype(), opt * states,
                                 dtype_bytes(config_.optimizer().state_dtype()),
                                 &r.optimizer_state));
      }
    }
    return ok_status();
  }

  // --- unshard / reshard (§4.5) -----------------------------------------------------------------
  std::int64_t inflight() const {
    std::int64_t n = 0;
    for (std::int32_t e : gathered_event_) {
      n += e >= 0 ? 1 : 0;
    }
    return n;
  }

  bool has_gather_work(std::int32_t u) const {
    for (std::int32_t gi : units_[static_cast<std::size_t>(u)].groups) {
      const GroupGeometry& g = geo(gi);
      if (!g.param_replicated ||
          (g.needs_weight_sync && synced_weight_buffer_[static_cast<std::size_t>(gi)] < 0)) {
        return true;
      }
    }
    return false;
  }

  // Enqueues the gathers of unit u on the all-gather stream and records its unshard event.
  Status gather_unit(std::int32_t u) {
    for (std::int32_t gi : units_[static_cast<std::size_t>(u)].groups) {
      const GroupGeometry& g = geo(gi);
      const GroupPlan& plan = groups_[static_cast<std::size_t>(gi)];
      const auto gidx = static_cast<std::size_t>(gi);
      if (g.needs_weight_sync && synced_weight_buffer_[gidx] < 0) {
        // §4.5.1: the model weight rests at optimizer placements after a step; the first unshard
        // of the step gathers it back to parameter placements, into a buffer kept to the step.
        const RedistributeLeg& sync_leg = g.leg(CollectiveLeg::kModelWeightSync);
        FSDP_TRY(std::int64_t param_local, local_elements(g, g.placements.parameter(), rank_));
        FSDP_TRY(std::int64_t synced_elements, weight_elements(g, param_local));
        FSDP_TRY(synced_weight_buffer_[gidx],
                 alloc(StreamKind::kAllGather, BufferClass::kUnshardedWeights, g.unit, g.group,
                       g.compute_dtype, synced_elements));
        const Operand synced = transient(synced_weight_buffer_[gidx], Access::kWrite, gi,
                                         Extent::kParameter);
        for (std::size_t s = 0; s < sync_leg.steps.size(); ++s) {
          FSDP_TRY(std::int64_t n,
                   step_elements(g, sync_leg.states[s], sync_leg.steps[s],
                                 g.placements.parameter()[static_cast<std::size_t>(
                                     sync_leg.steps[s].axis)],
                                 rank_));
          FSDP_TRY(std::int64_t moved, weight_elements(g, n));
          // The first step reads the resident shard; later ones gather within the buffer.
          Operand src = s == 0 ? resident_weight(gi, Access::kRead) : synced;
          src.access = Access::kRead;
          FSDP_RETURN_IF_ERROR(collective(g, plan.of(CollectiveLeg::kModelWeightSync)[s],
                                          collective_kind(sync_leg.steps[s].kind),
                                          static_cast<std::int32_t>(sync_leg.steps[s].axis),
                                          g.compute_dtype, moved, StreamKind::kAllGather,
                                          {src, synced}));
        }
      }
      if (g.param_replicated) {
        continue;  // compute reads the (gathered) model weight directly
      }
      const RedistributeLeg& unshard_leg = g.leg(CollectiveLeg::kUnshard);
      FSDP_TRY(std::int64_t unsharded_elements, weight_elements(g, g.layout.size()));
      FSDP_TRY(unsharded_buffer_[gidx],
               alloc(StreamKind::kAllGather, BufferClass::kUnshardedWeights, g.unit, g.group,
                     g.gather_dtype, unsharded_elements));
      const Operand unsharded =
          transient(unsharded_buffer_[gidx], Access::kWrite, gi, Extent::kFull);
      const std::vector<Placement> full = all_replicate(g.placements.num_dp_axes());
      for (std::size_t s = 0; s < unshard_leg.steps.size(); ++s) {
        FSDP_TRY(std::int64_t n,
                 step_elements(g, unshard_leg.states[s], unshard_leg.steps[s],
                               full[static_cast<std::size_t>(unshard_leg.steps[s].axis)], rank_));
        FSDP_TRY(std::int64_t moved, weight_elements(g, n));
        // The first step reads the parameter shard: the synced buffer (ZeRO-1/2 placements
        // differ from the optimizer's) or the resident weight; later ones gather in place.
        Operand src = unsharded;
        if (s == 0) {
          src = g.needs_weight_sync
                    ? transient(synced_weight_buffer_[gidx], Access::kRead, gi, Extent::kParameter)
                    : resident_weight(gi, Access::kRead);
        }
        src.access = Access::kRead;
        FSDP_RETURN_IF_ERROR(collective(g, plan.of(CollectiveLeg::kUnshard)[s], OpKind::kAllGather,
                                        static_cast<std::int32_t>(unshard_leg.steps[s].axis),
                                        g.gather_dtype, moved, StreamKind::kAllGather,
                                        {src, unsharded}));
      }
    }
    gathered_event_[static_cast<std::size_t>(u)] = record(StreamKind::kAllGather, u);
    return ok_status();
  }

  // unshard(prefetch=direction) of §4.3/§4.4: demand gather, compute waits, then prefetches.
  Status unshard(std::int32_t u, bool forward) {
    const auto uidx = static_cast<std::size_t>(u);
    if (units_[uidx].groups.empty()) {
      return ok_status();
    }
    if (gathered_event_[uidx] < 0 && has_gather_work(u)) {
      FSDP_RETURN_IF_ERROR(gather_unit(u));
    }
    if (gathered_event_[uidx] >= 0) {
      wait(StreamKind::kCompute, gathered_event_[uidx], u);
      FSDP_RETURN_IF_ERROR(copy_out(u));
    }
    const PrefetchPolicy& policy =
        forward ? config_.schedule().forward_prefetch() : config_.schedule().backward_prefetch();
    const std::vector<std::int32_t>& order = forward ? forward_order_ : backward_order_;
    const std::vector<std::int64_t>& elements = forward ? forward_elements_ : backward_elements_;
    const std::int64_t pos = forward ? forward_position_[uidx] : backward_position_[uidx];
    if (pos < 0 || pos >= static_cast<std::int64_t>(elements.size())) {
      return prefetch_targets(policy, elements, pos).error();  // names the position
    }
    const std::vector<std::int64_t> targets = prefetch_targets_of_checked(policy, elements, pos);
    const std::int64_t cap = config_.schedule().max_inflight_all_gathers();
    for (std::int64_t t : targets) {
      const std::int32_t v = order[static_cast<std::size_t>(t)];
      if (gathered_event_[static_cast<std::size_t>(v)] >= 0 || !has_gather_work(v) ||
          (phase_ == Phase::kBackward && done_backward_[static_cast<std::size_t>(v)])) {
        continue;
      }
      if (cap > 0 && inflight() >= cap) {
        break;
      }
      FSDP_RETURN_IF_ERROR(gather_unit(v));
    }
    return ok_status();
  }

  // FSDP2's wait_for_unshard (foreach_all_gather_copy_out): on the compute stream, the flat
  // all-gather output of each group is copied out to per-parameter tensors (the group's numel in
  // the gather dtype, no padding), then freed; compute reads the copies until the reshard frees
  // them (on the compute stream, where they were allocated).
  Status copy_out(std::int32_t u) {
    if (!config_.framework().copies_out()) {
      return ok_status();
    }
    for (std::int32_t gi : units_[static_cast<std::size_t>(u)].groups) {
      const GroupGeometry& g = geo(gi);
      const auto gidx = static_cast<std::size_t>(gi);
      if (g.param_replicated || unsharded_buffer_[gidx] < 0 || copy_out_buffer_[gidx] >= 0) {
        continue;
      }
      FSDP_TRY(std::int64_t elements, weight_elements(g, g.numel));
      FSDP_TRY(copy_out_buffer_[gidx], alloc(StreamKind::kCompute, BufferClass::kUnshardedWeights,
                                             g.unit, g.group, g.gather_dtype, elements));
      FSDP_TRY(std::int64_t flat, weight_elements(g, g.layout.size()));
      Op op = base(OpKind::kCast, StreamKind::kCompute, g.unit, g.group);
      std::int64_t read = 0;
      std::int64_t written = 0;
      if (!checked_mul(flat, dtype_bytes(g.gather_dtype), &read) ||
          !checked_mul(elements, dtype_bytes(g.gather_dtype), &written) ||
          !checked_add(read, written, &op.mem_bytes)) {
        return Error(ErrorCode::kOutOfRange, "copy-out bytes overflow int64");
      }
      emit(op, {transient(unsharded_buffer_[gidx], Access::kRead, gi, Extent::kFull),
                transient(copy_out_buffer_[gidx], Access::kWrite, gi, Extent::kFull)});
      free_buffer(StreamKind::kCompute, unsharded_buffer_[gidx], BufferClass::kUnshardedWeights,
                  g.unit, g.group);
      unsharded_buffer_[gidx] = -1;
    }
    return ok_status();
  }

  // Whether unit u frees its unsharded weights after its forward (post_forward): the
  // --reshard-after-forward policy for the transformer blocks; the units outside them (the
  // root module's parameters: embedding, head) follow it under Megatron-FSDP and are never
  // resharded by PyTorch FSDP1/FSDP2.
  bool reshards_after_forward(std::int32_t u) const {
    const FrameworkProfile& f = config_.framework();
    const bool block = model_.units()[static_cast<std::size_t>(u)].activations().block;
    if (!block) {
      return f.root_reshards_after_forward();
    }
    switch (f.reshard_after_forward()) {
      case ReshardAfterForward::kAll:
        return true;
      case ReshardAfterForward::kAllButLast:
        return u != last_block_;
      case ReshardAfterForward::kNone:
        return false;
    }
    return true;
  }

  void reshard(std::int32_t u) {
    const auto uidx = static_cast<std::size_t>(u);
    if (gathered_event_[uidx] < 0) {
      return;
    }
    for (std::int32_t gi : units_[uidx].groups) {
      std::int32_t& buf = copy_out_buffer_[static_cast<std::size_t>(gi)];
      if (buf >= 0) {
        const GroupGeometry& g = geo(gi);
        free_buffer(StreamKind::kCompute, buf, BufferClass::kUnshardedWeights, g.unit, g.group);
        buf = -1;
      }
    }
    sync(StreamKind::kCompute, StreamKind::kAllGather);
    for (std::int32_t gi : units_[uidx].groups) {
      std::int32_t& buf = unsharded_buffer_[static_cast<std::size_t>(gi)];
      if (buf >= 0) {
        const GroupGeometry& g = geo(gi);
        free_buffer(StreamKind::kAllGather, buf, BufferClass::kUnshardedWeights, g.unit, g.group);
        buf = -1;
      }
    }
    gathered_event_[uidx] = -1;
  }

  // The weights every group of unit u reads, in group order.
  std::vector<Operand> weight_operands(std::int32_t u) const {
    std::vector<Operand> out;
    for (std::int32_t gi : units_[static_cast<std::size_t>(u)].groups) {
      out.push_back(weight_operand(gi));
    }
    return out;
  }

  // Bytes per logit of the loss's transients under eager PyTorch: forward, the bf16 logits (2)
  // and their fp32 upcast (4); backward, two fp32 gradients (8). Megatron's vocab-parallel
  // cross entropy works in place in its kept fp32 softmax: none.
  static constexpr std::int64_t kLossForwardBytes = 2 + 4;
  static constexpr std::int64_t kLossBackwardBytes = 4 + 4;
  // unit.activations().loss_logits x tokens x bytes_per_logit, 0 for a unit without a loss or a
  // framework that keeps no loss transients.
  Expected<std::int64_t> loss_bytes(const Unit& unit, std::int64_t bytes_per_logit) const {
    const std::int64_t logits = unit.activations().loss_logits;
    if (logits == 0 || !config_.framework().eager_torch_loss()) {
      return std::int64_t{0};
    }
    std::int64_t bytes = 0;
    if (!checked_mul(logits, tokens_, &bytes) || !checked_mul(bytes, bytes_per_logit, &bytes)) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("loss bytes of unit '", unit.name(), "' overflow int64"));
    }
    return bytes;
  }

  // --- forward (§4.3) ----------------------------------------------------------------------------
  Status forward_unit(std::int32_t u) {
    const Unit& unit = model_.units()[static_cast<std::size_t>(u)];
    if (unit.parent() == Unit::kNoParent) {
      sync(StreamKind::kCompute, StreamKind::kAllGather);  // root: AG after earlier compute
    }
    FSDP_RETURN_IF_ERROR(unshard(u, /*forward=*/true));
    FSDP_TRY(std::int64_t per_token, unit.forward_flops_per_token(workload_.seq_len));
    std::int64_t flops = 0;
    if (!checked_mul(per_token, tokens_, &flops)) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("forward FLOPs of unit '", unit.name(), "' overflow int64"));
    }
    const std::int64_t act_per_token = checkpoints_[static_cast<std::size_t>(u)].kept;
    std::int64_t act = 0;
    if (!checked_mul(act_per_token, tokens_, &act)) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("activation bytes of unit '", unit.name(), "' overflow int64"));
    }
    std::vector<Operand> operands = weight_operands(u);
    // The forward writes the activations it keeps, so they are allocated before it runs.
    if (act > 0) {
      FSDP_TRY(activation_buffer_[static_cast<std::size_t>(u)],
               alloc(StreamKind::kCompute, BufferClass::kActivations, u, -1, DType::kFp8, act));
      operands.push_back(transient(activation_buffer_[static_cast<std::size_t>(u)],
                                   Access::kWrite, -1, Extent::kNone));
    }
    // The loss (docs/design/simulator.md, "The loss"): eager PyTorch holds the bf16 logits
    // and their fp32 upcast while log_softmax writes the fp32 output kept for backward (in
    // `act`).
    std::int32_t loss_buffer = -1;
    FSDP_TRY(const std::int64_t loss_forward, loss_bytes(unit, kLossForwardBytes));
    if (loss_forward > 0) {
      FSDP_TRY(loss_buffer, alloc(StreamKind::kCompute, BufferClass::kActivations, u, -1,
                                  DType::kFp8, loss_forward));
      operands.push_back(transient(loss_buffer, Access::kWrite, -1, Extent::kNone));
    }
    compute(OpKind::kForward, u, -1, flops, unit.param_bytes() + act, operands,
            unit_compute_dtype(u));
    FSDP_RETURN_IF_ERROR(activation_collectives(u, CollectivePass::kForward));
    if (loss_buffer >= 0) {
      free_buffer(StreamKind::kCompute, loss_buffer, BufferClass::kActivations, u, -1);
    }
    for (std::int32_t c : model_.children(u)) {
      FSDP_RETURN_IF_ERROR(forward_unit(c));
    }
    if (reshards_after_forward(u)) {
      reshard(u);  // post_forward
    }
    return ok_status();
  }

  // --- backward (§4.4, §4.6) ---------------------------------------------------------------------
  Status backward_unit(std::int32_t u) {
    const Unit& unit = model_.units()[static_cast<std::size_t>(u)];
    if (unit.parent() == Unit::kNoParent) {
      sync(StreamKind::kCompute, rs_);  // root pre_backward: RS after earlier compute
    }
    FSDP_RETURN_IF_ERROR(unshard(u, /*forward=*/false));
    const std::span<const std::int32_t> children = model_.children(u);
    for (auto it = children.rbegin(); it != children.rend(); ++it) {
      FSDP_RETURN_IF_ERROR(backward_unit(*it));
    }
    FSDP_TRY(std::int64_t per_token, unit.forward_flops_per_token(workload_.seq_len));
    std::int64_t fwd = 0;
    std::int64_t bwd = 0;
    if (!checked_mul(per_token, tokens_, &fwd) || !checked_mul(fwd, 2, &bwd)) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("backward FLOPs of unit '", unit.name(), "' overflow int64"));
    }
    std::int32_t& act = activation_buffer_[static_cast<std::size_t>(u)];
    const std::vector<Operand> weights = weight_operands(u);
    std::vector<Operand> backward_operands = weights;
    if (act >= 0) {
      backward_operands.push_back(transient(act, Access::kRead, -1, Extent::kNone));
    }
    std::int32_t recomputed = -1;
    const UnitCheckpoint& checkpoint = checkpoints_[static_cast<std::size_t>(u)];
    if (checkpoint.recomputed) {
      // The recompute re-materialises what the backward reads beyond what the forward kept; it
      // lives until the backward has consumed it. Its FLOPs are the policy's (the whole forward
      // for full recomputation); it reads the weights when it runs a matmul (full: always).
      std::int64_t extra = 0;
      std::int64_t flops = 0;
      Expected<std::int64_t> per_token_recompute =
          forward_flops_per_token(checkpoint.flops, workload_.seq_len);
      if (!per_token_recompute || !checked_mul(checkpoint.transient, tokens_, &extra) ||
          !checked_mul(*per_token_recompute, tokens_, &flops)) {
        return Error(ErrorCode::kOutOfRange,
                     str_cat("recomputed activation bytes or FLOPs of unit '", unit.name(),
                             "' overflow int64"));
      }
      const std::int64_t weight_bytes =
          config_.recompute().is_full_all_units() || checkpoint.flops.matmul > 0
              ? unit.param_bytes()
              : 0;
      std::vector<Operand> operands = weights;
      if (act >= 0) {
        operands.push_back(transient(act, Access::kRead, -1, Extent::kNone));
      }
      if (extra > 0) {
        FSDP_TRY(recomputed, alloc(StreamKind::kCompute, BufferClass::kActivations, u, -1,
                                   DType::kFp8, extra));
        operands.push_back(transient(recomputed, Access::kWrite, -1, Extent::kNone));
        backward_operands.push_back(transient(recomputed, Access::kRead, -1, Extent::kNone));
      }
      compute(OpKind::kRecompute, u, -1, flops, weight_bytes + extra, operands,
              unit_compute_dtype(u));
      // A recompute of the whole forward issues its collectives again; the selective modes
      // keep the collectives' outputs (torchtitan's policy saves them; core attention has none).
      if (config_.recompute().recomputes_whole_units()) {
        FSDP_RETURN_IF_ERROR(activation_collectives(u, CollectivePass::kForward));
      }
    }
    // Autograd writes the unit's full gradients during the backward (§5.2), so they are allocated
    // before it runs and count towards the backward peak (§5.2).
    for (std::int32_t gi : units_[static_cast<std::size_t>(u)].groups) {
      const GroupGeometry& g = geo(gi);
      if (g.trainable) {
        FSDP_TRY(unit_grad_buffer_[static_cast<std::size_t>(gi)],
                 alloc(StreamKind::kCompute, BufferClass::kUnitGrads, g.unit, g.group,
                       g.grad_dtype, g.numel));
        backward_operands.push_back(transient(unit_grad_buffer_[static_cast<std::size_t>(gi)],
                                              Access::kWrite, gi, Extent::kNone));
      }
    }
    // The loss's backward: nll_loss and log_softmax backward each write an fp32 logit gradient
    // beside the kept fp32 output (eager PyTorch).
    std::int32_t loss_grads = -1;
    FSDP_TRY(const std::int64_t loss_backward, loss_bytes(unit, kLossBackwardBytes));
    if (loss_backward > 0) {
      FSDP_TRY(loss_grads, alloc(StreamKind::kCompute, BufferClass::kActivations, u, -1,
                                 DType::kFp8, loss_backward));
      backward_operands.push_back(transient(loss_grads, Access::kWrite, -1, Extent::kNone));
    }
    compute(OpKind::kBackward, u, -1, bwd, 2 * unit.param_bytes(), backward_operands,
            unit_compute_dtype(u));
    FSDP_RETURN_IF_ERROR(activation_collectives(u, CollectivePass::kBackward));
    if (loss_grads >= 0) {
      free_buffer(StreamKind::kCompute, loss_grads, BufferClass::kActivations, u, -1);
    }
    if (act >= 0) {
      free_buffer(StreamKind::kCompute, act, BufferClass::kActivations, u, -1);
      act = -1;
    }
    if (recomputed >= 0) {
      free_buffer(StreamKind::kCompute, recomputed, BufferClass::kActivations, u, -1);
    }
    done_backward_[static_cast<std::size_t>(u)] = true;
    // post_backward: reshard first, then reduce every trainable group (§4.4).
    reshard(u);
    for (std::int32_t gi : units_[static_cast<std::size_t>(u)].groups) {
      if (geo(gi).trainable) {
        FSDP_RETURN_IF_ERROR(reduce_group(gi));
      }
    }
    return ok_status();
  }

  Status reduce_group(std::int32_t gi) {
    const GroupGeometry& g = geo(gi);
    const GroupPlan& plan = groups_[static_cast<std::size_t>(gi)];
    const auto gidx = static_cast<std::size_t>(gi);
    const RedistributeLeg& reduce = g.leg(CollectiveLeg::kGradReduce);
    const RedistributeLeg& finalize = g.leg(CollectiveLeg::kGradFinalize);
    // §4.6 steps 1-3: partial buffer on RS, copy on compute, collective on RS.
    // FSDP2 allocates the reduce-scatter input on the compute stream (foreach_reduce); the
    // copy-in casts the autograd gradient to the reduce dtype.
    const StreamKind partial_stream =
        config_.framework().partial_grads_on_compute_stream() ? StreamKind::kCompute : rs_;
    FSDP_TRY(std::int32_t partial, alloc(partial_stream, BufferClass::kPartialGrads, g.unit,
                                         g.group, g.reduce_dtype, g.layout.size()));
    sync(rs_, StreamKind::kCompute);
    std::int64_t copy_bytes = 0;
    if (!checked_mul(g.numel, dtype_bytes(g.grad_dtype) + dtype_bytes(g.reduce_dtype),
                     &copy_bytes)) {
      return Error(ErrorCode::kOutOfRange, "gradient copy bytes overflow int64");
    }
    const Operand copy_operands[] = {
        transient(unit_grad_buffer_[gidx], Access::kRead, gi, Extent::kNone),
        transient(partial, Access::kWrite, gi, Extent::kFull)};
    compute(OpKind::kGradCopy, g.unit, g.group, 0, copy_bytes, copy_operands);
    free_buffer(StreamKind::kCompute, unit_grad_buffer_[gidx], BufferClass::kUnitGrads, g.unit,
                g.group);
    unit_grad_buffer_[gidx] = -1;
    sync(StreamKind::kCompute, rs_);
    if (resident_[gidx].main_grad < 0 && main_grad_buffer_[gidx] < 0) {
      // §4.6.3b: the finalised main grad of the last step was smaller; a fresh accumulation
      // buffer is allocated on the first reduction of the step. PyTorch FSDP's sharded grads
      // (transient_main_grads) likewise.
      FSDP_TRY(std::int64_t grad_local, local_elements(g, g.placements.gradient(), rank_));
      FSDP_TRY(main_grad_buffer_[gidx], alloc(rs_, BufferClass::kMainGrads, g.unit, g.group,
                                              g.main_grad_dtype, grad_local));
    }
    // The step's first contribution overwrites the accumulator; later ones add to it.
    const Access accumulate = mb_ == 0 ? Access::kWrite : Access::kReadWrite;
    FSDP_TRY(std::int64_t grad_local, local_elements(g, g.placements.gradient(), rank_));
    // §4.6c/§5.2: the reduction lands in main_grad directly only when main_grad holds no
    // gradients yet (the step's first microbatch) and has the grad dtype; otherwise it goes to a
    // temporary of local(gradient) elements in the grad dtype that is then added or cast in.
    // Without communication (ZeRO-1, no-shard) the partial buffer itself is that input, added in
    // by a grad-accumulate op.
    std::int32_t reduced = -1;
    if (!reduce.steps.empty() && (mb_ > 0 || g.reduce_dtype != g.main_grad_dtype)) {
      FSDP_TRY(reduced,
               alloc(rs_, BufferClass::kPartialGrads, g.unit, g.group, g.reduce_dtype, grad_local));
    }
    for (std::size_t s = 0; s < reduce.steps.size(); ++s) {
      FSDP_TRY(std::int64_t n,
               step_elements(g, reduce.states[s], reduce.steps[s],
                             g.placements.gradient()[static_cast<std::size_t>(
                                 reduce.steps[s].axis)],
                             rank_));
      const bool last = s + 1 == reduce.steps.size();
      // Every step reads the partial buffer (the full layout). A step before the last (a chain
      // of reduce-scatters over several axes, inner first) writes its output, 1/size of its
      // input, in place there: the temporary and the accumulator hold only the final shard.
      // The multi-step unshard gathers in place in the unsharded buffer likewise.
      const Operand src = transient(partial, Access::kRead, gi, Extent::kFull);
      const Operand dst = !last          ? transient(partial, Access::kWrite, gi, Extent::kFull)
                          : reduced >= 0 ? transient(reduced, Access::kWrite, gi, Extent::kGradient)
                                         : accumulator(gi, Access::kWrite);
      const OpKind kind = collective_kind(reduce.steps[s].kind);
      const auto axis = static_cast<std::int32_t>(reduce.steps[s].axis);
      const std::int32_t index = plan.of(CollectiveLeg::kGradReduce)[s];
      if (last) {
        // The output is added into the accumulator, scaled by the schedule's gradient scale (in
        // place when the output is the accumulator).
        FSDP_RETURN_IF_ERROR(collective(g, index, kind, axis, g.reduce_dtype, n, rs_,
                                        {src, dst, accumulator(gi, accumulate)}));
      } else {
        FSDP_RETURN_IF_ERROR(collective(g, index, kind, axis, g.reduce_dtype, n, rs_, {src, dst}));
      }
    }
    if (reduce.steps.empty()) {
      std::int64_t bytes = 0;
      if (!checked_mul(grad_local, dtype_bytes(g.reduce_dtype) + 2 * dtype_bytes(g.main_grad_dtype),
                       &bytes)) {
        return Error(ErrorCode::kOutOfRange, "gradient accumulation bytes overflow int64");
      }
      Op op = base(OpKind::kGradAccumulate, rs_, g.unit, g.group);
      op.mem_bytes = bytes;
      emit(op, {transient(partial, Access::kRead, gi, Extent::kFull),
                accumulator(gi, accumulate)});
    }
    free_buffer(rs_, partial, BufferClass::kPartialGrads, g.unit, g.group);
    if (reduced >= 0) {
      free_buffer(rs_, reduced, BufferClass::kPartialGrads, g.unit, g.group);
    }
    if (is_last_ && !finalize.steps.empty()) {
      // §4.6f: finalise to the optimizer placements on the last microbatch only.
      std::int32_t final_buffer = -1;
      if (!g.main_grad_resident) {
        FSDP_TRY(std::int64_t opt_local, local_elements(g, g.placements.optimizer(), rank_));
        FSDP_TRY(final_buffer, alloc(rs_, BufferClass::kMainGrads, g.unit, g.group,
                                     g.main_grad_dtype, opt_local));
      }
      // §3.2/§5.1: the finalising all-reduce (no-shard, HSDP) copies main_grad into a new buffer
      // and reduces that in place; the old and the new buffer coexist until it ends (modelled as
      // an extra local(gradient) buffer around the all-reduce, which holds the result for no
      // consumer here: the operands name the accumulator reduced in place).
      std::int32_t all_reduce_copy = -1;
      const bool all_reduces = std::any_of(
          finalize.steps.begin(), finalize.steps.end(),
          [](const RedistributeStep& st) { return st.kind == RedistributeKind::kAllReduce; });
      if (g.main_grad_resident && all_reduces) {
        FSDP_TRY(all_reduce_copy, alloc(rs_, BufferClass::kMainGrads, g.unit, g.group,
                                        g.main_grad_dtype, grad_local));
      }
      for (std::size_t s = 0; s < finalize.steps.size(); ++s) {
        FSDP_TRY(std::int64_t n,
                 step_elements(g, finalize.states[s], finalize.steps[s],
                               g.placements.optimizer()[static_cast<std::size_t>(
                                   finalize.steps[s].axis)],
                               rank_));
        const OpKind kind = collective_kind(finalize.steps[s].kind);
        const auto axis = static_cast<std::int32_t>(finalize.steps[s].axis);
        const std::int32_t index = plan.of(CollectiveLeg::kGradFinalize)[s];
        if (kind == OpKind::kAllReduce) {
          FSDP_RETURN_IF_ERROR(collective(g, index, kind, axis, g.main_grad_dtype, n, rs_,
                                          {accumulator(gi, Access::kReadWrite)}));
        } else if (final_buffer >= 0 && s + 1 < finalize.steps.size()) {
          // A reduce-scatter before the last (ZeRO-1 over two sharded axes, inner first) works
          // in place in the main grad, which holds the gradient placements' (full) range; the
          // last one writes the optimizer shard (as the gradient reduction does).
          FSDP_RETURN_IF_ERROR(
              collective(g, index, kind, axis, g.main_grad_dtype, n, rs_,
                         {accumulator(gi, Access::kRead), accumulator(gi, Access::kWrite)}));
        } else if (final_buffer >= 0) {
          FSDP_RETURN_IF_ERROR(
              collective(g, index, kind, axis, g.main_grad_dtype, n, rs_,
                         {accumulator(gi, Access::kRead),
                          transient(final_buffer, Access::kWrite, gi, Extent::kOptimizer)}));
        } else {
          return Error(ErrorCode::kInternal,
                       str_cat("unit ", g.unit, " group ", g.group, ": a ", to_string(kind),
                               " finalises a resident main grad, which has no output buffer"));
        }
      }
      if (all_reduce_copy >= 0) {
        free_buffer(rs_, all_reduce_copy, BufferClass::kMainGrads, g.unit, g.group);
      }
      if (!g.main_grad_resident) {
        free_buffer(rs_, main_grad_buffer_[gidx], BufferClass::kMainGrads, g.unit, g.group);
        main_grad_buffer_[gidx] = -1;
        final_grad_buffer_[gidx] = final_buffer;
      }
    }
    return ok_status();
  }

  // --- optimizer step and post-step sync (§4.9) --------------------------------------------------
  Status optimizer_step() {
    phase_ = Phase::kStep;
    mb_ = -1;
    const std::int64_t per_element = optimizer_flops_per_element(config_.optimizer());
    const std::int64_t state_bytes = config_.optimizer().state_bytes_per_element();
    // torch.optim.AdamW(foreach=True): _multi_tensor_adam's torch._foreach_sqrt(exp_avg_sqs)
    // allocates one state-dtype tensor per parameter of the step at once, live until the
    // update's addcdiv; fused Adam (Megatron) none.
    std::int32_t scratch = -1;
    if (config_.framework().foreach_optimizer_scratch() &&
        config_.optimizer().kind() == OptimizerKind::kAdam) {
      std::int64_t total = 0;
      for (const GroupPlan& plan : groups_) {
        if (plan.geo->trainable) {
          FSDP_TRY(std::int64_t opt,
                   local_elements(*plan.geo, plan.geo->placements.optimizer(), rank_));
          if (!checked_add(total, opt, &total)) {
            return Error(ErrorCode::kOutOfRange, "optimizer scratch overflows int64");
          }
        }
      }
      if (total > 0) {
        FSDP_TRY(scratch, alloc(StreamKind::kCompute, BufferClass::kOptimizerState, -1, -1,
                                config_.optimizer().state_dtype(), total));
      }
    }
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      const GroupGeometry& g = *groups_[gi].geo;
      const auto i = static_cast<std::int32_t>(gi);
      if (!g.trainable) {
        continue;
      }
      FSDP_TRY(std::int64_t opt, local_elements(g, g.placements.optimizer(), rank_));
      const std::int64_t bytes_per =
          2 * dtype_bytes(g.main_dtype) + dtype_bytes(g.main_grad_dtype) + 2 * state_bytes;
      std::int64_t flops = 0;
      std::int64_t mem = 0;
      if (!checked_mul(opt, per_element, &flops) || !checked_mul(opt, bytes_per, &mem)) {
        return Error(ErrorCode::kOutOfRange, "optimizer step cost overflows int64");
      }
      // §5.2: a non-precision-aware optimizer sees the main grad through a cast copy in the
      // main-weight dtype whenever the dtypes differ (bf16 grads, fp32 main weights by default);
      // the copy lives for this group's update only (the update's scratch).
      std::int32_t cast_grad = -1;
      if (g.main_grad_dtype != g.main_dtype) {
        FSDP_TRY(cast_grad, alloc(StreamKind::kCompute, BufferClass::kMainGrads, g.unit, g.group,
                                  g.main_dtype, opt));
      }
      const GroupResident& r = resident_[gi];
      std::vector<Operand> operands;
      operands.push_back(resident(r.main_weight, Access::kReadWrite, i, Extent::kOptimizer));
      operands.push_back(final_grad_buffer_[gi] >= 0
                             ? transient(final_grad_buffer_[gi], Access::kRead, i,
                                         Extent::kOptimizer)
                             : accumulator(i, Access::kRead));
      if (r.optimizer_state >= 0) {
        operands.push_back(
            resident(r.optimizer_state, Access::kReadWrite, i, Extent::kOptimizer));
      }
      if (cast_grad >= 0) {
        operands.push_back(transient(cast_grad, Access::kWrite, i, Extent::kOptimizer));
      }
      if (scratch >= 0) {
        operands.push_back(transient(scratch, Access::kWrite, -1, Extent::kNone));
      }
      compute(OpKind::kOptimizerStep, g.unit, g.group, flops, mem, operands);
      if (cast_grad >= 0) {
        free_buffer(StreamKind::kCompute, cast_grad, BufferClass::kMainGrads, g.unit, g.group);
      }
      if (final_grad_buffer_[gi] >= 0) {
        free_buffer(StreamKind::kCompute, final_grad_buffer_[gi], BufferClass::kMainGrads,
                    g.unit, g.group);
        final_grad_buffer_[gi] = -1;
      }
      if (main_grad_buffer_[gi] >= 0) {
        // A transient sharded grad (PyTorch FSDP: zero_grad(set_to_none=True) frees it).
        free_buffer(StreamKind::kCompute, main_grad_buffer_[gi], BufferClass::kMainGrads, g.unit,
                    g.group);
        main_grad_buffer_[gi] = -1;
      }
    }
    if (scratch >= 0) {
      free_buffer(StreamKind::kCompute, scratch, BufferClass::kOptimizerState, -1, -1);
    }
    // Post-step model-weight sync: AG waits on compute, casts and releases on AG, compute waits.
    sync(StreamKind::kCompute, StreamKind::kAllGather);
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      const GroupGeometry& g = *groups_[gi].geo;
      const auto i = static_cast<std::int32_t>(gi);
      if (resident_[gi].model_weight >= 0) {
        FSDP_TRY(std::int64_t opt, local_elements(g, g.placements.optimizer(), rank_));
        FSDP_TRY(std::int64_t written, weight_elements(g, opt));
        Op op = base(OpKind::kCast, StreamKind::kAllGather, g.unit, g.group);
        if (!checked_mul(opt, dtype_bytes(g.main_dtype), &op.mem_bytes) ||
            !checked_mul(written, dtype_bytes(g.compute_dtype), &written) ||
            !checked_add(op.mem_bytes, written, &op.mem_bytes)) {
          return Error(ErrorCode::kOutOfRange, "post-step cast bytes overflow int64");
        }
        const GroupResident& r = resident_[gi];
        emit(op, {resident(r.main_weight, Access::kRead, i, Extent::kOptimizer),
                  resident(r.model_weight, Access::kWrite, i, Extent::kOptimizer)});
      }
      if (synced_weight_buffer_[gi] >= 0) {
        free_buffer(StreamKind::kAllGather, synced_weight_buffer_[gi],
                    BufferClass::kUnshardedWeights, g.unit, g.group);
        synced_weight_buffer_[gi] = -1;
      }
    }
    sync(StreamKind::kAllGather, StreamKind::kCompute);
    return ok_status();
  }

  const Model& model_;
  const FsdpConfig& config_;
  const Workload& workload_;
  const std::vector<GroupPlan>& groups_;
  const std::vector<UnitPlan>& units_;
  const std::vector<std::int32_t>& forward_order_;
  const std::vector<std::int32_t>& backward_order_;
  std::int64_t rank_;

  RankProgram program_;
  bool unified_ = false;
  StreamKind rs_ = StreamKind::kReduceScatter;
  Phase phase_ = Phase::kForward;
  std::int32_t mb_ = 0;
  bool is_last_ = true;
  std::int64_t tokens_ = 0;
  std::int32_t next_event_ = 0;
  std::int32_t next_buffer_ = 0;
  std::vector<std::int32_t> gathered_event_;
  std::vector<std::int32_t> unsharded_buffer_;
  // FSDP2: the per-parameter unsharded tensors the flat all-gather output is copied out to
  // (compute reads them); -1 while not copied out, and for the other frameworks.
  std::vector<std::int32_t> copy_out_buffer_;
  std::int32_t last_block_ = -1;  // the last transformer block in forward order, -1 for none
  std::vector<std::int32_t> synced_weight_buffer_;
  std::vector<std::int32_t> main_grad_buffer_;
  std::vector<std::int32_t> final_grad_buffer_;
  std::vector<std::int32_t> unit_grad_buffer_;
  std::vector<GroupResident> resident_;
  std::vector<std::int32_t> activation_buffer_;
  std::vector<UnitCheckpoint> checkpoints_;  // per unit
  std::vector<std::int64_t> forward_position_;
  std::vector<std::int64_t> backward_position_;
  std::vector<std::int64_t> forward_elements_;
  std::vector<std::int64_t> backward_elements_;
  std::vector<bool> done_backward_ = std::vector<bool>(units_.size(), false);
};

// §4.1.3 forward_order: named_modules() DFS pre-order, children in order.
void forward_visit(const Model& model, std::int32_t u, std::vector<std::int32_t>* out) {
  out->push_back(u);
  for (std::int32_t c : model.children(u)) {
    forward_visit(model, c, out);
  }
}

// §4.1.3 backward_order: a unit, then its children in reverse order.
void backward_visit(const Model& model, std::int32_t u, std::vector<std::int32_t>* out) {
  out->push_back(u);
  const std::span<const std::int32_t> children = model.children(u);
  for (auto it = children.rbegin(); it != children.rend(); ++it) {
    backward_visit(model, *it, out);
  }
}

}  // namespace

std::int64_t optimizer_flops_per_element(const OptimizerPolicy& optimizer) {
  switch (optimizer.kind()) {
    case OptimizerKind::kSgd:
      return 2;
    case OptimizerKind::kSgdMomentum:
      return 4;
    case OptimizerKind::kAdam:
      return 12;
  }
  return 0;
}

// Fills units[u].activations and the collectives table for every unit's work.collectives.
// Errors: a collective on an axis the mesh lacks; a tp or ep axis of size > 1 that no unit's
// collective uses (the model is not split for the mesh); sequence-sharded tokens that tp does
// not divide; sizes beyond int64.
namespace {

Status plan_activation_collectives(const Model& model, const FsdpConfig& config,
                                   const ShardGeometry& geometry, std::int64_t tokens,
                                   std::vector<UnitPlan>* units,
                                   std::vector<CollectiveInfo>* collectives) {
  const DeviceMesh& mesh = config.mesh();
  bool used[2] = {false, false};
  for (std::size_t u = 0; u < model.units().size(); ++u) {
    const Unit& unit = model.units()[u];
    const std::vector<ActivationCollective>& list = unit.work().collectives;
    if (list.empty()) {
      continue;
    }
    DType dtype = DType::kBf16;
    for (std::int32_t gi : geometry.unit_groups[u]) {
      if (geometry.groups[static_cast<std::size_t>(gi)].compute_dtype == DType::kFp32) {
        dtype = DType::kFp32;
      }
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      const ActivationCollective& c = list[i];
      const std::string_view axis_name = to_string(c.axis);
      const std::optional<std::int64_t> axis = mesh.axis_index(axis_name);
      if (!axis) {
        return Error(ErrorCode::kFailedPrecondition,
                     str_cat("unit '", unit.name(), "' issues ", to_string(c.kind), " ", c.site,
                             " over a '", axis_name, "' axis, but mesh ", to_string(mesh),
                             " has none: expected the mesh the model was split for"));
      }
      used[c.axis == ParallelAxis::kTensor ? 0 : 1] = true;
      std::int64_t product = 0;
      if (!checked_mul(tokens, c.elements_per_token, &product)) {
        return Error(ErrorCode::kOutOfRange, str_cat("collective ", c.site, " of unit '",
                                                     unit.name(), "' overflows int64 elements"));
      }
      const bool sharded = c.kind == ActivationCollectiveKind::kAllGather ||
                           c.kind == ActivationCollectiveKind::kReduceScatter;
      if (sharded && c.token_divisor > 1 && tokens % c.token_divisor != 0) {
        return Error(ErrorCode::kInvalidArgument,
                     str_cat("sequence parallelism over ", c.token_divisor,
                             " ranks needs the microbatch's tokens divisible by ", c.token_divisor,
                             ", got ", tokens, " (unit '", unit.name(), "')"));
      }
      CollectiveInfo info;
      info.kind = activation_op_kind(c.kind);
      info.axis = static_cast<std::int32_t>(*axis);
      info.unit = static_cast<std::int32_t>(u);
      info.dtype = dtype;
      info.activation = static_cast<std::int32_t>(i);
      UnitPlan::Activation a;
      a.collective = static_cast<std::int32_t>(collectives->size());
      a.axis = info.axis;
      a.elements = product / c.token_divisor + (product % c.token_divisor != 0 ? 1 : 0);
      a.dtype = dtype;
      (*units)[u].activations.push_back(a);
      collectives->push_back(std::move(info));
    }
  }
  const std::string_view names[2] = {kTensorParallelAxis, kExpertParallelAxis};
  for (int k = 0; k < 2; ++k) {
    const std::optional<std::int64_t> axis = mesh.axis_index(names[k]);
    if (axis && mesh.axis_size(*axis) > 1 && !used[k]) {
      return Error(ErrorCode::kFailedPrecondition,
                   str_cat("mesh ", to_string(mesh), " has a '", names[k], "' axis of ",
                           mesh.axis_size(*axis), " ranks, but model '", model.name(),
                           "' issues no ", names[k],
                           " collective: expected the model split for it (a preset or hub "
                           "config, which the mesh's ",
                           names[k], " size divides)"));
    }
  }
  return ok_status();
}

}  // namespace

Expected<Schedule> build_schedule(const Model& model, const FsdpConfig& config,
                                  const Workload& workload) {
  if (workload.seq_len < 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("workload seq_len is ", workload.seq_len, "; expected >= 1"));
  }
  if (workload.micro_batch_size < 1) {
    return Error(ErrorCode::kInvalidArgument, str_cat("workload micro_batch_size is ",
                                                      workload.micro_batch_size,
                                                      "; expected >= 1"));
  }
  if (workload.matmul_dtype != DType::kBf16 && workload.matmul_dtype != DType::kFp8) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("workload matmul dtype is ", to_string(workload.matmul_dtype),
                         "; expected bf16 or fp8"));
  }
  std::int64_t tokens = 0;
  if (!checked_mul(workload.seq_len, workload.micro_batch_size, &tokens)) {
    return Error(ErrorCode::kOutOfRange, "workload tokens per microbatch overflow int64");
  }
  const Placements& base_placements = config.placements();
  const std::int64_t dp = base_placements.dp_size();

  // The geometry of every parameter group (core/schedule/shard_plan.h), and the step's
  // collectives table: per group, its legs in CollectiveLeg order, each leg's steps in order.
  FSDP_TRY(ShardGeometry plan, make_shard_plan(model, config));
  auto geometry = std::make_shared<const ShardGeometry>(std::move(plan));
  std::vector<GroupPlan> groups;
  std::vector<UnitPlan> units(static_cast<std::size_t>(model.num_units()));
  std::vector<CollectiveInfo> collectives;
  for (const GroupGeometry& geo : geometry->groups) {
    GroupPlan g;
    g.geo = &geo;
    const auto gi = static_cast<std::int32_t>(groups.size());
    const Unit& unit = model.units()[static_cast<std::size_t>(geo.unit)];
    const std::string where = str_cat("unit '", unit.name(), "' group ", geo.group, " (",
                                      to_string(geo.param_dtype), ")");
    for (const LegSpec& spec : kLegSpecs) {
      const RedistributeLeg& leg = geo.leg(spec.leg);
      const std::vector<Placement> to = geo.leg_target(spec.leg);
      const DType dtype = spec.leg == CollectiveLeg::kUnshard      ? geo.gather_dtype
                          : spec.moves_weights                     ? geo.compute_dtype
                          : spec.leg == CollectiveLeg::kGradReduce ? geo.reduce_dtype
                                                                   : geo.main_grad_dtype;
      for (std::size_t s = 0; s < leg.steps.size(); ++s) {
        const RedistributeStep& step = leg.steps[s];
        CollectiveInfo info;
        info.kind = collective_kind(step.kind);
        info.axis = static_cast<std::int32_t>(
            geo.placements.dp_axes()[static_cast<std::size_t>(step.axis)]);
        info.unit = geo.unit;
        info.group = geo.group;
        info.geometry_group = gi;
        info.leg = spec.leg;
        info.leg_step = static_cast<std::int32_t>(s);
        info.dtype = dtype;
        if (!geo.layout.has_equal_shard_sizes() && geo.placements.num_dp_axes() == 1) {
          // Uneven shards exist only on a 1-D DP mesh: the members are rank 0's group along
          // it (every rank when the mesh has no other axis).
          const std::int64_t members = geo.placements.dp_size();
          info.member_elements.reserve(static_cast<std::size_t>(members));
          const Placement& target = to[static_cast<std::size_t>(step.axis)];
          std::vector<std::int64_t> coord(static_cast<std::size_t>(config.mesh().ndim()), 0);
          for (std::int64_t j = 0; j < members; ++j) {
            coord[static_cast<std::size_t>(info.axis)] = j;
            FSDP_TRY(const std::int64_t r, config.mesh().rank_of(coord));
            auto n = step_elements(geo, leg.states[s], step, target, r);
            if (n && spec.moves_weights) {
              n = weight_elements(geo, *n);
            }
            if (!n) {
              return n.error().with_context(where);
            }
            info.member_elements.push_back(*n);
          }
        }
        g.collectives[static_cast<std::size_t>(spec.leg)].push_back(
            static_cast<std::int32_t>(collectives.size()));
        collectives.push_back(std::move(info));
      }
    }
    units[static_cast<std::size_t>(geo.unit)].groups.push_back(gi);
    units[static_cast<std::size_t>(geo.unit)].param_elements += geo.numel;
    groups.push_back(std::move(g));
  }

  // The activation collectives of a tensor- or expert-parallel split: each on its mesh axis,
  // in the activations' dtype (fp32 for an fp32 model, else bf16: fp8 matmuls keep bf16
  // activations).
  FSDP_RETURN_IF_ERROR(
      plan_activation_collectives(model, config, *geometry, tokens, &units, &collectives));

  // Rank classes: ranks with the same local sizes of every group under every placement state run
  // the same program. Equal shards (padded layouts) make every rank alike.
  const std::int64_t n_ranks = config.mesh().size();
  std::vector<std::int32_t> rank_class(static_cast<std::size_t>(n_ranks), 0);
  std::vector<std::int64_t> representatives = {0};
  bool all_equal = true;
  for (const GroupGeometry& g : geometry->groups) {
    all_equal = all_equal && g.layout.has_equal_shard_sizes();
  }
  if (!all_equal) {
    representatives.clear();
    std::map<std::vector<std::int64_t>, std::int32_t> classes;
    for (std::int64_t r = 0; r < n_ranks; ++r) {
      std::vector<std::int64_t> key;
      key.reserve(groups.size() * 3);
      for (const GroupGeometry& g : geometry->groups) {
        for (BufferRole role :
             {BufferRole::kParameter, BufferRole::kGradient, BufferRole::kOptimizer}) {
          auto n = local_elements(g, g.placements.of(role), r);
          if (!n) {
            return n.error();
          }
          key.push_back(*n);
        }
      }
      auto [it, inserted] =
          classes.emplace(std::move(key), static_cast<std::int32_t>(representatives.size()));
      if (inserted) {
        representatives.push_back(r);
      }
      rank_class[static_cast<std::size_t>(r)] = it->second;
    }
  }

  // The forward order is the DFS the hooks fire in, not the vector order: Model::make only
  // requires parents before children, so a vector order need not be a pre-order.
  std::vector<std::int32_t> forward_order;
  const std::span<const std::int32_t> roots = model.children(Unit::kNoParent);
  for (std::int32_t r : roots) {
    forward_visit(model, r, &forward_order);
  }
  std::vector<std::int32_t> backward_order;
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) {
    backward_visit(model, *it, &backward_order);
  }

  std::vector<RankProgram> programs;
  for (std::int64_t rep : representatives) {
    ProgramBuilder builder(model, config, workload, groups, units, forward_order,
                           backward_order, rep);
    auto program = builder.build();
    if (!program) {
      return program.error().with_context(str_cat("while building the program of rank ", rep));
    }
    programs.push_back(std::move(*program));
  }
  for (std::int32_t c : rank_class) {
    ++programs[static_cast<std::size_t>(c)].num_ranks;
  }
  ScheduleParts parts(config.mesh());
  parts.unified_streams = config.schedule().unify_communication_stream();
  parts.num_microbatches = config.num_microbatches();
  parts.gradient_scale = config.grad_scale() / static_cast<double>(dp);
  parts.programs = std::move(programs);
  parts.rank_class = std::move(rank_class);
  parts.collectives = std::move(collectives);
  bool any_work = false;
  for (const Unit& unit : model.units()) {
    parts.unit_names.push_back(unit.name());
    any_work = any_work || !unit.work().empty() || !unit.work().collectives.empty();
  }
  parts.workload = workload;
  // What a recompute op runs again follows the checkpointing mode (sim/model/kernel_cost.h).
  switch (config.recompute().mode()) {
    case RecomputeMode::kSelectiveOp:
      parts.workload.recompute = RecomputeKernels::kUnsavedOps;
      break;
    case RecomputeMode::kCoreAttention:
      parts.workload.recompute = RecomputeKernels::kAttentionCore;
      break;
    default:
      parts.workload.recompute = RecomputeKernels::kForwardShare;
      break;
  }
  parts.runtime_memory = config.framework().runtime_memory();
  if (any_work) {
    for (const Unit& unit : model.units()) {
      parts.unit_work.push_back(unit.work());
    }
  }
  parts.geometry = std::move(geometry);
  return Schedule::make(std::move(parts));
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// The per-group plan of fully_shard (§3.3, §4.5, §4.6): grouping, specialisation, layout and the
// redistribute legs (docs/design/schedule-ir.md, "Geometry").
#include "core/schedule/shard_plan.h"

#include <optional>
#include <utility>

#include "core/base/strings.h"
#include "core/layout/layout_builder.h"
#include "core/layout/owner_planner.h"
#include "core/mesh/placements.h"
#include "core/model/param_groups.h"

namespace fsdp {
namespace {

bool is_communicating(RedistributeKind k) {
  return k == RedistributeKind::kAllGather || k == RedistributeKind::kReduceScatter ||
         k == RedistributeKind::kAllReduce;
}

// The placement states a redistribute passes through: states[i] is the list before steps[i].
std::vector<std::vector<Placement>> step_states(const std::vector<Placement>& from,
                                                const std::vector<Placement>& to,
                                                const std::vector<RedistributeStep>& steps) {
  std::vector<std::vector<Placement>> states;
  std::vector<Placement> cur = from;
  for (const RedistributeStep& s : steps) {
    states.push_back(cur);
    cur[static_cast<std::size_t>(s.axis)] = to[static_cast<std::size_t>(s.axis)];
  }
  return states;
}

// Builds a group's layout for the DP mesh: tensor-atomic groups get planned owners (§3.4).
Expected<GlobalLayout> group_layout(const Unit& unit, const ParamGrouping& grouping,
                                    const FsdpConfig& config, const Placements& placements,
                                    std::int64_t block) {
  std::vector<Shape> shapes;
  for (std::int64_t pi : grouping.param_indices) {
    shapes.push_back(unit.params()[static_cast<std::size_t>(pi)].shape());
  }
  const std::int64_t dp = placements.dp_size();
  if (placements.is_tensor_atomic()) {
    FSDP_TRY(std::vector<std::int64_t> owners, plan_tensor_owners(shapes, dp));
    return build_for_tensor_atomic(std::move(shapes), dp, owners);
  }
  return build_row_atomic_layout(std::move(shapes), dp, block, config.shard_layout());
}

Status plan_leg(const std::vector<Placement>& from, const std::vector<Placement>& to,
                RedistributeLeg* leg) {
  FSDP_TRY(std::vector<RedistributeStep> steps, plan_redistribute(from, to));
  for (const RedistributeStep& s : steps) {
    if (is_communicating(s.kind)) {
      leg->steps.push_back(s);
    }
  }
  leg->states = step_states(from, to, leg->steps);
  return ok_status();
}

// Whether fp8 training may run one of the unit's GEMMs in fp8: true when its kernels are not
// known (hand-written model files), else when one of its GEMMs is not the output head.
bool runs_fp8_gemm(const UnitWork& work) {
  if (work.empty()) {
    return true;
  }
  for (const GemmShape& g : work.gemms) {
    if (!g.output_head) {
      return true;
    }
  }
  return false;
}

// `placements`: the config's, or for routed experts of an expert-parallel mesh the
// expert-data-parallel ones (core/schedule/shard_plan.h).
Expected<GroupGeometry> plan_group(const Unit& unit, std::int32_t u, std::int32_t k,
                                   const ParamGrouping& grouping, const FsdpConfig& config,
                                   const Placements& placements, const std::string& where) {
  auto specialised = placements.specialize(grouping.dtype);
  if (!specialised) {
    return specialised.error().with_context(where);
  }
  if (grouping.dtype == DType::kFp8) {
    // §4.12: MXFP8 quantises 32-element blocks along both dims.
    for (std::int64_t pi : grouping.param_indices) {
      const Param& param = unit.params()[static_cast<std::size_t>(pi)];
      const std::span<const std::int64_t> dims = param.shape().dims();
      if (dims.size() != 2 || dims[0] % kMxfp8BlockSize != 0 ||
          dims[1] % kMxfp8BlockSize != 0) {
        return Error(ErrorCode::kInvalidArgument,
                     str_cat(where, ": MXFP8 parameter '", param.name(), "' has shape ",
                             to_string(param.shape()), "; expected 2 dims, both multiples of 32"));
      }
    }
  }
  const std::int64_t block = grouping.dtype == DType::kFp8 ? kMxfp8BlockSize : config.block_size();
  auto layout = group_layout(unit, grouping, config, placements, block);
  if (!layout) {
    return layout.error().with_context(where);
  }
  GroupGeometry g(std::move(*layout), std::move(*specialised));
  g.unit = u;
  g.group = k;
  g.param_indices = grouping.param_indices;
  const MixedPrecisionPolicy& mp = config.mixed_precision();
  g.param_dtype = grouping.dtype;
  g.compute_dtype = mp.compute_dtype_for(grouping.dtype);
  g.grad_dtype = mp.grad_dtype_for(grouping.dtype);
  g.reduce_dtype = mp.reduce_dtype_for(grouping.dtype);
  g.gather_dtype = mp.gather_dtype_for(grouping.dtype);
  if (mp.fp8_all_gather() && grouping.dtype != DType::kFp8 && !runs_fp8_gemm(unit.work())) {
    // float8 all-gather casts the weights of float8 linears only: a unit whose kernels are
    // known and hold no float8 GEMM (the embedding; the output head, which float8 training
    // keeps in the compute dtype) gathers in the compute dtype.
    g.gather_dtype = g.compute_dtype;
  }
  // PyTorch FSDP keeps the sharded gradient in the sharded (main) parameter's dtype.
  g.main_grad_dtype = !mp.main_grads_dtype() && config.framework().main_grads_in_main_dtype()
                          ? mp.main_params_dtype()
                          : mp.main_grads_dtype_for(grouping.dtype);
  g.main_dtype = mp.main_params_dtype();
  g.trainable = grouping.requires_grad;
  g.expert = grouping.expert;
  g.aliases_main = mp.model_weight_aliases_main(grouping.dtype);
  g.mxfp8 = g.compute_dtype == DType::kFp8;
  g.param_replicated = g.placements.is_replicated(BufferRole::kParameter);
  g.needs_weight_sync = g.placements.parameter() != g.placements.optimizer();
  for (std::int64_t pi : grouping.param_indices) {
    g.numel += unit.params()[static_cast<std::size_t>(pi)].shape().numel();
  }
  const auto& G = g.placements.gradient();
  const auto& O = g.placements.optimizer();
  bool same_axes = true;
  for (std::size_t a = 0; a < G.size(); ++a) {
    same_axes = same_axes && (G[a].is_shard() == O[a].is_shard());
  }
  g.main_grad_resident = same_axes;
  const bool active[kNumCollectiveLegs] = {!g.param_replicated, g.needs_weight_sync,
                                            g.trainable, g.trainable};
  for (const LegSpec& spec : kLegSpecs) {
    if (!active[static_cast<std::size_t>(spec.leg)]) {
      continue;
    }
    if (Status s = plan_leg(g.leg_source(spec.leg), g.leg_target(spec.leg), &g.leg(spec.leg));
        !s.ok()) {
      return s.error().with_context(str_cat(where, ": ", spec.name));
    }
  }
  return g;
}

}  // namespace

Expected<ShardGeometry> make_shard_plan(const Model& model, const FsdpConfig& config) {
  // Routed experts of an expert-parallel mesh shard over the DP axes without "ep"
  // (docs/design/parallelism.md); without an ep axis they are dense parameters.
  std::optional<Placements> expert_placements;
  if (const auto ep = config.mesh().axis_index(kExpertParallelAxis)) {
    FSDP_TRY(Placements p, config.placements().without_dp_axis(*ep));
    expert_placements = std::move(p);
  }
  ShardGeometry plan;
  plan.unit_groups.resize(static_cast<std::size_t>(model.num_units()));
  for (std::int32_t u = 0; u < static_cast<std::int32_t>(model.num_units()); ++u) {
    const Unit& unit = model.units()[static_cast<std::size_t>(u)];
    const std::vector<ParamGrouping> groupings = group_params(unit.params());
    for (std::size_t k = 0; k < groupings.size(); ++k) {
      const std::string where = str_cat("unit '", unit.name(), "' group ", k, " (",
                                        to_string(groupings[k].dtype), ")");
      const Placements& placements =
          groupings[k].expert && expert_placements ? *expert_placements : config.placements();
      FSDP_TRY(GroupGeometry g, plan_group(unit, u, static_cast<std::int32_t>(k), groupings[k],
                                           config, placements, where));
      plan.unit_groups[static_cast<std::size_t>(u)].push_back(
          static_cast<std::int32_t>(plan.groups.size()));
      plan.groups.push_back(std::move(g));
    }
  }
  return plan;
}

}  // namespace fsdp

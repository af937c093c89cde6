// SPDX-License-Identifier: Apache-2.0
// ShardPlan: how fully_shard lays out every parameter group of a model for one FsdpConfig: the
// group's GlobalLayout, its specialised placements, its dtypes and the redistribute legs the step
// performs (unshard, model-weight sync, gradient reduction, finalisation). The one source of
// truth shared by the schedule builder (which turns it into ops) and the backends (which find
// parameters at their layout offsets and the ranges every collective moves).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/base/expected.h"
#include "core/layout/global_layout.h"
#include "core/mesh/placements.h"
#include "core/mesh/redistribute.h"
#include "core/model/dtype.h"
#include "core/model/model.h"
#include "core/policy/fsdp_config.h"

namespace fsdp {

// One redistribute leg of a group: its communicating steps in execution order and the placement
// list before each step (the list after the last step is the leg's target). Empty when the leg
// moves nothing or is inactive.
struct RedistributeLeg {
  std::vector<RedistributeStep> steps;
  std::vector<std::vector<Placement>> states;
  friend bool operator==(const RedistributeLeg&, const RedistributeLeg&) = default;
};

// Everything about one parameter group that does not depend on the rank. Tensor i of `layout` is
// the unit's parameter param_indices[i].
struct GroupShardPlan {
  GroupShardPlan(GlobalLayout l, Placements p) : layout(std::move(l)), placements(std::move(p)) {}
  std::int32_t unit = 0;
  std::int32_t group = 0;
  std::vector<std::int64_t> param_indices;
  GlobalLayout layout;
  Placements placements;             // specialised for the group's dtype (§3.3)
  DType param_dtype = DType::kBf16;
  DType compute_dtype = DType::kBf16;
  DType grad_dtype = DType::kBf16;
  DType main_grad_dtype = DType::kBf16;
  DType main_dtype = DType::kFp32;
  bool trainable = true;
  bool aliases_main = false;         // the model weight is the main weight (same dtype)
  bool mxfp8 = false;                // fp8 compute: weight buffers hold two planes and scales
  bool param_replicated = false;     // ZeRO-1/2/no-shard: compute reads the model weight
  bool needs_weight_sync = false;    // parameter != optimizer placements (ZeRO-1/2, HFSDP)
  bool main_grad_resident = true;    // gradient and optimizer shard the same axes
  std::int64_t numel = 0;            // sum of the group's parameter numels
  RedistributeLeg unshard;           // parameter -> Replicate on every axis (§4.5.2)
  RedistributeLeg sync;              // optimizer -> parameter (§4.5.1)
  RedistributeLeg reduce;            // Partial(avg) on every axis -> gradient (§4.6c)
  RedistributeLeg finalize;          // gradient -> optimizer (§4.6f)
  friend bool operator==(const GroupShardPlan&, const GroupShardPlan&) = default;
};

struct ShardPlan {
  std::vector<GroupShardPlan> groups;            // units in model order, groups in group order
  std::vector<std::vector<std::int32_t>> unit_groups;  // unit -> indices into `groups`
  friend bool operator==(const ShardPlan&, const ShardPlan&) = default;
};

// Groups every unit's parameters (group_params), specialises the placements per group, builds
// each layout for the DP mesh (TensorAtomic: planned owners) and plans the four legs. Errors name
// the unit and group ("unit 'x' group 0 (bf16): ..."): layout rejections, MXFP8 shapes that are
// not 2-D multiples of 32, unsupported redistributes.
Expected<ShardPlan> make_shard_plan(const Model& model, const FsdpConfig& config);

// The §1.5 local range of `rank` of the whole mesh in `group`'s layout under `placements` (one
// per DP axis; Partial and Replicate axes keep the full extent). Errors: a rank outside the mesh.
Expected<Range> group_local_range(const GroupShardPlan& group,
                                  std::span<const Placement> placements, std::int64_t rank);

// The placement list after a leg's step `s` (the state before step s + 1).
std::vector<Placement> state_after_step(const RedistributeLeg& leg, std::size_t s,
                                        std::span<const Placement> target);

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// GroupGeometry: how fully_shard lays out one parameter group for one FsdpConfig: its
// GlobalLayout, its specialised placements, its dtypes and the redistribute legs the step
// performs. ShardGeometry is the set of every group of a model. The schedule builder plans it
// (core/schedule/shard_plan.h) and the Schedule carries it, so every consumer finds parameters at
// the same layout offsets and moves the same ranges in every collective, without re-deriving
// them (docs/design/schedule-ir.md, "Geometry").
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "core/base/expected.h"
#include "core/layout/global_layout.h"
#include "core/mesh/device_mesh.h"
#include "core/mesh/placements.h"
#include "core/mesh/redistribute.h"
#include "core/model/dtype.h"
#include "core/schedule/collective_leg.h"
#include "core/schedule/op.h"
#include "core/schedule/operand.h"

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
struct GroupGeometry {
  GroupGeometry(GlobalLayout l, Placements p) : layout(std::move(l)), placements(std::move(p)) {}
  std::int32_t unit = 0;
  std::int32_t group = 0;
  std::vector<std::int64_t> param_indices;
  GlobalLayout layout;
  Placements placements;             // specialised for the group's dtype (§3.3)
  DType param_dtype = DType::kBf16;
  DType compute_dtype = DType::kBf16;
  DType grad_dtype = DType::kBf16;
  DType reduce_dtype = DType::kBf16;  // partial-grad buffer and reduce leg (default: grad dtype)
  DType gather_dtype = DType::kBf16;  // unsharded buffer and unshard leg (default: compute)
  DType main_grad_dtype = DType::kBf16;
  DType main_dtype = DType::kFp32;
  bool trainable = true;
  // Routed experts of an expert-parallel mesh: `placements` are the expert-data-parallel ones
  // (the config's without the "ep" axis), and their module's fully_shard takes grad_scale / ep
  // (the seed's rule), so every group's gradient multiplier is the schedule's gradient_scale.
  bool expert = false;
  bool aliases_main = false;         // the model weight is the main weight (same dtype)
  bool mxfp8 = false;                // fp8 compute: weight buffers hold two planes and scales
  bool param_replicated = false;     // ZeRO-1/2/no-shard: compute reads the model weight
  bool needs_weight_sync = false;    // parameter != optimizer placements (ZeRO-1/2, HFSDP)
  bool main_grad_resident = true;    // gradient and optimizer shard the same axes
  std::int64_t numel = 0;            // sum of the group's parameter numels
  // Per CollectiveLeg: unshard (§4.5.2), model-weight sync (§4.5.1), reduce (§4.6c), finalise
  // (§4.6f).
  std::array<RedistributeLeg, kNumCollectiveLegs> legs;

  const RedistributeLeg& leg(CollectiveLeg l) const { return legs[static_cast<std::size_t>(l)]; }
  RedistributeLeg& leg(CollectiveLeg l) { return legs[static_cast<std::size_t>(l)]; }
  // The placements a leg starts from and ends at.
  std::vector<Placement> leg_source(CollectiveLeg l) const;
  std::vector<Placement> leg_target(CollectiveLeg l) const;
  friend bool operator==(const GroupGeometry&, const GroupGeometry&) = default;
};

struct ShardGeometry {
  std::vector<GroupGeometry> groups;                   // units in model order, groups in order
  std::vector<std::vector<std::int32_t>> unit_groups;  // unit -> indices into `groups`
  friend bool operator==(const ShardGeometry&, const ShardGeometry&) = default;
};

// The collective a redistribute step performs; kRecord for a view or a relabel (no
// communication).
OpKind collective_kind(RedistributeKind kind);

// The §1.5 local range of `rank` of the whole mesh in `group`'s layout under `placements` (one
// per DP axis; Partial and Replicate axes keep the full extent). Errors: a rank outside the mesh.
Expected<Range> group_local_range(const GroupGeometry& group,
                                  std::span<const Placement> placements, std::int64_t rank);

// The layout range a buffer of `extent` holds on `rank`: [0, layout size) for kFull. Errors: a
// rank outside the mesh, kNone (no layout range).
Expected<Range> extent_range(const GroupGeometry& group, Extent extent, std::int64_t rank);

// The placement list after a leg's step `s` (the state before step s + 1).
std::vector<Placement> state_after_step(const RedistributeLeg& leg, std::size_t s,
                                        std::span<const Placement> target);

// What one rank moves in one collective step of a group leg: its input and output ranges in the
// group's layout, and the members' counts in axis order (all-gather: each member's input;
// reduce-scatter: each member's output; all-reduce: {the reduced range's numel}).
struct CollectiveGeometry {
  OpKind kind = OpKind::kAllGather;
  std::int32_t mesh_axis = 0;
  std::int64_t axis_rank = 0;  // this rank's index among the axis members
  Range in;
  Range out;
  std::vector<std::int64_t> counts;
  friend bool operator==(const CollectiveGeometry&, const CollectiveGeometry&) = default;
};

// The geometry of step `step` of `leg` of `group` for `rank` of `mesh`. The members' ranges must
// tile the gathered (AG) or reduced (RS) range in axis order. Errors: a step outside the leg, a
// rank outside the mesh, ranges that do not tile (kFailedPrecondition, naming unit and group).
Expected<CollectiveGeometry> collective_geometry(const GroupGeometry& group, CollectiveLeg leg,
                                                 std::size_t step, const DeviceMesh& mesh,
                                                 std::int64_t rank);

// The all-gathers that turn the group's optimizer shard of `rank` into the full layout (outside
// any step: gathering the trained parameters), in order.
Expected<std::vector<CollectiveGeometry>> parameter_gather_geometry(const GroupGeometry& group,
                                                                    const DeviceMesh& mesh,
                                                                    std::int64_t rank);

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// make_shard_plan: how fully_shard lays out every parameter group of a model for one FsdpConfig
// (the GroupGeometry of core/schedule/group_geometry.h): grouping, dtype specialisation, layout
// and the four redistribute legs. Used by the schedule builder only; consumers read the result
// from Schedule::geometry().
#pragma once

#include "core/base/expected.h"
#include "core/model/model.h"
#include "core/policy/fsdp_config.h"
#include "core/schedule/group_geometry.h"

namespace fsdp {

// Groups every unit's parameters (group_params), specialises the placements per group (routed
// experts of a mesh with an "ep" axis: the config's placements without it,
// Placements::without_dp_axis), builds each layout for the group's DP mesh (TensorAtomic:
// planned owners) and plans the four legs. Errors name
// the unit and group ("unit 'x' group 0 (bf16): ..."): layout rejections, MXFP8 shapes that are
// not 2-D multiples of 32, unsupported redistributes.
Expected<ShardGeometry> make_shard_plan(const Model& model, const FsdpConfig& config);

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// fully_shard: the reference's fully_shard(module, mesh, placements, mixed_precision_policy,
// grad_scale, schedule_policy, shard_layout) (fsdp-behaviour.md §4.1.2) on a module of an FsdpContext's
// module tree, by name. The module owns its own parameters and those of its not yet wrapped
// descendants, so children must be wrapped before their ancestors (as in the reference).
// One FsdpConfig describes a whole context, so every call must pass the same arguments.
#pragma once

#include <string_view>

#include "core/api/fsdp_context.h"
#include "core/base/expected.h"
#include "core/layout/shard_layout.h"
#include "core/mesh/device_mesh.h"
#include "core/mesh/placements.h"
#include "core/policy/mixed_precision_policy.h"
#include "core/policy/schedule_policy.h"

namespace fsdp {

// Wraps `module` of the current context (current_fully_shard_context()). Errors, each one line
// starting "fully_shard('<module>'): ":
//  * no active fully_shard_context (kFailedPrecondition, the reference's "must run inside
//    fully_shard_context");
//  * no module of that name in the context's module tree (kInvalidArgument);
//  * the module is already wrapped (kInvalidArgument);
//  * a parameter of the module's subtree is already owned by a wrapped ancestor, i.e. the
//    ancestor was wrapped first (kInvalidArgument, the reference's "already owned");
//  * `placements` were validated against another mesh than `mesh` (kInvalidArgument);
//  * the FsdpConfig checks (grad_scale finite and > 0; unpadded on a multi-axis mesh);
//  * an argument differs from the first call's (kFailedPrecondition "not implemented": one
//    mesh, placements, policy, grad_scale and shard layout per context).
// On error the module is left unwrapped.
Status fully_shard(std::string_view module, const DeviceMesh& mesh, const Placements& placements,
                   const MixedPrecisionPolicy& mixed_precision_policy = {},
                   double grad_scale = 1.0, const SchedulePolicy& schedule_policy = {},
                   ShardLayout shard_layout = ShardLayout::kPadded);

// The same on an explicitly named context, which must be the current one (the reference has
// only the form above; this one reads better where several contexts exist).
Status fully_shard(FsdpContext& context, std::string_view module, const DeviceMesh& mesh,
                   const Placements& placements,
                   const MixedPrecisionPolicy& mixed_precision_policy = {},
                   double grad_scale = 1.0, const SchedulePolicy& schedule_policy = {},
                   ShardLayout shard_layout = ShardLayout::kPadded);

}  // namespace fsdp

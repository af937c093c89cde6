// SPDX-License-Identifier: Apache-2.0
// The mesh-axis names a run's --mesh may use (docs/design/parallelism.md, "Mesh axis names"):
// the data-parallel names, "tp" and "ep". DeviceMesh itself takes any identifier (its tests and
// the placements API name axes freely); the commands that read a user's mesh check it here, so
// that an axis fsdpsim does not model (pipeline, context parallelism) is an error and never a
// silent data-parallel axis.
#pragma once

#include <array>
#include <string_view>

#include "core/base/expected.h"
#include "core/mesh/device_mesh.h"

namespace fsdp {

// Names of data-parallel axes: fsdpsim's own (dp, dp_outer, dp_inner), torchtitan's
// (dp_shard, dp_replicate), Megatron-LM's expert data parallel (edp) and the short outer/inner of
// the train command's examples. Every axis but tp and ep is a DP axis of the run.
inline constexpr std::array<std::string_view, 8> kDataParallelAxisNames = {
    "dp", "dp_outer", "dp_inner", "dp_shard", "dp_replicate", "edp", "outer", "inner"};

// Whether `name` is one of kDataParallelAxisNames.
bool is_data_parallel_axis_name(std::string_view name);

// OK when every axis of `mesh` is a data-parallel name, "tp" or "ep". Error (kInvalidArgument,
// one line) for the first other axis, naming what it is when known: "axis 'pp' is not modelled
// (pipeline parallelism); expected dp, dp_outer, dp_inner, dp_shard, dp_replicate, edp, outer,
// inner, tp or ep".
Status check_modelled_axes(const DeviceMesh& mesh);

// parse_device_mesh, then check_modelled_axes: the reading of a command's --mesh.
Expected<DeviceMesh> parse_run_mesh(std::string_view text);

}  // namespace fsdp

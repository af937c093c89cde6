// SPDX-License-Identifier: Apache-2.0
// Strategy: the named sharding recipes of fsdp-behaviour.md §3.3 (no-shard, ZeRO-1/2/3, HSDP, HFSDP) and the
// Placements each one stands for on a given DP mesh. Recipes use the public Shard(0) (or
// TensorAtomic() for the TensorAtomic ZeRO variants) and Partial(avg) gradients.
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>

#include "core/base/expected.h"
#include "core/mesh/device_mesh.h"
#include "core/mesh/placements.h"

namespace fsdp {

enum class Strategy : std::uint8_t { kNoShard, kZero1, kZero2, kZero3, kHsdp, kHfsdp };

// "noshard", "zero1", "zero2", "zero3", "hsdp", "hfsdp".
std::string_view to_string(Strategy strategy);
std::ostream& operator<<(std::ostream& os, Strategy strategy);
// The names above, case-insensitive; "no-shard"/"no_shard"/"ddp" also mean kNoShard. The error
// lists the accepted names.
Expected<Strategy> parse_strategy(std::string_view text);

// Mesh axes a strategy needs: 1 for no-shard and ZeRO-1/2/3, 2 (outer, inner) for HSDP/HFSDP.
std::int64_t strategy_mesh_ndim(Strategy strategy);

// The §3.3 table on the mesh's DP axes: every axis but "tp" (not a DP axis) and "ep" (a DP axis
// of the dense parameters placed as the recipe's innermost axis), e.g. zero3 on dp=8,ep=8 is
// [S, S] on both axes, on dp=32,tp=8 [S] on dp:
//   no-shard [R] [P(avg)] [R]          ZeRO-1 [R] [P(avg)] [S]
//   ZeRO-2   [R] [S] [S]               ZeRO-3 [S] [S] [S]
//   HSDP  [R,S] [P(avg),S] [R,S]       HFSDP  [R,S] [P(avg),S] [S,S]
// tensor_atomic puts TensorAtomic() in place of Shard(0). Errors: a mesh with the wrong number
// of axes (kInvalidArgument: "zero3 needs a 1-axis dp mesh, got the 2-axis mesh
// dp_outer=2,dp_inner=4");
// tensor_atomic with a strategy other than ZeRO-1/2/3 (kInvalidArgument).
Expected<Placements> make_strategy_placements(Strategy strategy, const DeviceMesh& mesh,
                                              bool tensor_atomic = false);

}  // namespace fsdp

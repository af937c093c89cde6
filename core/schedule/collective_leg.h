// SPDX-License-Identifier: Apache-2.0
// CollectiveLeg: the four redistributions one parameter group performs in a step, in the order
// the collectives table lists them per group. The one table of legs: the builder plans them, the
// verifier and the backends read what a collective of each leg moves from here
// (docs/design/fsdp-behaviour.md §4.5, §4.6).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace fsdp {

enum class CollectiveLeg : std::uint8_t {
  kUnshard,          // parameter placements -> Replicate on every axis (all-gathers)
  kModelWeightSync,  // optimizer placements -> parameter placements (all-gathers)
  kGradReduce,       // Partial(avg) on every axis -> gradient placements
  kGradFinalize,     // gradient placements -> optimizer placements (last microbatch only)
};
inline constexpr int kNumCollectiveLegs = 4;

// Where a leg starts and ends, and what it moves.
struct LegSpec {
  CollectiveLeg leg;
  std::string_view name;  // "unshard", "model_weight_sync", "grad_reduce", "grad_finalize"
  bool moves_weights;     // weights (compute dtype, MXFP8 planes) or gradients
};

inline constexpr std::array<LegSpec, kNumCollectiveLegs> kLegSpecs = {{
    {CollectiveLeg::kUnshard, "unshard", true},
    {CollectiveLeg::kModelWeightSync, "model_weight_sync", true},
    {CollectiveLeg::kGradReduce, "grad_reduce", false},
    {CollectiveLeg::kGradFinalize, "grad_finalize", false},
}};

inline constexpr const LegSpec& leg_spec(CollectiveLeg leg) {
  return kLegSpecs[static_cast<std::size_t>(leg)];
}
inline constexpr std::string_view to_string(CollectiveLeg leg) { return leg_spec(leg).name; }

}  // namespace fsdp

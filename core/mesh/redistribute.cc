// SPDX-License-Identifier: Apache-2.0
#include "core/mesh/redistribute.h"

#include "core/base/strings.h"

namespace fsdp {

std::string_view to_string(RedistributeKind kind) {
  switch (kind) {
    case RedistributeKind::kView:
      return "view";
    case RedistributeKind::kAllGather:
      return "all-gather";
    case RedistributeKind::kAllReduce:
      return "all-reduce";
    case RedistributeKind::kReduceScatter:
      return "reduce-scatter";
    case RedistributeKind::kRelabel:
      return "relabel";
  }
  return "unknown";
}

Expected<std::vector<RedistributeStep>> plan_redistribute(std::span<const Placement> from,
                                                          std::span<const Placement> to) {
  if (from.size() != to.size()) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("cannot redistribute ", to_string(from), " to ", to_string(to),
                         ": expected ", from.size(), " target placements, got ", to.size()));
  }
  std::vector<std::int64_t> changed;
  bool all_replicate_to_shard = true;
  bool all_shard_to_replicate = true;
  bool all_partial_to_shard = true;
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i] == to[i]) {
      continue;
    }
    changed.push_back(static_cast<std::int64_t>(i));
    all_replicate_to_shard = all_replicate_to_shard && from[i].is_replicate() && to[i].is_shard();
    all_shard_to_replicate = all_shard_to_replicate && from[i].is_shard() && to[i].is_replicate();
    all_partial_to_shard = all_partial_to_shard && from[i].is_partial() && to[i].is_shard();
  }
  std::vector<RedistributeStep> steps;
  if (changed.empty()) {
    return steps;
  }
  // Gathers run outer -> inner: each outer gather turns a rank's segment into a contiguous run
  // that the next inner gather concatenates in order (§3.2 multi-axis vector).
  if (all_replicate_to_shard || all_shard_to_replicate) {
    const RedistributeKind kind =
        all_replicate_to_shard ? RedistributeKind::kView : RedistributeKind::kAllGather;
    for (const std::int64_t axis : changed) {
      steps.push_back(RedistributeStep{axis, kind});
    }
    return steps;
  }
  // Project extension (docs/design/parallelism.md): Partial -> Shard on several axes, the
  // adjoint of the gathers, reduce-scatters inner -> outer. It shards the dense parameters of
  // an expert-parallel mesh over DP x EP; the reference raises NotImplementedError.
  if (all_partial_to_shard && changed.size() > 1) {
    for (auto it = changed.rbegin(); it != changed.rend(); ++it) {
      steps.push_back(RedistributeStep{*it, RedistributeKind::kReduceScatter});
    }
    return steps;
  }
  const auto not_implemented = [&](std::string_view why) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("redistribute from ", to_string(from), " to ", to_string(to),
                         " is not implemented: ", why));
  };
  if (changed.size() != 1) {
    return not_implemented(
        str_cat("expected one changed axis unless every change is "
                "Replicate->Shard, every change is Shard->Replicate or every "
                "change is Partial->Shard, got ",
                changed.size()));
  }
  const std::int64_t axis = changed.front();
  const Placement& a = from[static_cast<std::size_t>(axis)];
  const Placement& b = to[static_cast<std::size_t>(axis)];
  if (a.is_partial() && b.is_replicate()) {
    steps.push_back(RedistributeStep{axis, RedistributeKind::kAllReduce});
  } else if (a.is_partial() && b.is_shard()) {
    steps.push_back(RedistributeStep{axis, RedistributeKind::kReduceScatter});
  } else if (a.is_replicate() && b.is_partial() && b.reduce_op() == ReduceOp::kAvg) {
    steps.push_back(RedistributeStep{axis, RedistributeKind::kRelabel});
  } else {
    return not_implemented(str_cat("axis ", axis, " changes ", to_string(a), " -> ",
                                   to_string(b)));
  }
  return steps;
}

}  // namespace fsdp

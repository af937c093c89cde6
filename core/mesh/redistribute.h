// SPDX-License-Identifier: Apache-2.0
// The placement changes DBuffer.redistribute supports (fsdp-behaviour.md §3.2) and the
// communication each one costs: a change is legal only if every changed axis goes Replicate->Shard
// (a local view), every changed axis goes Shard->Replicate (all-gathers, outer axis first), every
// changed axis goes Partial->Shard (reduce-scatters, inner axis first: a project extension, see
// docs/design/parallelism.md), or exactly one axis changes Partial->Replicate, Partial->Shard or
// Replicate->Partial(avg).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/base/expected.h"
#include "core/mesh/placement.h"

namespace fsdp {

enum class RedistributeKind : std::uint8_t {
  kView,           // Replicate -> Shard: take the local slice, no communication
  kAllGather,      // Shard -> Replicate
  kAllReduce,      // Partial -> Replicate
  kReduceScatter,  // Partial -> Shard
  kRelabel,        // Replicate -> Partial(avg): same data, no communication
};

std::string_view to_string(RedistributeKind kind);  // "view", "all-gather", ...

// One step on one DP axis (an index into the placement lists).
struct RedistributeStep {
  std::int64_t axis = 0;
  RedistributeKind kind = RedistributeKind::kView;
  friend bool operator==(const RedistributeStep&, const RedistributeStep&) = default;
};

// The steps of redistribute(from -> to) in execution order; empty when nothing changes. A change
// between two different Shard kinds counts as a change. Errors: lengths differ
// (kInvalidArgument); any other change (several axes of mixed kinds, Replicate->Partial(sum),
// Shard->Partial, Partial(avg)<->Partial(sum), Shard kind changes) is kFailedPrecondition, the
// reference's NotImplementedError, and names both placement lists.
Expected<std::vector<RedistributeStep>> plan_redistribute(std::span<const Placement> from,
                                                          std::span<const Placement> to);

}  // namespace fsdp

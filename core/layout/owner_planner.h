// SPDX-License-Identifier: Apache-2.0
// Owner planning for TensorAtomic layouts: balances bytes over ranks (longest-processing-time
// greedy: largest tensor first, ties in id order, onto the least-loaded rank, ties to the lowest
// rank), so nobody has to hand-write owners. O(n log n + n log dp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/base/expected.h"
#include "core/layout/shape.h"

namespace fsdp {

// One owner rank in [0, dp_size) per tensor. Errors: dp_size <= 0.
Expected<std::vector<std::int64_t>> plan_tensor_owners(std::span<const Shape> shapes,
                                                       std::int64_t dp_size);

}  // namespace fsdp

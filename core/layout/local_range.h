// SPDX-License-Identifier: Apache-2.0
// Local range of one rank on a multi-axis DP mesh (fsdp-behaviour.md §1.5): the innermost sharded axis is the
// most significant digit of the segment index, so with [Replicate, Shard] (HSDP) each inner rank
// holds a contiguous run of segments and an outer-sharded range (HFSDP) nests inside it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/base/expected.h"
#include "core/layout/global_layout.h"

namespace fsdp {

// How one mesh axis treats a buffer. Shard covers RowAtomic/BlockAtomic/TensorAtomic.
enum class AxisPlacement { kShard, kReplicate, kPartial };

// The DP mesh as seen by one rank: axis sizes (axis 0 outermost) and this rank's coordinate on each.
struct MeshCoordinate {
  std::vector<std::int64_t> axis_sizes;
  std::vector<std::int64_t> local_ranks;
};

// §1.5. Errors: axis count mismatch between sizes, ranks and placements; a size <= 0; a local rank
// outside [0, size); Shard placements that are not a suffix of the axes; dp_size not divisible by
// the number of shards ("layout was built for N shards, which cannot be split evenly over M ...").
Expected<Range> get_local_range(const GlobalLayout& layout, const MeshCoordinate& coord,
                                std::span<const AxisPlacement> placements);

// DBuffer.view() rule: the range of `to` placements must lie inside the range of `from` on this
// rank (e.g. HFSDP optimizer [S,S] inside parameter [R,S]); otherwise an error that names both
// ranges ("requires a range contained in its local buffer").
Status check_view_contained(const GlobalLayout& layout, const MeshCoordinate& coord,
                            std::span<const AxisPlacement> from,
                            std::span<const AxisPlacement> to);

}  // namespace fsdp

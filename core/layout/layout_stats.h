// SPDX-License-Identifier: Apache-2.0
// Layout statistics: data, gap and padding elements in total and per rank segment, imbalance
// (max/mean segment size), and bytes per rank for a dtype width. O(n log n + dp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/expected.h"
#include "core/layout/global_layout.h"

namespace fsdp {

struct RankStats {
  std::int64_t offset = 0;         // segment start
  std::int64_t elements = 0;       // segment size (allocated elements on this rank)
  std::int64_t data_elements = 0;  // elements that belong to some tensor
  std::int64_t gap_elements = 0;   // unused elements before the end of the last tensor
  std::int64_t pad_elements = 0;   // unused elements after the end of the last tensor
  std::int64_t num_tensors = 0;    // tensors with at least one element in this segment
  friend bool operator==(const RankStats&, const RankStats&) = default;
};

struct LayoutStats {
  std::int64_t size = 0;
  std::int64_t data_elements = 0;  // sum of numels
  std::int64_t gap_elements = 0;   // holes between tensors (below the last tensor end)
  std::int64_t pad_elements = 0;   // size - end of the last tensor
  std::int64_t min_rank_elements = 0;
  std::int64_t max_rank_elements = 0;
  double mean_rank_elements = 0;
  double imbalance = 1.0;  // max / mean segment size (1.0 when all segments are empty)
  std::vector<RankStats> ranks;
};

LayoutStats compute_layout_stats(const GlobalLayout& layout);

// Bytes of the largest rank segment for a dtype of bytes_per_element (checked multiply).
Expected<std::int64_t> max_rank_bytes(const GlobalLayout& layout, std::int64_t bytes_per_element);

}  // namespace fsdp

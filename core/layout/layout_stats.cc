// SPDX-License-Identifier: Apache-2.0
// Gap and pad are split at the end of the last non-empty tensor of the whole layout, so the
// per-rank gap and pad elements add up to the layout totals. Zero-numel tensors hold no data and
// count nowhere.
#include "core/layout/layout_stats.h"

#include "core/base/checked_math.h"
#include "core/base/strings.h"

#include <algorithm>

namespace fsdp {

LayoutStats compute_layout_stats(const GlobalLayout& layout) {
  LayoutStats stats;
  stats.size = layout.size();
  const auto& shapes = layout.tensor_shapes();
  const auto& offsets = layout.tensor_to_offset();
  const auto& ro = layout.rank_to_offset();

  // Non-empty ranges sorted by start (disjoint by the GlobalLayout invariants); their numels sum
  // to at most size, so no sum below can overflow.
  std::vector<std::size_t> order;
  order.reserve(shapes.size());
  std::int64_t last_end = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (shapes[i].numel() > 0) {
      order.push_back(i);
      stats.data_elements += shapes[i].numel();
      last_end = std::max(last_end, offsets[i] + shapes[i].numel());
    }
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return offsets[a] < offsets[b]; });
  stats.pad_elements = stats.size - last_end;
  stats.gap_elements = last_end - stats.data_elements;

  // covered(x): data elements below x, for non-decreasing x (one merge pass over `order`).
  std::size_t cursor = 0;
  std::int64_t below = 0;  // data in ranges order[0..cursor) (all of them end <= x)
  auto covered = [&](std::int64_t x) {
    while (cursor < order.size() && offsets[order[cursor]] + shapes[order[cursor]].numel() <= x) {
      below += shapes[order[cursor]].numel();
      ++cursor;
    }
    std::int64_t partial = 0;
    if (cursor < order.size() && offsets[order[cursor]] < x) {
      partial = x - offsets[order[cursor]];
    }
    return below + partial;
  };

  const std::int64_t dp = layout.dp_size();
  const auto udp = static_cast<std::size_t>(dp);
  // Tensors touching each segment: +1 at the first segment, -1 after the last one.
  std::vector<std::int64_t> diff(udp + 1, 0);
  for (const std::size_t i : order) {
    const std::int64_t start = offsets[i];
    const std::int64_t last = start + shapes[i].numel() - 1;
    const auto k1 =
        static_cast<std::size_t>(std::upper_bound(ro.begin(), ro.end(), start) - ro.begin() - 1);
    const auto k2 =
        static_cast<std::size_t>(std::upper_bound(ro.begin(), ro.end(), last) - ro.begin() - 1);
    ++diff[k1];
    --diff[k2 + 1];
  }

  stats.ranks.resize(udp);
  std::int64_t touching = 0;
  std::int64_t covered_start = covered(0);
  for (std::size_t k = 0; k < udp; ++k) {
    RankStats& r = stats.ranks[k];
    r.offset = ro[k];
    r.elements = layout.rank_size(static_cast<std::int64_t>(k));
    const std::int64_t seg_end = r.offset + r.elements;
    const std::int64_t covered_end = covered(seg_end);
    r.data_elements = covered_end - covered_start;
    covered_start = covered_end;
    r.pad_elements = std::max<std::int64_t>(0, seg_end - std::max(r.offset, last_end));
    r.gap_elements = r.elements - r.data_elements - r.pad_elements;
    touching += diff[k];
    // An empty segment shares its offset with a neighbour but holds no element of any tensor.
    r.num_tensors = r.elements > 0 ? touching : 0;
  }

  stats.min_rank_elements = stats.ranks.front().elements;
  stats.max_rank_elements = stats.ranks.front().elements;
  for (const RankStats& r : stats.ranks) {
    stats.min_rank_elements = std::min(stats.min_rank_elements, r.elements);
    stats.max_rank_elements = std::max(stats.max_rank_elements, r.elements);
  }
  stats.mean_rank_elements = static_cast<double>(stats.size) / static_cast<double>(dp);
  stats.imbalance = stats.mean_rank_elements > 0
                        ? static_cast<double>(stats.max_rank_elements) / stats.mean_rank_elements
                        : 1.0;
  return stats;
}

Expected<std::int64_t> max_rank_bytes(const GlobalLayout& layout, std::int64_t bytes_per_element) {
  if (bytes_per_element <= 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("bytes per element must be positive, got ", bytes_per_element));
  }
  std::int64_t max_elements = 0;
  std::int64_t max_rank = 0;
  for (std::int64_t k = 0; k < layout.dp_size(); ++k) {
    if (layout.rank_size(k) > max_elements) {
      max_elements = layout.rank_size(k);
      max_rank = k;
    }
  }
  std::int64_t bytes = 0;
  if (!checked_mul(max_elements, bytes_per_element, &bytes)) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("rank ", max_rank, " bytes overflow int64: ", max_elements,
                         " elements of ", bytes_per_element, " bytes each"));
  }
  return bytes;
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// Properties of compute_layout_stats: per-rank data, gap and pad elements agree with a brute-force
// overlap count and add up to the segment sizes and the layout totals.
#include "core/layout/layout_stats.h"

#include "core/layout/layout_builder.h"
#include "core/layout/owner_planner.h"
#include "properties/gen/gen_tensor_shape.h"
#include "properties/layout/layout_checks.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace fsdp {
namespace {

RC_GTEST_PROP(LayoutStatsProps, RankElementsMatchBruteForceOverlapAndAddUp, ()) {
  const gen::LayoutInput in = *gen::valid_layout_input();
  const int kind = *rc::gen::element(0, 1, 2);
  const auto layout =
      kind == 0   ? build_for_row_atomic(in.shapes, in.dp, in.block)
      : kind == 1 ? build_for_row_atomic_unpadding(in.shapes, in.dp, in.block)
                  : build_for_tensor_atomic(in.shapes, in.dp,
                                            plan_tensor_owners(in.shapes, in.dp).value());
  RC_ASSERT(layout.has_value());
  const LayoutStats stats =
      props::no_throw("compute_layout_stats", [&] { return compute_layout_stats(*layout); });
  const std::int64_t total = props::total_numel(in.shapes);
  RC_ASSERT(stats.size == layout->size());
  RC_ASSERT(stats.data_elements == total);
  RC_ASSERT(stats.data_elements + stats.gap_elements + stats.pad_elements == stats.size);
  RC_ASSERT(stats.ranks.size() == static_cast<std::size_t>(in.dp));
  std::int64_t data = 0;
  std::int64_t gap = 0;
  std::int64_t pad = 0;
  for (std::int64_t k = 0; k < in.dp; ++k) {
    const RankStats& r = stats.ranks[static_cast<std::size_t>(k)];
    const std::int64_t lo = layout->rank_to_offset()[static_cast<std::size_t>(k)];
    const std::int64_t hi = lo + layout->rank_size(k);
    std::int64_t overlap = 0;
    std::int64_t touching = 0;
    for (std::int64_t i = 0; i < layout->num_tensors(); ++i) {
      const Range t = layout->get_tensor_range(i);
      const std::int64_t o = std::min(hi, t.end()) - std::max(lo, t.start);
      if (o > 0) {
        overlap += o;
        ++touching;
      }
    }
    RC_ASSERT(r.offset == lo);
    RC_ASSERT(r.elements == hi - lo);
    RC_ASSERT(r.data_elements == overlap);
    RC_ASSERT(r.num_tensors == touching);
    RC_ASSERT(r.gap_elements >= 0);
    RC_ASSERT(r.pad_elements >= 0);
    RC_ASSERT(r.data_elements + r.gap_elements + r.pad_elements == r.elements);
    data += r.data_elements;
    gap += r.gap_elements;
    pad += r.pad_elements;
  }
  RC_ASSERT(data == stats.data_elements);
  RC_ASSERT(gap == stats.gap_elements);
  RC_ASSERT(pad == stats.pad_elements);
}

}  // namespace
}  // namespace fsdp

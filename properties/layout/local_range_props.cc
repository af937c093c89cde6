// SPDX-License-Identifier: Apache-2.0
// Properties of get_local_range on 2-axis meshes (fsdp-behaviour.md §1.5): [S,S] ranges tile the buffer,
// [R,S] (HSDP) ranges are the union of the inner rank's [S,S] ranges and contain each of them
// (HFSDP nesting), [R,R] is the whole buffer, and invalid requests give an Error.
#include "core/layout/local_range.h"

#include "core/base/strings.h"
#include "core/layout/layout_builder.h"
#include "core/layout/owner_planner.h"
#include "properties/gen/gen_mesh.h"
#include "properties/gen/gen_tensor_shape.h"
#include "properties/layout/layout_checks.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace fsdp {
namespace {

using P = AxisPlacement;

// A layout from one of the three builders (owners for TensorAtomic from the planner).
GlobalLayout any_layout() {
  const gen::LayoutInput in = *gen::valid_layout_input();
  const int kind = *rc::gen::element(0, 1, 2);
  Expected<GlobalLayout> layout = props::no_throw("building the layout", [&] {
    if (kind == 0) {
      RC_TAG("padded");
      return build_for_row_atomic(in.shapes, in.dp, in.block);
    }
    if (kind == 1) {
      RC_TAG("unpadded");
      return build_for_row_atomic_unpadding(in.shapes, in.dp, in.block);
    }
    RC_TAG("tensor-atomic");
    const auto owners = plan_tensor_owners(in.shapes, in.dp);
    return build_for_tensor_atomic(in.shapes, in.dp, owners.value());
  });
  RC_ASSERT(layout.has_value());
  return std::move(layout).value();
}

Range range_of(const GlobalLayout& layout, const gen::Mesh2& m, std::int64_t o, std::int64_t i,
               P outer, P inner) {
  const MeshCoordinate coord{{m.outer, m.inner}, {o, i}};
  const P placements[] = {outer, inner};
  const auto r = props::no_throw("get_local_range",
                                 [&] { return get_local_range(layout, coord, placements); });
  if (!r.has_value()) {
    RC_FAIL(str_cat("get_local_range failed on (o=", o, ", i=", i, "): ", r.error().message()));
  }
  return *r;
}

RC_GTEST_PROP(LocalRangeProps, ShardShardRangesTileTheBufferExactly, ()) {
  const GlobalLayout layout = any_layout();
  const gen::Mesh2 m = *gen::two_axis_mesh(layout.dp_size());
  std::vector<Range> ranges;
  for (std::int64_t o = 0; o < m.outer; ++o) {
    for (std::int64_t i = 0; i < m.inner; ++i) {
      ranges.push_back(range_of(layout, m, o, i, P::kShard, P::kShard));
    }
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.start != b.start ? a.start < b.start : a.numel < b.numel;
  });
  std::int64_t next = 0;
  for (const Range& r : ranges) {
    RC_ASSERT(r.numel >= 0);
    RC_ASSERT(r.start == next);  // no gap, no overlap
    next = r.end();
  }
  RC_ASSERT(next == layout.size());
}

RC_GTEST_PROP(LocalRangeProps, ReplicateShardRangeIsContiguousUnionContainingShardShardRange, ()) {
  const GlobalLayout layout = any_layout();
  const gen::Mesh2 m = *gen::two_axis_mesh(layout.dp_size());
  for (std::int64_t i = 0; i < m.inner; ++i) {
    // The [S,S] ranges of the outer ranks o = 0..O-1 at inner rank i, in o order, abut.
    std::vector<Range> parts;
    for (std::int64_t o = 0; o < m.outer; ++o) {
      parts.push_back(range_of(layout, m, o, i, P::kShard, P::kShard));
    }
    for (std::size_t j = 1; j < parts.size(); ++j) {
      RC_ASSERT(parts[j].start == parts[j - 1].end());
    }
    const Range want{parts.front().start, parts.back().end() - parts.front().start};
    for (std::int64_t o = 0; o < m.outer; ++o) {
      const Range hsdp = range_of(layout, m, o, i, P::kReplicate, P::kShard);
      RC_ASSERT(hsdp == want);  // same for every outer rank, the union of its inner rank's parts
      RC_ASSERT(range_of(layout, m, o, i, P::kPartial, P::kShard) == want);
      const Range& own = parts[static_cast<std::size_t>(o)];
      RC_ASSERT(hsdp.start <= own.start);
      RC_ASSERT(own.end() <= hsdp.end());
      // DBuffer.view(): the HFSDP optimizer range nests in the parameter range.
      const MeshCoordinate coord{{m.outer, m.inner}, {o, i}};
      const P from[] = {P::kReplicate, P::kShard};
      const P to[] = {P::kShard, P::kShard};
      const Status nested = props::no_throw(
          "check_view_contained", [&] { return check_view_contained(layout, coord, from, to); });
      RC_ASSERT(nested.ok());
    }
  }
}

RC_GTEST_PROP(LocalRangeProps, ReplicateReplicateRangeIsWholeBuffer, ()) {
  const GlobalLayout layout = any_layout();
  const gen::Mesh2 m = *gen::two_axis_mesh(layout.dp_size());
  const std::int64_t o = *rc::gen::inRange<std::int64_t>(0, m.outer);
  const std::int64_t i = *rc::gen::inRange<std::int64_t>(0, m.inner);
  RC_ASSERT(range_of(layout, m, o, i, P::kReplicate, P::kReplicate) == (Range{0, layout.size()}));
  RC_ASSERT(range_of(layout, m, o, i, P::kPartial, P::kReplicate) == (Range{0, layout.size()}));
}

RC_GTEST_PROP(LocalRangeProps, InvalidRequestGivesErrorNotCrash, ()) {
  const GlobalLayout layout = any_layout();
  const auto bad = *gen::invalid_local_range_request(layout.dp_size());
  const auto r = props::no_throw("get_local_range", [&] {
    return get_local_range(layout, bad.input.coord, bad.input.placements);
  });
  RC_ASSERT(!r.has_value());
  RC_ASSERT(!r.error().message().empty());
  RC_TAG(bad.defect);
}

}  // namespace
}  // namespace fsdp

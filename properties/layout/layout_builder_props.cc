// SPDX-License-Identifier: Apache-2.0
// Properties of the three layout builders (fsdp-behaviour.md §2.2-§2.4): geometric invariants, the PADDED
// builder's offsets equal the naive reference transcription on every input, UNPADDED boundaries
// are the nearest legal row boundaries, and invalid input always gives an Error.
#include "core/layout/layout_builder.h"

#include "core/base/strings.h"
#include "core/layout/layout_validation.h"
#include "core/layout/owner_planner.h"
#include "properties/gen/gen_tensor_shape.h"
#include "properties/layout/layout_checks.h"
#include "tests/core/layout/reference_row_atomic.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

namespace fsdp {
namespace {

using props::check_basic_layout;
using props::check_boundaries_on_rows;
using props::chunk_of;
using props::no_throw;

Expected<GlobalLayout> build_padded(const gen::LayoutInput& in) {
  return no_throw("build_for_row_atomic",
                  [&] { return build_for_row_atomic(in.shapes, in.dp, in.block); });
}

Expected<GlobalLayout> build_unpadded(const gen::LayoutInput& in) {
  return no_throw("build_for_row_atomic_unpadding",
                  [&] { return build_for_row_atomic_unpadding(in.shapes, in.dp, in.block); });
}

Expected<GlobalLayout> build_ta(const gen::TensorAtomicInput& in) {
  return no_throw("build_for_tensor_atomic",
                  [&] { return build_for_tensor_atomic(in.shapes, in.dp, in.owners); });
}

// Labels the interesting paths of §2.2 so the run reports how often each one was exercised.
void tag_padded_paths(const GlobalLayout& layout, std::int64_t chunk) {
  bool conjugate = false;
  bool gap_fill = false;
  bool zero_numel = false;
  std::int64_t last_regular = -1;
  for (std::int64_t i = 0; i < layout.num_tensors(); ++i) {
    const Range r = layout.get_tensor_range(i);
    if (r.numel >= chunk) {
      conjugate = conjugate || r.start % chunk != 0;  // only conjugates start off-chunk
      last_regular = std::max(last_regular, r.start);
    }
    zero_numel = zero_numel || r.numel == 0;
  }
  for (std::int64_t i = 0; i < layout.num_tensors(); ++i) {
    const Range r = layout.get_tensor_range(i);
    gap_fill = gap_fill || (r.numel > 0 && r.numel < chunk && r.start < last_regular);
  }
  RC_TAG(conjugate ? "conjugate" : "no conjugate");
  RC_TAG(gap_fill ? "gap fill" : "no gap fill");
  if (zero_numel) {
    RC_TAG("zero-numel tensor");
  }
}

// ---- all builders -----------------------------------------------------------------------------

RC_GTEST_PROP(LayoutBuilderProps, PaddedTensorsAreDisjointInsideSizeAndRowsNeverSplit, ()) {
  const gen::LayoutInput in = *gen::valid_layout_input();
  const auto layout = build_padded(in);
  RC_ASSERT(layout.has_value());
  RC_ASSERT(check_basic_layout(*layout, in.dp) == "");
  RC_ASSERT(check_boundaries_on_rows(*layout, in.block) == "");
}

RC_GTEST_PROP(LayoutBuilderProps, UnpaddedTensorsAreDisjointInsideSizeAndRowsNeverSplit, ()) {
  const gen::LayoutInput in = *gen::valid_layout_input();
  const auto layout = build_unpadded(in);
  RC_ASSERT(layout.has_value());
  RC_ASSERT(check_basic_layout(*layout, in.dp) == "");
  RC_ASSERT(check_boundaries_on_rows(*layout, in.block) == "");
}

RC_GTEST_PROP(LayoutBuilderProps, TensorAtomicTensorsAreDisjointInsideSizeAndRowsNeverSplit, ()) {
  const gen::TensorAtomicInput in = *gen::valid_tensor_atomic_input();
  const auto layout = build_ta(in);
  RC_ASSERT(layout.has_value());
  RC_ASSERT(check_basic_layout(*layout, in.dp) == "");
  RC_ASSERT(check_boundaries_on_rows(*layout, /*block=*/1) == "");
}

// ---- PADDED -----------------------------------------------------------------------------------

RC_GTEST_PROP(LayoutBuilderProps, PaddedSegmentsAreEqualChunkMultiples, ()) {
  const gen::LayoutInput in = *gen::valid_layout_input();
  const auto layout = build_padded(in);
  RC_ASSERT(layout.has_value());
  const std::int64_t chunk = chunk_of(in.shapes, in.block);
  RC_ASSERT(layout->size() % (chunk * in.dp) == 0);
  const std::int64_t seg = layout->size() / in.dp;
  RC_ASSERT(seg % chunk == 0);
  for (std::int64_t k = 0; k < in.dp; ++k) {
    RC_ASSERT(layout->rank_to_offset()[static_cast<std::size_t>(k)] == k * seg);
    RC_ASSERT(layout->rank_size(k) == seg);
  }
  RC_ASSERT(layout->has_equal_shard_sizes());
  tag_padded_paths(*layout, chunk);
}

// The most important property: the O(n log n) builder and the literal transcription of the
// reference's quadratic algorithm agree on offsets and size for every valid input.
RC_GTEST_PROP(LayoutBuilderProps, PaddedOffsetsEqualNaiveReference, ()) {
  const gen::LayoutInput in = *gen::valid_layout_input();
  std::int64_t ref_size = -1;
  const auto ref = testing::reference_row_atomic_offsets(in.shapes, in.dp, in.block, &ref_size);
  RC_ASSERT(ref.has_value());
  const auto layout = build_padded(in);
  RC_ASSERT(layout.has_value());
  RC_ASSERT(layout->tensor_to_offset() == *ref);
  RC_ASSERT(layout->size() == ref_size);
  tag_padded_paths(*layout, chunk_of(in.shapes, in.block));
}

// Same, biased to many distinct row sizes (large chunk, mostly fragments, busy tail).
RC_GTEST_PROP(LayoutBuilderProps, PaddedOffsetsEqualNaiveReferenceForManyRowSizes, ()) {
  const std::int64_t block = *gen::block_size();
  const std::vector<Shape> shapes = *gen::many_row_size_shapes(block);
  const std::int64_t dp = *gen::dp_size();
  std::int64_t ref_size = -1;
  const auto ref = testing::reference_row_atomic_offsets(shapes, dp, block, &ref_size);
  RC_ASSERT(ref.has_value());
  const auto layout = build_padded(gen::LayoutInput{shapes, dp, block});
  RC_ASSERT(layout.has_value());
  RC_ASSERT(layout->tensor_to_offset() == *ref);
  RC_ASSERT(layout->size() == ref_size);
  tag_padded_paths(*layout, chunk_of(shapes, block));
}

// On invalid input (and on inputs whose padded size leaves int64) the builder rejects exactly
// when the reference transcription does.
RC_GTEST_PROP(LayoutBuilderProps, PaddedRejectsExactlyWhenNaiveReferenceRejects, ()) {
  const auto bad = *rc::gen::oneOf(gen::invalid_row_atomic_input(),
                                   gen::invalid_padded_only_input());
  const gen::LayoutInput& in = bad.input;
  const auto ref = testing::reference_row_atomic_offsets(in.shapes, in.dp, in.block, nullptr);
  RC_ASSERT(!ref.has_value());
  const auto layout = build_padded(in);
  RC_ASSERT(!layout.has_value());
}

// ---- UNPADDED ---------------------------------------------------------------------------------

RC_GTEST_PROP(LayoutBuilderProps, UnpaddedPacksTensorsInIdOrderWithoutPadding, ()) {
  const gen::LayoutInput in = *gen::valid_layout_input();
  const auto layout = build_unpadded(in);
  RC_ASSERT(layout.has_value());
  std::int64_t next = 0;
  for (std::size_t i = 0; i < in.shapes.size(); ++i) {
    RC_ASSERT(layout->tensor_to_offset()[i] == next);
    next += in.shapes[i].numel();
  }
  RC_ASSERT(layout->size() == next);
  RC_ASSERT(layout->size() == props::total_numel(in.shapes));
}

// Boundary k is the legal boundary nearest k * size / dp (ties to the lower). The legal
// boundaries are 0, size and every row/block boundary of every tensor; checked against all of
// them, independently of the builder's walk.
RC_GTEST_PROP(LayoutBuilderProps, UnpaddedBoundaryIsNearestRowBoundaryToIdealPoint, ()) {
  const gen::LayoutInput in = *gen::valid_layout_input();
  const auto layout = build_unpadded(in);
  RC_ASSERT(layout.has_value());
  const std::int64_t size = layout->size();
  std::set<std::int64_t> legal{0, size};
  for (std::size_t i = 0; i < in.shapes.size(); ++i) {
    const std::int64_t start = layout->tensor_to_offset()[i];
    const std::int64_t align = in.block * in.shapes[i].row_size();
    for (std::int64_t b = start; b <= start + in.shapes[i].numel(); b += align) {
      legal.insert(b);
    }
  }
  const std::vector<std::int64_t> cands(legal.begin(), legal.end());
  using I128 = __int128;
  bool any_empty = false;
  for (std::int64_t k = 1; k < in.dp; ++k) {
    const I128 ideal = static_cast<I128>(k) * size;  // compare c * dp with k * size
    // First candidate at or above the ideal point; the answer is it or its predecessor.
    const auto hi = std::partition_point(cands.begin(), cands.end(), [&](std::int64_t c) {
      return static_cast<I128>(c) * in.dp < ideal;
    });
    std::int64_t best = 0;
    if (hi == cands.end()) {
      best = cands.back();
    } else if (hi == cands.begin()) {
      best = *hi;
    } else {
      const I128 below = ideal - static_cast<I128>(*(hi - 1)) * in.dp;
      const I128 above = static_cast<I128>(*hi) * in.dp - ideal;
      best = below <= above ? *(hi - 1) : *hi;  // exact tie: the lower candidate
    }
    const std::int64_t got = layout->rank_to_offset()[static_cast<std::size_t>(k)];
    if (got != best) {
      RC_FAIL(str_cat("boundary ", k, " is ", got, "; nearest legal boundary to ", k, "*", size,
                      "/", in.dp, " is ", best));
    }
    any_empty = any_empty || layout->rank_size(k - 1) == 0;
  }
  RC_TAG(any_empty ? "empty segment" : "no empty segment");
}

// ---- TensorAtomic -----------------------------------------------------------------------------

// Rank k's segment holds exactly the tensors owned by k, packed in id order, none crossing.
void check_tensor_atomic_segments(const gen::TensorAtomicInput& in, const GlobalLayout& layout) {
  RC_ASSERT(layout.size() == props::total_numel(in.shapes));
  std::vector<std::int64_t> cursor = layout.rank_to_offset();
  for (std::size_t i = 0; i < in.shapes.size(); ++i) {
    const std::int64_t owner = in.owners[i];
    const std::int64_t start = layout.tensor_to_offset()[i];
    const std::int64_t seg_start = layout.rank_to_offset()[static_cast<std::size_t>(owner)];
    const std::int64_t seg_end = seg_start + layout.rank_size(owner);
    RC_ASSERT(start == cursor[static_cast<std::size_t>(owner)]);
    RC_ASSERT(seg_start <= start);
    RC_ASSERT(start + in.shapes[i].numel() <= seg_end);  // never crosses a boundary
    cursor[static_cast<std::size_t>(owner)] += in.shapes[i].numel();
  }
  for (std::int64_t k = 0; k < in.dp; ++k) {  // each segment is exactly filled by its tensors
    RC_ASSERT(cursor[static_cast<std::size_t>(k)] ==
              layout.rank_to_offset()[static_cast<std::size_t>(k)] + layout.rank_size(k));
  }
}

RC_GTEST_PROP(LayoutBuilderProps, TensorAtomicSegmentHoldsExactlyItsOwnersTensors, ()) {
  const gen::TensorAtomicInput in = *gen::valid_tensor_atomic_input();
  const auto layout = build_ta(in);
  RC_ASSERT(layout.has_value());
  check_tensor_atomic_segments(in, *layout);
}

RC_GTEST_PROP(LayoutBuilderProps, TensorAtomicWithPlannedOwnersHoldsExactlyItsTensors, ()) {
  gen::TensorAtomicInput in = *gen::valid_tensor_atomic_input();
  const auto owners = plan_tensor_owners(in.shapes, in.dp);
  RC_ASSERT(owners.has_value());
  in.owners = *owners;
  const auto layout = build_ta(in);
  RC_ASSERT(layout.has_value());
  check_tensor_atomic_segments(in, *layout);
}

// ---- invalid input ----------------------------------------------------------------------------

RC_GTEST_PROP(LayoutBuilderProps, InvalidRowAtomicInputGivesErrorNotCrash, ()) {
  const auto bad = *gen::invalid_row_atomic_input();
  const auto padded = build_padded(bad.input);
  RC_ASSERT(!padded.has_value());
  RC_ASSERT(!padded.error().message().empty());
  const auto unpadded = build_unpadded(bad.input);
  RC_ASSERT(!unpadded.has_value());
  RC_ASSERT(!unpadded.error().message().empty());
  const auto via_dispatch = no_throw("build_row_atomic_layout", [&] {
    return build_row_atomic_layout(bad.input.shapes, bad.input.dp, bad.input.block,
                                   ShardLayout::kPadded);
  });
  RC_ASSERT(!via_dispatch.has_value());
  RC_TAG(bad.defect);
}

// Chunk overflows are PADDED-only errors: UNPADDED never forms the lcm, so it must succeed.
RC_GTEST_PROP(LayoutBuilderProps, ChunkOverflowGivesPaddedErrorButUnpaddedLayout, ()) {
  const auto bad = *gen::invalid_padded_only_input();
  const auto padded = build_padded(bad.input);
  RC_ASSERT(!padded.has_value());
  RC_ASSERT(padded.error().code() == ErrorCode::kOutOfRange);
  const auto unpadded = build_unpadded(bad.input);
  RC_ASSERT(unpadded.has_value());
  RC_ASSERT(check_boundaries_on_rows(*unpadded, bad.input.block) == "");
  RC_TAG(bad.defect);
}

RC_GTEST_PROP(LayoutBuilderProps, InvalidTensorAtomicInputGivesErrorNotCrash, ()) {
  const auto bad = *gen::invalid_tensor_atomic_input();
  const auto layout = build_ta(bad.input);
  RC_ASSERT(!layout.has_value());
  RC_ASSERT(!layout.error().message().empty());
  RC_TAG(bad.defect);
}

}  // namespace
}  // namespace fsdp

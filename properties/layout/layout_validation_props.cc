// SPDX-License-Identifier: Apache-2.0
// Properties of the layout validators (fsdp-behaviour.md §1.3, §1.4, §2.3): each accepts every layout its
// builder produces, and the row-atomic validators reject a layout whose rank boundary is moved
// off a row boundary.
#include "core/layout/layout_validation.h"

#include "core/layout/layout_builder.h"
#include "core/layout/owner_planner.h"
#include "properties/gen/gen_tensor_shape.h"
#include "properties/layout/layout_checks.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <vector>

namespace fsdp {
namespace {

RC_GTEST_PROP(LayoutValidationProps, RowAtomicValidatorAcceptsEveryPaddedLayout, ()) {
  const gen::LayoutInput in = *gen::valid_layout_input();
  const auto layout = build_for_row_atomic(in.shapes, in.dp, in.block);
  RC_ASSERT(layout.has_value());
  const Status s = props::no_throw("validate_for_row_atomic",
                                   [&] { return validate_for_row_atomic(*layout, in.block); });
  RC_ASSERT(s.ok());
  // A padded layout is also a legal unpadded-style layout only without gaps; not checked here.
}

RC_GTEST_PROP(LayoutValidationProps, UnpaddedValidatorAcceptsEveryUnpaddedLayout, ()) {
  const gen::LayoutInput in = *gen::valid_layout_input();
  const auto layout = build_for_row_atomic_unpadding(in.shapes, in.dp, in.block);
  RC_ASSERT(layout.has_value());
  const Status s = props::no_throw("validate_for_row_atomic_unpadded", [&] {
    return validate_for_row_atomic_unpadded(*layout, in.block);
  });
  RC_ASSERT(s.ok());
}

RC_GTEST_PROP(LayoutValidationProps, TensorAtomicValidatorAcceptsEveryTensorAtomicLayout, ()) {
  gen::TensorAtomicInput in = *gen::valid_tensor_atomic_input();
  if (*rc::gen::arbitrary<bool>()) {
    in.owners = plan_tensor_owners(in.shapes, in.dp).value();
  }
  const auto layout = build_for_tensor_atomic(in.shapes, in.dp, in.owners);
  RC_ASSERT(layout.has_value());
  const Status s = props::no_throw("validate_for_tensor_atomic",
                                   [&] { return validate_for_tensor_atomic(*layout); });
  RC_ASSERT(s.ok());
}

// Moving one interior rank boundary of an unpadded layout to a point strictly inside a row of a
// tensor (relative offset not a multiple of block * row size) must be rejected.
RC_GTEST_PROP(LayoutValidationProps, UnpaddedValidatorRejectsBoundaryInsideARow, ()) {
  const gen::LayoutInput in = *gen::valid_layout_input();
  RC_PRE(in.dp >= 2);
  const auto layout = build_for_row_atomic_unpadding(in.shapes, in.dp, in.block);
  RC_ASSERT(layout.has_value());
  // Candidate positions strictly inside some row/block of some tensor.
  std::vector<std::int64_t> inside;
  for (std::int64_t i = 0; i < layout->num_tensors(); ++i) {
    const Range r = layout->get_tensor_range(i);
    const std::int64_t align = in.block * layout->tensor_shapes()[static_cast<std::size_t>(i)]
                                              .row_size();
    if (align > 1 && r.numel > 0) {
      inside.push_back(r.start + 1);
    }
  }
  RC_PRE(!inside.empty());
  const std::int64_t b = *rc::gen::elementOf(inside);
  // Keep rank_to_offset non-decreasing: put b at the one boundary index where it fits.
  std::vector<std::int64_t> ro = layout->rank_to_offset();
  std::size_t k = 1;
  while (k + 1 < ro.size() && ro[k + 1] < b) {
    ++k;
  }
  RC_PRE(ro[k - 1] <= b && (k + 1 == ro.size() || b <= ro[k + 1]));
  ro[k] = b;
  const auto moved = GlobalLayout::make(layout->tensor_shapes(), layout->tensor_to_offset(),
                                        layout->size(), ro);
  RC_ASSERT(moved.has_value());
  const Status s = props::no_throw("validate_for_row_atomic_unpadded", [&] {
    return validate_for_row_atomic_unpadded(*moved, in.block);
  });
  RC_ASSERT(!s.ok());
}

}  // namespace
}  // namespace fsdp

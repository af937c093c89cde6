// SPDX-License-Identifier: Apache-2.0
// Properties of plan_tensor_owners (longest-processing-time greedy): owners lie in [0, dp), the
// most loaded rank exceeds the mean load by less than one largest tensor (the list-scheduling
// bound), and dp <= 0 gives an Error.
#include "core/layout/owner_planner.h"

#include "core/base/strings.h"
#include "properties/gen/gen_tensor_shape.h"
#include "properties/layout/layout_checks.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace fsdp {
namespace {

RC_GTEST_PROP(OwnerPlannerProps, OwnersAreRanksInRange, ()) {
  const std::vector<Shape> shapes = *gen::valid_shapes(1);
  const std::int64_t dp = *gen::dp_size();
  const auto owners = props::no_throw("plan_tensor_owners",
                                      [&] { return plan_tensor_owners(shapes, dp); });
  RC_ASSERT(owners.has_value());
  RC_ASSERT(owners->size() == shapes.size());
  for (const std::int64_t o : *owners) {
    RC_ASSERT(o >= 0);
    RC_ASSERT(o < dp);
  }
}

// max load <= total / dp + largest numel, compared exactly as max * dp <= total + largest * dp.
RC_GTEST_PROP(OwnerPlannerProps, MaxLoadIsWithinOneLargestTensorOfMean, ()) {
  const std::vector<Shape> shapes = *gen::valid_shapes(1);
  const std::int64_t dp = *gen::dp_size();
  const auto owners = plan_tensor_owners(shapes, dp);
  RC_ASSERT(owners.has_value());
  std::vector<std::int64_t> load(static_cast<std::size_t>(dp), 0);
  std::int64_t total = 0;
  std::int64_t largest = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    load[static_cast<std::size_t>((*owners)[i])] += shapes[i].numel();
    total += shapes[i].numel();
    largest = std::max(largest, shapes[i].numel());
  }
  const std::int64_t max_load = *std::max_element(load.begin(), load.end());
  if (max_load * dp > total + largest * dp) {
    RC_FAIL(str_cat("max load ", max_load, " exceeds mean ", total, "/", dp, " + largest ",
                    largest));
  }
}

RC_GTEST_PROP(OwnerPlannerProps, NonPositiveDpGivesErrorNotCrash, ()) {
  const std::vector<Shape> shapes = *gen::valid_shapes(1);
  const std::int64_t dp = *rc::gen::inRange<std::int64_t>(-8, 1);
  const auto owners = props::no_throw("plan_tensor_owners",
                                      [&] { return plan_tensor_owners(shapes, dp); });
  RC_ASSERT(!owners.has_value());
}

}  // namespace
}  // namespace fsdp

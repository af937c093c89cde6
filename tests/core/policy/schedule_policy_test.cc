// SPDX-License-Identifier: Apache-2.0
#include "core/policy/schedule_policy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace fsdp {
namespace {

using Positions = std::vector<std::int64_t>;

// §4.8 budget vector: order [A, B, A, C], every module one element.
const std::vector<std::string> kOrder = {"A", "B", "A", "C"};
const std::vector<std::int64_t> kOnes = {1, 1, 1, 1};

std::vector<std::vector<std::string>> targets_by_position(const PrefetchPolicy& policy) {
  std::vector<std::vector<std::string>> out;
  for (std::int64_t pos = 0; pos < 4; ++pos) {
    std::vector<std::string> names;
    const Positions targets = prefetch_targets(policy, kOnes, pos).value();
    for (const std::int64_t t : targets) {
      names.push_back(kOrder[static_cast<std::size_t>(t)]);
    }
    out.push_back(names);
  }
  return out;
}

TEST(PrefetchPolicyTest, Section48VectorBudgetNone) {
  const auto policy = PrefetchPolicy::from_prefetch_size(std::nullopt).value();
  EXPECT_EQ(policy, PrefetchPolicy());
  EXPECT_EQ(targets_by_position(policy),
            (std::vector<std::vector<std::string>>{{"B"}, {"A"}, {"C"}, {}}));
}

TEST(PrefetchPolicyTest, Section48VectorBudgetTwo) {
  const auto policy = PrefetchPolicy::from_prefetch_size(2).value();
  EXPECT_EQ(policy.mode(), PrefetchMode::kElementBudget);
  EXPECT_EQ(targets_by_position(policy),
            (std::vector<std::vector<std::string>>{{"B", "A"}, {"A", "C"}, {"C"}, {}}));
}

TEST(PrefetchPolicyTest, Section48VectorBudgetZero) {
  const auto policy = PrefetchPolicy::from_prefetch_size(0).value();
  EXPECT_EQ(policy, PrefetchPolicy::none());
  EXPECT_EQ(targets_by_position(policy),
            (std::vector<std::vector<std::string>>{{}, {}, {}, {}}));
}

TEST(PrefetchPolicyTest, BudgetKeepsTheUnitThatCrossesIt) {
  const std::vector<std::int64_t> elements = {5, 3, 10, 4, 0, 7};
  const auto budget = [&](std::int64_t b, std::int64_t pos) {
    return prefetch_targets(PrefetchPolicy::element_budget(b).value(), elements, pos).value();
  };
  EXPECT_EQ(budget(1, 0), (Positions{1}));
  EXPECT_EQ(budget(3, 0), (Positions{1}));
  EXPECT_EQ(budget(4, 0), (Positions{1, 2}));
  EXPECT_EQ(budget(13, 0), (Positions{1, 2}));
  EXPECT_EQ(budget(14, 0), (Positions{1, 2, 3}));
  // A zero-element unit adds nothing, so the walk goes on past it.
  EXPECT_EQ(budget(5, 2), (Positions{3, 4, 5}));
  EXPECT_EQ(budget(1000, 0), (Positions{1, 2, 3, 4, 5}));
  EXPECT_EQ(budget(1, 5), Positions{});
}

TEST(PrefetchPolicyTest, BudgetSumSaturates) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const std::vector<std::int64_t> elements = {1, kMax - 1, kMax, 5};
  EXPECT_EQ(
      prefetch_targets(PrefetchPolicy::element_budget(kMax).value(), elements, 0).value(),
      (Positions{1, 2}));
}

TEST(PrefetchPolicyTest, NextUnitsTakesTheNextK) {
  const std::vector<std::int64_t> elements = {9, 9, 9, 9};
  EXPECT_EQ(prefetch_targets(PrefetchPolicy::next_units(2).value(), elements, 0).value(),
            (Positions{1, 2}));
  EXPECT_EQ(prefetch_targets(PrefetchPolicy::next_units(2).value(), elements, 2).value(),
            (Positions{3}));
  EXPECT_EQ(prefetch_targets(PrefetchPolicy::next_units(std::numeric_limits<std::int64_t>::max())
                                 .value(),
                             elements, 0)
                .value(),
            (Positions{1, 2, 3}));
}

TEST(PrefetchPolicyTest, TargetErrors) {
  EXPECT_EQ(prefetch_targets(PrefetchPolicy(), kOnes, 4).error().message(),
            "prefetch position 4 is outside an order of 4 units: expected [0, 4)");
  EXPECT_EQ(prefetch_targets(PrefetchPolicy(), kOnes, -1).error().code(), ErrorCode::kOutOfRange);
  const std::vector<std::int64_t> negative = {1, -2};
  EXPECT_EQ(prefetch_targets(PrefetchPolicy(), negative, 0).error().message(),
            "unit at order position 1 has -2 elements; expected >= 0");
}

TEST(PrefetchPolicyTest, FactoriesValidate) {
  EXPECT_EQ(PrefetchPolicy::from_prefetch_size(-1).error().message(),
            "prefetch size must be >= 0 (0 = none) or unset, got -1");
  EXPECT_EQ(PrefetchPolicy::next_units(0).error().message(),
            "prefetch unit count must be >= 1, got 0 (use none() for no prefetch)");
  EXPECT_EQ(PrefetchPolicy::element_budget(0).error().message(),
            "prefetch element budget must be >= 1, got 0 (use none() for no prefetch)");
  EXPECT_EQ(PrefetchPolicy().mode(), PrefetchMode::kNextUnits);
  EXPECT_EQ(PrefetchPolicy().amount(), 1);
}

TEST(PrefetchPolicyTest, ParseAndToString) {
  for (const PrefetchPolicy& p :
       {PrefetchPolicy::none(), PrefetchPolicy(), PrefetchPolicy::next_units(3).value(),
        PrefetchPolicy::element_budget(1 << 20).value()}) {
    EXPECT_EQ(parse_prefetch_policy(to_string(p)).value(), p) << to_string(p);
  }
  EXPECT_EQ(to_string(PrefetchPolicy()), "next(1)");
  EXPECT_EQ(to_string(PrefetchPolicy::element_budget(64).value()), "budget(64)");
  EXPECT_EQ(parse_prefetch_policy("next").value(), PrefetchPolicy());
  EXPECT_EQ(parse_prefetch_policy("0").value(), PrefetchPolicy::none());
  EXPECT_EQ(parse_prefetch_policy("4096").value(), PrefetchPolicy::element_budget(4096).value());
  EXPECT_EQ(parse_prefetch_policy("next(0)").error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(parse_prefetch_policy("-3").error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(parse_prefetch_policy("all").error().message(),
            "prefetch policy 'all' is unknown; expected none, next, next(k), budget(elements) or "
            "an integer prefetch size");
}

TEST(SchedulePolicyTest, DefaultsAreTheReferenceDefaults) {
  const SchedulePolicy policy;
  EXPECT_EQ(policy.forward_prefetch(), PrefetchPolicy());
  EXPECT_EQ(policy.backward_prefetch(), PrefetchPolicy());
  EXPECT_EQ(policy.max_inflight_all_gathers(), 0);
  EXPECT_FALSE(policy.unify_communication_stream());
  EXPECT_EQ(to_string(policy),
            "forward=next(1) backward=next(1) max_inflight_all_gathers=unlimited "
            "streams=separate");
}

TEST(SchedulePolicyTest, MakeValidates) {
  auto policy = SchedulePolicy::make(PrefetchPolicy::none(),
                                     PrefetchPolicy::element_budget(64).value(), 2,
                                     /*unify_communication_stream=*/true);
  ASSERT_TRUE(policy);
  EXPECT_EQ(policy->forward_prefetch(), PrefetchPolicy::none());
  EXPECT_EQ(policy->max_inflight_all_gathers(), 2);
  EXPECT_TRUE(policy->unify_communication_stream());
  EXPECT_EQ(to_string(*policy),
            "forward=none backward=budget(64) max_inflight_all_gathers=2 streams=unified");
  EXPECT_EQ(SchedulePolicy::make(PrefetchPolicy(), PrefetchPolicy(), -1, false).error().message(),
            "max in-flight all-gathers must be >= 0 (0 = unlimited), got -1");
}

}  // namespace
}  // namespace fsdp

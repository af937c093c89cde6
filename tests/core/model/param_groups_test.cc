// SPDX-License-Identifier: Apache-2.0
// Parameter groups: keyed by (dtype, requires_grad) in first-seen order (fsdp-behaviour.md §4.1.2e),
// each with the layout core/layout builds for it.
#include "core/model/param_groups.h"

#include "core/layout/layout_builder.h"
#include "core/model/model_presets.h"

#include <gtest/gtest.h>

namespace fsdp {
namespace {

Param param(std::string name, std::initializer_list<std::int64_t> dims, DType dtype,
            bool requires_grad = true) {
  return Param::make(std::move(name), Shape::make(dims).value(), dtype, requires_grad).value();
}

Unit mixed_unit() {
  return Unit::make("u", Unit::kNoParent,
                    {param("a", {4, 4}, DType::kBf16), param("b", {3}, DType::kFp32),
                     param("c", {2, 2}, DType::kBf16, false), param("d", {1, 6}, DType::kBf16),
                     param("e", {5}, DType::kFp32)},
                    {}, {})
      .value();
}

TEST(ParamGroupsTest, GroupsInFirstSeenOrder) {
  const auto groups = group_params(mixed_unit().params());
  ASSERT_EQ(groups.size(), 3U);
  EXPECT_EQ(groups[0], (ParamGrouping{DType::kBf16, true, {0, 3}}));
  EXPECT_EQ(groups[1], (ParamGrouping{DType::kFp32, true, {1, 4}}));
  EXPECT_EQ(groups[2], (ParamGrouping{DType::kBf16, false, {2}}));
  EXPECT_TRUE(group_params({}).empty());
}

TEST(ParamGroupsTest, EachGroupGetsTheBuildersLayout) {
  const Unit u = mixed_unit();
  const auto groups = build_param_groups(u, /*dp_size=*/2, /*block_size=*/1, ShardLayout::kPadded);
  ASSERT_TRUE(groups.has_value()) << groups.error().message();
  ASSERT_EQ(groups->size(), 3U);
  const std::vector<Shape> shapes = {u.params()[0].shape(), u.params()[3].shape()};
  EXPECT_EQ((*groups)[0].layout, build_row_atomic_layout(shapes, 2, 1, ShardLayout::kPadded).value());
  EXPECT_EQ((*groups)[0].layout.num_tensors(), 2);
  EXPECT_EQ((*groups)[1].layout.num_tensors(), 2);
  EXPECT_EQ((*groups)[2].param_indices, std::vector<std::int64_t>({2}));
  const auto unpadded = build_param_groups(u, 3, 1, ShardLayout::kUnpadded);
  ASSERT_TRUE(unpadded.has_value());
  EXPECT_EQ((*unpadded)[1].layout.size(), 8);  // packed: 3 + 5
}

TEST(ParamGroupsTest, Fp8GroupsUseBlockAtomic32) {
  const Unit u = Unit::make("q", Unit::kNoParent,
                            {param("w", {64, 16}, DType::kFp8), param("n", {16}, DType::kBf16)},
                            {}, {})
                     .value();
  const auto groups = build_param_groups(u, 4, 1, ShardLayout::kPadded);
  ASSERT_TRUE(groups.has_value()) << groups.error().message();
  EXPECT_EQ((*groups)[0].block_size, kMxfp8BlockSize);
  EXPECT_EQ((*groups)[1].block_size, 1);
  const Unit bad = Unit::make("q", Unit::kNoParent, {param("w", {33, 16}, DType::kFp8)}, {}, {})
                       .value();
  const auto err = build_param_groups(bad, 4, 1, ShardLayout::kPadded);
  ASSERT_FALSE(err.has_value());
  EXPECT_EQ(err.error().message().rfind("unit 'q' group (fp8, requires_grad=true): ", 0), 0U)
      << err.error().message();
}

TEST(ParamGroupsTest, LayoutErrorsNameTheUnitAndGroup) {
  const auto groups = build_param_groups(mixed_unit(), 0, 1, ShardLayout::kPadded);
  ASSERT_FALSE(groups.has_value());
  EXPECT_EQ(groups.error().message().rfind("unit 'u' group (bf16, requires_grad=true): ", 0), 0U)
      << groups.error().message();
}

TEST(ParamGroupsTest, DeepseekMoeLayerHasATrainableAndAFrozenGroup) {
  const Model m = load_model_preset("deepseek-v3").value();
  const Unit& dense = m.units()[1];
  const Unit& moe = m.units()[4];
  EXPECT_EQ(group_params(dense.params()).size(), 1U);
  const auto groups = build_param_groups(moe, 64, 1, ShardLayout::kPadded);
  ASSERT_TRUE(groups.has_value()) << groups.error().message();
  ASSERT_EQ(groups->size(), 2U);
  EXPECT_EQ((*groups)[0].dtype, DType::kBf16);
  EXPECT_TRUE((*groups)[0].requires_grad);
  EXPECT_EQ((*groups)[1].dtype, DType::kFp32);
  EXPECT_FALSE((*groups)[1].requires_grad);
  EXPECT_EQ((*groups)[1].layout.num_tensors(), 1);
  std::int64_t numel = 0;
  for (const std::int64_t i : (*groups)[0].param_indices) {
    numel += moe.params()[static_cast<std::size_t>(i)].numel();
  }
  EXPECT_GE((*groups)[0].layout.size(), numel);
  EXPECT_EQ((*groups)[0].layout.size() % 64, 0);
}

}  // namespace
}  // namespace fsdp

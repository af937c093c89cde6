// SPDX-License-Identifier: Apache-2.0
#include "core/mesh/placement.h"

#include "core/layout/layout_builder.h"
#include "core/mesh/redistribute.h"

#include <gtest/gtest.h>

#include <vector>

namespace fsdp {
namespace {

TEST(PlacementTest, EqualityIsByKindBlockAndReduceOp) {
  EXPECT_EQ(Placement::row_atomic(), Placement::row_atomic());
  EXPECT_NE(Placement::shard(), Placement::row_atomic());
  EXPECT_EQ(Placement::block_atomic(32).value(), Placement::block_atomic(32).value());
  EXPECT_NE(Placement::block_atomic(32).value(), Placement::block_atomic(16).value());
  EXPECT_NE(Placement::block_atomic(1).value(), Placement::row_atomic());
  EXPECT_NE(Placement::partial(ReduceOp::kAvg), Placement::partial(ReduceOp::kSum));
  EXPECT_NE(Placement::replicate(), Placement::partial(ReduceOp::kAvg));
  EXPECT_NE(Placement::tensor_atomic(), Placement::row_atomic());
}

TEST(PlacementTest, BlockAtomicNeedsPositiveBlock) {
  EXPECT_EQ(Placement::block_atomic(0).error().message(),
            "BlockAtomic block size must be positive, got 0");
  EXPECT_EQ(Placement::block_atomic(-3).error().code(), ErrorCode::kInvalidArgument);
}

TEST(PlacementTest, KindsMapToAxisPlacements) {
  EXPECT_EQ(Placement::shard().axis_placement(), AxisPlacement::kShard);
  EXPECT_EQ(Placement::row_atomic().axis_placement(), AxisPlacement::kShard);
  EXPECT_EQ(Placement::block_atomic(32)->axis_placement(), AxisPlacement::kShard);
  EXPECT_EQ(Placement::tensor_atomic().axis_placement(), AxisPlacement::kShard);
  EXPECT_EQ(Placement::replicate().axis_placement(), AxisPlacement::kReplicate);
  EXPECT_EQ(Placement::partial(ReduceOp::kSum).axis_placement(), AxisPlacement::kPartial);
  EXPECT_EQ(Placement::shard().block_size(), 1);
  EXPECT_EQ(Placement::row_atomic().block_size(), 1);
  EXPECT_EQ(Placement::block_atomic(32)->block_size(), 32);
  EXPECT_EQ(Placement::tensor_atomic().block_size(), 0);
  EXPECT_EQ(Placement::partial(ReduceOp::kSum).reduce_op(), ReduceOp::kSum);
}

TEST(PlacementTest, ToStringAndParseRoundTrip) {
  const std::vector<Placement> all = {
      Placement::shard(),        Placement::row_atomic(), Placement::block_atomic(32).value(),
      Placement::tensor_atomic(), Placement::replicate(), Placement::partial(ReduceOp::kAvg),
      Placement::partial(ReduceOp::kSum)};
  EXPECT_EQ(to_string(all),
            "[Shard(0), RowAtomic(), BlockAtomic(32), TensorAtomic(), Replicate(), Partial(avg), "
            "Partial(sum)]");
  for (const Placement& p : all) {
    EXPECT_EQ(parse_placement(to_string(p)).value(), p) << to_string(p);
  }
  EXPECT_EQ(parse_placement_list(to_string(all)).value(), all);
}

TEST(PlacementTest, ParseAcceptsShortForms) {
  EXPECT_EQ(parse_placement("S").value(), Placement::shard());
  EXPECT_EQ(parse_placement(" shard ").value(), Placement::shard());
  EXPECT_EQ(parse_placement("R").value(), Placement::replicate());
  EXPECT_EQ(parse_placement("TA").value(), Placement::tensor_atomic());
  EXPECT_EQ(parse_placement("rowatomic").value(), Placement::row_atomic());
  EXPECT_EQ(parse_placement("BlockAtomic( 32 )").value(), Placement::block_atomic(32).value());
  EXPECT_EQ(parse_placement("P(avg)").value(), Placement::partial(ReduceOp::kAvg));
  EXPECT_EQ(parse_placement("partial(SUM)").value(), Placement::partial(ReduceOp::kSum));
  EXPECT_EQ(parse_placement_list("[R, S]").value(),
            (std::vector<Placement>{Placement::replicate(), Placement::shard()}));
  EXPECT_EQ(parse_placement_list("P(avg),S").value(),
            (std::vector<Placement>{Placement::partial(ReduceOp::kAvg), Placement::shard()}));
  EXPECT_TRUE(parse_placement_list("[]").value().empty());
}

TEST(PlacementTest, ParseErrors) {
  EXPECT_EQ(parse_placement("P").error().message(),
            "placement 'P' needs a reduce op: expected Partial(avg) or Partial(sum)");
  EXPECT_EQ(parse_placement("Partial(max)").error().code(), ErrorCode::kInvalidArgument);
  auto dim1 = parse_placement("Shard(1)");
  EXPECT_EQ(dim1.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(dim1.error().message(),
            "placement 'Shard(1)' is not implemented: only dim-0 sharding is supported, "
            "expected Shard(0)");
  EXPECT_EQ(parse_placement("BlockAtomic(0)").error().message(),
            "BlockAtomic block size must be positive, got 0");
  EXPECT_EQ(parse_placement("BlockAtomic()").error().message(),
            "placement 'BlockAtomic()' needs an integer block size, expected BlockAtomic(b)");
  EXPECT_EQ(parse_placement("Replicate(1)").error().message(),
            "placement 'Replicate(1)' takes no argument, got '1'");
  EXPECT_EQ(parse_placement("Flat(").error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(parse_placement("Flat").error().message(),
            "placement 'Flat' is unknown; expected Shard(0), RowAtomic(), BlockAtomic(b), "
            "TensorAtomic(), Replicate(), Partial(avg) or Partial(sum) (or S, TA, R, P(avg), "
            "P(sum))");
  EXPECT_EQ(parse_placement_list("[R, S").error().message(),
            "placement list '[R, S' has an unclosed '['");
}

TEST(PlacementTest, SpecializeFollowsGroupDtype) {
  // §3.3 _specialize_placements.
  for (const DType d : {DType::kFp32, DType::kBf16, DType::kFp16}) {
    EXPECT_EQ(specialize_placement(Placement::shard(), d), Placement::row_atomic());
  }
  EXPECT_EQ(specialize_placement(Placement::shard(), DType::kFp8),
            Placement::block_atomic(32).value());
  EXPECT_EQ(specialize_placement(Placement::tensor_atomic(), DType::kBf16),
            Placement::tensor_atomic());
  EXPECT_EQ(specialize_placement(Placement::replicate(), DType::kFp8), Placement::replicate());
}

TEST(PlacementTest, LayoutCheckDependsOnTheShardKind) {
  const std::vector<Shape> shapes = {Shape::make({3, 4}).value(), Shape::make({5}).value()};
  auto padded = build_for_row_atomic(shapes, 2);
  ASSERT_TRUE(padded) << padded.error().message();
  EXPECT_TRUE(check_layout_for_placement(*padded, Placement::row_atomic(), ShardLayout::kPadded));
  EXPECT_TRUE(check_layout_for_placement(*padded, Placement::replicate(), ShardLayout::kPadded));
  // Rows of 3x4 are not blocks of 2 rows.
  EXPECT_FALSE(check_layout_for_placement(*padded, Placement::block_atomic(2).value(),
                                          ShardLayout::kPadded));
  const std::vector<std::int64_t> owners = {0, 1};
  auto ta = build_for_tensor_atomic(shapes, 2, owners);
  ASSERT_TRUE(ta) << ta.error().message();
  EXPECT_TRUE(check_layout_for_placement(*ta, Placement::tensor_atomic(), ShardLayout::kPadded));
}

TEST(PlacementRedistributeTest, SupportedChangesAndTheirCollectives) {
  const Placement s = Placement::shard();
  const Placement r = Placement::replicate();
  const Placement p = Placement::partial(ReduceOp::kAvg);
  using V = std::vector<Placement>;
  using Steps = std::vector<RedistributeStep>;
  EXPECT_EQ(plan_redistribute(V{r, s}, V{r, s}).value(), Steps{});
  EXPECT_EQ(plan_redistribute(V{r, r}, V{s, s}).value(),
            (Steps{{0, RedistributeKind::kView}, {1, RedistributeKind::kView}}));
  // §3.2: multi-axis gathers run outer -> inner.
  EXPECT_EQ(plan_redistribute(V{s, s}, V{r, r}).value(),
            (Steps{{0, RedistributeKind::kAllGather}, {1, RedistributeKind::kAllGather}}));
  EXPECT_EQ(plan_redistribute(V{p, s}, V{r, s}).value(),
            (Steps{{0, RedistributeKind::kAllReduce}}));
  EXPECT_EQ(plan_redistribute(V{p, s}, V{s, s}).value(),
            (Steps{{0, RedistributeKind::kReduceScatter}}));
  EXPECT_EQ(plan_redistribute(V{p, p}, V{p, s}).value(),
            (Steps{{1, RedistributeKind::kReduceScatter}}));
  EXPECT_EQ(plan_redistribute(V{r}, V{p}).value(), (Steps{{0, RedistributeKind::kRelabel}}));
  // The project's extension: reduce-scatters over several axes, inner -> outer (the adjoint of
  // the gathers), for the dense parameters of an expert-parallel mesh.
  EXPECT_EQ(plan_redistribute(V{p, p}, V{s, s}).value(),
            (Steps{{1, RedistributeKind::kReduceScatter}, {0, RedistributeKind::kReduceScatter}}));
  EXPECT_EQ(to_string(RedistributeKind::kReduceScatter), "reduce-scatter");
}

TEST(PlacementRedistributeTest, UnsupportedChangesAreNotImplemented) {
  const Placement s = Placement::shard();
  const Placement r = Placement::replicate();
  const Placement p = Placement::partial(ReduceOp::kAvg);
  using V = std::vector<Placement>;
  auto two = plan_redistribute(V{p, p}, V{s, r});
  EXPECT_EQ(two.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(two.error().message(),
            "redistribute from [Partial(avg), Partial(avg)] to [Shard(0), Replicate()] is not "
            "implemented: expected one changed axis unless every change is Replicate->Shard, "
            "every change is Shard->Replicate or every change is Partial->Shard, got 2");
  EXPECT_EQ(plan_redistribute(V{r}, V{Placement::partial(ReduceOp::kSum)}).error().message(),
            "redistribute from [Replicate()] to [Partial(sum)] is not implemented: axis 0 "
            "changes Replicate() -> Partial(sum)");
  EXPECT_FALSE(plan_redistribute(V{s}, V{p}));
  EXPECT_FALSE(plan_redistribute(V{s}, V{Placement::row_atomic()}));
  EXPECT_FALSE(plan_redistribute(V{p}, V{Placement::partial(ReduceOp::kSum)}));
  EXPECT_FALSE(plan_redistribute(V{r, s}, V{s, r}));
  EXPECT_EQ(plan_redistribute(V{r}, V{r, s}).error().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace fsdp

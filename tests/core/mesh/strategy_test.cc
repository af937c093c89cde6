// SPDX-License-Identifier: Apache-2.0
#include "core/mesh/strategy.h"

#include <gtest/gtest.h>

#include <vector>

namespace fsdp {
namespace {

using V = std::vector<Placement>;
const Placement kS = Placement::shard();
const Placement kR = Placement::replicate();
const Placement kP = Placement::partial(ReduceOp::kAvg);
const Placement kTA = Placement::tensor_atomic();

struct Row {
  Strategy strategy;
  const char* mesh;
  V parameter;
  V gradient;
  V optimizer;
};

TEST(StrategyTest, RecipesReproduceTheSection33Table) {
  const std::vector<Row> table = {
      {Strategy::kNoShard, "dp=8", {kR}, {kP}, {kR}},
      {Strategy::kZero1, "dp=8", {kR}, {kP}, {kS}},
      {Strategy::kZero2, "dp=8", {kR}, {kS}, {kS}},
      {Strategy::kZero3, "dp=8", {kS}, {kS}, {kS}},
      {Strategy::kHsdp, "dp_outer=4,dp_inner=64", {kR, kS}, {kP, kS}, {kR, kS}},
      {Strategy::kHfsdp, "dp_outer=4,dp_inner=64", {kR, kS}, {kP, kS}, {kS, kS}},
  };
  for (const Row& row : table) {
    const DeviceMesh mesh = parse_device_mesh(row.mesh).value();
    auto p = make_strategy_placements(row.strategy, mesh);
    ASSERT_TRUE(p) << to_string(row.strategy) << ": " << p.error().message();
    EXPECT_EQ(p->parameter(), row.parameter) << to_string(row.strategy);
    EXPECT_EQ(p->gradient(), row.gradient) << to_string(row.strategy);
    EXPECT_EQ(p->optimizer(), row.optimizer) << to_string(row.strategy);
    EXPECT_EQ(p->mesh(), mesh);
    EXPECT_EQ(p->num_dp_axes(), mesh.ndim());
  }
}

TEST(StrategyTest, TensorAtomicVariantsReplaceShard) {
  const DeviceMesh mesh = parse_device_mesh("dp=4").value();
  EXPECT_EQ(make_strategy_placements(Strategy::kZero1, mesh, /*tensor_atomic=*/true)->optimizer(),
            V{kTA});
  auto zero2 = make_strategy_placements(Strategy::kZero2, mesh, /*tensor_atomic=*/true);
  EXPECT_EQ(zero2->parameter(), V{kR});
  EXPECT_EQ(zero2->gradient(), V{kTA});
  auto zero3 = make_strategy_placements(Strategy::kZero3, mesh, /*tensor_atomic=*/true);
  EXPECT_EQ(zero3->parameter(), V{kTA});
  EXPECT_TRUE(zero3->is_tensor_atomic());
  EXPECT_EQ(make_strategy_placements(Strategy::kNoShard, mesh, /*tensor_atomic=*/true)
                .error()
                .message(),
            "tensor_atomic applies to zero1, zero2 and zero3, got noshard");
  EXPECT_FALSE(make_strategy_placements(Strategy::kHsdp, parse_device_mesh("o=2,i=2").value(),
                                        /*tensor_atomic=*/true));
}

TEST(StrategyTest, MeshAxisCountMustMatch) {
  const DeviceMesh two = parse_device_mesh("dp_outer=2,dp_inner=4").value();
  const DeviceMesh one = parse_device_mesh("dp=8").value();
  auto zero3 = make_strategy_placements(Strategy::kZero3, two);
  EXPECT_EQ(zero3.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(zero3.error().message(),
            "zero3 needs a 1-axis dp mesh, got the 2-axis mesh dp_outer=2,dp_inner=4");
  EXPECT_EQ(make_strategy_placements(Strategy::kHsdp, one).error().message(),
            "hsdp needs a 2-axis dp mesh, got the 1-axis mesh dp=8");
  EXPECT_FALSE(
      make_strategy_placements(Strategy::kHfsdp, parse_device_mesh("a=2,b=2,c=2").value()));
}

// The recipe applies to the DP axes; tp is none of them and ep repeats the innermost placement.
TEST(StrategyTest, ParallelAxesAroundTheRecipe) {
  const std::vector<Row> table = {
      {Strategy::kZero3, "dp=32,tp=8", {kS}, {kS}, {kS}},
      {Strategy::kZero1, "dp=32,tp=8", {kR}, {kP}, {kS}},
      {Strategy::kHsdp, "dp_outer=4,dp_inner=8,tp=8", {kR, kS}, {kP, kS}, {kR, kS}},
      {Strategy::kZero3, "dp=8,ep=8", {kS, kS}, {kS, kS}, {kS, kS}},
      {Strategy::kZero2, "dp=8,ep=8", {kR, kR}, {kS, kS}, {kS, kS}},
      {Strategy::kHfsdp, "dp_outer=2,dp_inner=4,ep=8", {kR, kS, kS}, {kP, kS, kS}, {kS, kS, kS}},
  };
  for (const Row& row : table) {
    const DeviceMesh mesh = parse_device_mesh(row.mesh).value();
    auto p = make_strategy_placements(row.strategy, mesh);
    ASSERT_TRUE(p) << row.mesh << ": " << p.error().message();
    EXPECT_EQ(p->parameter(), row.parameter) << row.mesh;
    EXPECT_EQ(p->gradient(), row.gradient) << row.mesh;
    EXPECT_EQ(p->optimizer(), row.optimizer) << row.mesh;
  }
  EXPECT_EQ(make_strategy_placements(Strategy::kHsdp, parse_device_mesh("dp=8,tp=8").value())
                .error()
                .message(),
            "hsdp needs a 2-axis dp mesh, got the 1-axis mesh dp=8,tp=8 (besides tp)");
  EXPECT_EQ(make_strategy_placements(Strategy::kZero3, parse_device_mesh("tp=8").value(), false)
                .error()
                .message(),
            "zero3 needs a 1-axis dp mesh, got the 0-axis mesh tp=8 (besides tp); for no data "
            "parallelism add dp=1 (dp=1,tp=8)");
}

TEST(StrategyTest, ParseAndToString) {
  for (const Strategy s : {Strategy::kNoShard, Strategy::kZero1, Strategy::kZero2,
                           Strategy::kZero3, Strategy::kHsdp, Strategy::kHfsdp}) {
    EXPECT_EQ(parse_strategy(to_string(s)).value(), s);
  }
  EXPECT_EQ(to_string(Strategy::kNoShard), "noshard");
  EXPECT_EQ(parse_strategy("ZeRO3").value(), Strategy::kZero3);
  EXPECT_EQ(parse_strategy("no-shard").value(), Strategy::kNoShard);
  EXPECT_EQ(parse_strategy("fsdp").error().message(),
            "strategy 'fsdp' is unknown; expected one of noshard, zero1, zero2, zero3, hsdp, "
            "hfsdp");
  EXPECT_EQ(strategy_mesh_ndim(Strategy::kHfsdp), 2);
  EXPECT_EQ(strategy_mesh_ndim(Strategy::kZero1), 1);
}

}  // namespace
}  // namespace fsdp

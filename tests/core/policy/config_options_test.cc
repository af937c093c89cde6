// SPDX-License-Identifier: Apache-2.0
// assemble_config: typed options to an FsdpConfig, from a strategy recipe or explicit placements,
// with the checks in their documented order; config_options_of is its inverse.
#include "core/policy/config_options.h"

#include <gtest/gtest.h>

namespace fsdp {
namespace {

DeviceMesh mesh_of(const char* text) {
  return parse_device_mesh(text).value();
}

TEST(ConfigOptionsTest, DefaultsAreZero3OnOneRankWithTheReferenceDefaults) {
  const ConfigOptions options;
  EXPECT_EQ(options.mesh, mesh_of("dp=1"));
  EXPECT_EQ(assemble_config(options).value(),
            make_fsdp_config(Strategy::kZero3, mesh_of("dp=1"), FsdpOptions{}).value());
}

TEST(ConfigOptionsTest, OneAxisMeshNamesItsAxis) {
  EXPECT_EQ(one_axis_mesh(8), mesh_of("dp=8"));
  EXPECT_EQ(one_axis_mesh(3, "x"), mesh_of("x=3"));
}

TEST(ConfigOptionsTest, EveryFieldReachesTheConfig) {
  ConfigOptions o{.mesh = mesh_of("o=2,i=4"), .strategy = Strategy::kHfsdp};
  o.block_size = 4;
  o.microbatches = 3;
  o.grad_scale = 0.5;
  o.recompute = RecomputePolicy::parse("selective-layer:2").value();
  o.mixed_precision = MixedPrecisionPolicy::make(DType::kBf16, std::nullopt, DType::kBf16).value();
  o.optimizer = OptimizerPolicy::make(OptimizerKind::kSgd).value();
  o.schedule =
      SchedulePolicy::make(PrefetchPolicy::none(), PrefetchPolicy::next_units(2).value(), 3, true)
          .value();
  const FsdpConfig c = assemble_config(o).value();
  EXPECT_EQ(c.placements(), make_strategy_placements(Strategy::kHfsdp, o.mesh).value());
  EXPECT_EQ(c.block_size(), 4);
  EXPECT_EQ(c.num_microbatches(), 3);
  EXPECT_EQ(c.grad_scale(), 0.5);
  EXPECT_EQ(c.recompute(), RecomputePolicy::parse("selective-layer:2").value());
  EXPECT_EQ(c.mixed_precision(), o.mixed_precision);
  EXPECT_EQ(c.optimizer(), o.optimizer);
  EXPECT_EQ(c.schedule(), o.schedule);
  EXPECT_EQ(config_options_of(c).placements, c.placements());
  EXPECT_EQ(assemble_config(config_options_of(c)).value(), c);
}

TEST(ConfigOptionsTest, TensorAtomicTakesTheTensorAtomicRecipe) {
  const ConfigOptions o{
      .mesh = mesh_of("dp=4"), .strategy = Strategy::kZero2, .tensor_atomic = true};
  EXPECT_EQ(assemble_config(o)->placements(),
            make_strategy_placements(Strategy::kZero2, o.mesh, true).value());
}

TEST(ConfigOptionsTest, ExplicitPlacementsReplaceTheStrategy) {
  const DeviceMesh mesh = mesh_of("dp=4");
  const Placements zero1 = make_strategy_placements(Strategy::kZero1, mesh).value();
  // The strategy (hsdp would need a 2-axis mesh) is not read.
  const ConfigOptions o{.mesh = mesh, .strategy = Strategy::kHsdp, .placements = zero1};
  EXPECT_EQ(assemble_config(o)->placements(), zero1);
}

TEST(ConfigOptionsTest, PlacementsOfAnotherMeshAreAnError) {
  const ConfigOptions o{
      .mesh = mesh_of("dp=8"),
      .placements = make_strategy_placements(Strategy::kZero3, mesh_of("dp=4")).value()};
  const Error e = assemble_config(o).error();
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.message(),
            "placements: expected placements validated against the mesh dp=8, got placements "
            "for the mesh dp=4");
}

TEST(ConfigOptionsTest, TheStrategyIsCheckedBeforeTheOptions) {
  ConfigOptions o{.mesh = mesh_of("dp=8"), .strategy = Strategy::kHsdp};
  o.block_size = 0;
  EXPECT_EQ(assemble_config(o).error().message(),
            "hsdp needs a 2-axis dp mesh, got the 1-axis mesh dp=8");
  o.strategy = Strategy::kZero3;
  EXPECT_EQ(assemble_config(o).error().message(), "block size must be >= 1, got 0");
  o.block_size = 1;
  o.mesh = mesh_of("o=2,i=2");
  o.strategy = Strategy::kHfsdp;
  o.shard_layout = ShardLayout::kUnpadded;
  EXPECT_EQ(assemble_config(o).error().code(), ErrorCode::kFailedPrecondition);
}

}  // namespace
}  // namespace fsdp

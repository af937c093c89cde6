// SPDX-License-Identifier: Apache-2.0
#include "core/policy/fsdp_config.h"

#include <gtest/gtest.h>

#include <limits>

namespace fsdp {
namespace {

DeviceMesh mesh_of(const char* text) { return parse_device_mesh(text).value(); }

TEST(FsdpConfigTest, DefaultsAreTheReferenceDefaults) {
  auto config = make_fsdp_config(Strategy::kZero3, mesh_of("dp=8"), FsdpOptions{});
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->mesh(), mesh_of("dp=8"));
  EXPECT_EQ(config->placements(),
            make_strategy_placements(Strategy::kZero3, mesh_of("dp=8")).value());
  EXPECT_EQ(config->shard_layout(), ShardLayout::kPadded);
  EXPECT_EQ(config->block_size(), 1);
  EXPECT_EQ(config->num_microbatches(), 1);
  EXPECT_EQ(config->grad_scale(), 1.0);
  EXPECT_TRUE(config->recompute().is_none());
  EXPECT_EQ(config->mixed_precision(), MixedPrecisionPolicy());
  EXPECT_EQ(config->optimizer(), OptimizerPolicy());
  EXPECT_EQ(config->schedule(), SchedulePolicy());
  EXPECT_EQ(to_string(*config),
            "mesh=dp=8 dp_axes=[dp] parameter=[Shard(0)] gradient=[Shard(0)] "
            "optimizer=[Shard(0)] shard_layout=padded block_size=1 microbatches=1 grad_scale=1 "
            "recompute=none main_params=fp32 main_grads=grad compute=param "
            "optimizer=adam(state=fp32) forward=next(1) backward=next(1) "
            "max_inflight_all_gathers=unlimited streams=separate");
}

TEST(FsdpConfigTest, IsLastMarksOnlyTheFinalMicrobatch) {
  FsdpOptions options;
  options.num_microbatches = 3;
  auto config = make_fsdp_config(Strategy::kHsdp, mesh_of("o=2,i=4"), options).value();
  EXPECT_FALSE(config.is_last_microbatch(0));
  EXPECT_FALSE(config.is_last_microbatch(1));
  EXPECT_TRUE(config.is_last_microbatch(2));
  options.num_microbatches = 1;
  EXPECT_TRUE(make_fsdp_config(Strategy::kZero1, mesh_of("dp=2"), options)
                  ->is_last_microbatch(0));
}

TEST(FsdpConfigTest, ValidatesEveryField) {
  const auto error = [](FsdpOptions options) {
    return make_fsdp_config(Strategy::kZero3, mesh_of("dp=8"), options).error().message();
  };
  FsdpOptions o;
  o.block_size = 0;
  EXPECT_EQ(error(o), "block size must be >= 1, got 0");
  o = FsdpOptions{};
  o.num_microbatches = 0;
  EXPECT_EQ(error(o), "microbatch count must be >= 1, got 0");
  o = FsdpOptions{};
  o.grad_scale = 0.0;
  EXPECT_EQ(error(o), "grad_scale must be finite and > 0, got 0");
  o.grad_scale = -0.5;
  EXPECT_EQ(error(o), "grad_scale must be finite and > 0, got -0.5");
  o.grad_scale = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(error(o), "grad_scale must be finite and > 0, got nan");
  o.grad_scale = std::numeric_limits<double>::infinity();
  EXPECT_EQ(error(o), "grad_scale must be finite and > 0, got inf");
  o.grad_scale = 0.125;  // 1 / ep_size for expert parameters
  EXPECT_TRUE(make_fsdp_config(Strategy::kZero3, mesh_of("dp=8"), o));
}

TEST(FsdpConfigTest, UnpaddedNeedsAOneAxisDpMesh) {
  FsdpOptions options;
  options.shard_layout = ShardLayout::kUnpadded;
  EXPECT_TRUE(make_fsdp_config(Strategy::kZero3, mesh_of("dp=8"), options));
  auto hsdp = make_fsdp_config(Strategy::kHsdp, mesh_of("dp_outer=2,dp_inner=4"), options);
  EXPECT_EQ(hsdp.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(hsdp.error().message(),
            "shard layout unpadded on a 2-axis dp mesh (dp_outer=2,dp_inner=4) is not "
            "implemented: uneven collectives need a 1-D dp mesh");
}

TEST(FsdpConfigTest, StrategyErrorsPropagate) {
  EXPECT_EQ(make_fsdp_config(Strategy::kHfsdp, mesh_of("dp=8"), FsdpOptions{}).error().message(),
            "hfsdp needs a 2-axis dp mesh, got the 1-axis mesh dp=8");
}

TEST(FsdpConfigTest, CarriesThePolicies) {
  FsdpOptions options;
  options.recompute = RecomputePolicy::full();
  options.grad_scale = 8.0;
  options.mixed_precision =
      MixedPrecisionPolicy::make(DType::kFp32, DType::kFp32, std::nullopt).value();
  options.optimizer = OptimizerPolicy::make(OptimizerKind::kSgdMomentum).value();
  options.schedule = SchedulePolicy::make(PrefetchPolicy::none(), PrefetchPolicy(), 2,
                                          /*unify_communication_stream=*/true)
                         .value();
  auto placements = make_strategy_placements(Strategy::kZero2, mesh_of("dp=4")).value();
  auto config = FsdpConfig::make(placements, options);
  ASSERT_TRUE(config);
  EXPECT_TRUE(config->recompute().is_full());
  EXPECT_EQ(config->grad_scale(), 8.0);
  EXPECT_EQ(config->optimizer().num_states(), 1);
  EXPECT_TRUE(config->schedule().unify_communication_stream());
  EXPECT_EQ(config->mixed_precision().main_grads_dtype(), DType::kFp32);
  EXPECT_EQ(*config, FsdpConfig::make(placements, options).value());
  options.recompute = RecomputePolicy{};
  EXPECT_FALSE(*config == FsdpConfig::make(placements, options).value());
}

}  // namespace
}  // namespace fsdp

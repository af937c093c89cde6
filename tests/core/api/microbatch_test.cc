// SPDX-License-Identifier: Apache-2.0
// microbatch scopes and the step's Schedule: wrapping every module plus N microbatch scopes
// gives exactly build_schedule's Schedule for the equivalent FsdpConfig; the is_last flag; every
// misuse is a one-line error; a scope left by an exception is not counted.
#include "core/api/microbatch.h"

#include "core/base/strings.h"
#include "tests/core/api/api_test_util.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace fsdp {
namespace {

using testing::decoder_tree;
using testing::error_of;
using testing::mesh_of;
using testing::run_microbatches;
using testing::three_group_model;
using testing::zero3_placements;

// Opens a scope on `ctx`, wraps every module children-first with these arguments and closes it.
void wrap_every_module(FsdpContext& ctx, const Placements& placements,
                       const FsdpOptions& options) {
  auto scope = fully_shard_context(ctx);
  ASSERT_TRUE(scope.has_value()) << scope.error().message();
  const std::vector<Unit>& modules = ctx.modules().units();
  for (auto it = modules.rbegin(); it != modules.rend(); ++it) {
    const Status s =
        fully_shard(it->name(), placements.mesh(), placements, options.mixed_precision,
                    options.grad_scale, options.schedule, options.shard_layout);
    ASSERT_TRUE(s.has_value()) << s.error().message();
  }
  const Status closed = scope->close();
  ASSERT_TRUE(closed.has_value()) << closed.error().message();
}

// A finalised context on the §4.13 model with ZeRO-3 on dp=2.
void finalise_three_groups(FsdpContext& ctx) {
  wrap_every_module(ctx, zero3_placements(mesh_of("dp=2")), FsdpOptions{});
}

struct Case {
  Strategy strategy;
  std::string mesh;
  std::int64_t microbatches;
  ShardLayout layout;
  double grad_scale;
  bool no_prefetch;
  bool recompute;
};

TEST(MicrobatchTest, WrappingEveryModuleGivesBuildScheduleOfTheEquivalentConfig) {
  const std::vector<Case> cases = {
      {Strategy::kZero3, "dp=4", 1, ShardLayout::kPadded, 1.0, false, false},
      {Strategy::kZero3, "dp=4", 3, ShardLayout::kUnpadded, 0.5, true, true},
      {Strategy::kZero1, "dp=2", 2, ShardLayout::kPadded, 2.0, false, false},
      {Strategy::kHsdp, "dp_outer=2,dp_inner=2", 3, ShardLayout::kPadded, 1.0, false, false},
      {Strategy::kHfsdp, "dp_outer=2,dp_inner=2", 4, ShardLayout::kPadded, 0.25, true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(str_cat(to_string(c.strategy), " ", c.mesh, " microbatches=", c.microbatches));
    const DeviceMesh mesh = mesh_of(c.mesh);
    const Placements placements = make_strategy_placements(c.strategy, mesh).value();
    FsdpOptions options;
    options.shard_layout = c.layout;
    options.grad_scale = c.grad_scale;
    options.recompute = c.recompute ? RecomputePolicy::full_all_units() : RecomputePolicy{};
    options.optimizer = OptimizerPolicy::make(OptimizerKind::kSgdMomentum, DType::kFp32).value();
    options.mixed_precision =
        MixedPrecisionPolicy::make(DType::kFp32, DType::kFp32, std::nullopt).value();
    if (c.no_prefetch) {
      options.schedule =
          SchedulePolicy::make(PrefetchPolicy::none(), PrefetchPolicy::none(), 0, false).value();
    }
    const Workload workload{.seq_len = 256, .micro_batch_size = 2};
    FsdpContext ctx(decoder_tree(), workload,
                    FsdpContextOptions{.recompute = c.recompute, .optimizer = options.optimizer});
    wrap_every_module(ctx, placements, options);
    run_microbatches(ctx, c.microbatches);
    options.num_microbatches = c.microbatches;

    const FsdpConfig expected_config = FsdpConfig::make(placements, options).value();
    const auto config = ctx.config();
    ASSERT_TRUE(config.has_value()) << config.error().message();
    EXPECT_EQ(*config, expected_config);
    EXPECT_EQ(*ctx.unit_model(), decoder_tree());

    const auto schedule = ctx.schedule();
    ASSERT_TRUE(schedule.has_value()) << schedule.error().message();
    const Schedule expected = build_schedule(decoder_tree(), expected_config, workload).value();
    EXPECT_TRUE(*schedule == expected);
    EXPECT_EQ(schedule->collective_summary(), expected.collective_summary());
  }
}

TEST(MicrobatchTest, MicrobatchCountChangesTheSchedule) {
  // Guards the test above: the microbatch count really reaches the schedule.
  FsdpContext one(three_group_model());
  finalise_three_groups(one);
  FsdpContext three(three_group_model());
  finalise_three_groups(three);
  run_microbatches(three, 3);
  EXPECT_EQ(one.config()->num_microbatches(), 1);
  EXPECT_EQ(three.config()->num_microbatches(), 3);
  EXPECT_FALSE(*one.schedule() == *three.schedule());
  EXPECT_EQ(three.schedule()->collective_summary().at("reduce-scatter").at("dp"), 9);
}

TEST(MicrobatchTest, NoMicrobatchScopeMeansOneLastMicrobatch) {
  FsdpContext ctx(three_group_model());
  finalise_three_groups(ctx);
  EXPECT_EQ(ctx.num_microbatches(), 0);
  EXPECT_TRUE(ctx.is_last_microbatch());
  const auto config = ctx.config();
  ASSERT_TRUE(config.has_value()) << config.error().message();
  EXPECT_EQ(config->num_microbatches(), 1);
}

TEST(MicrobatchTest, IsLastFlagHoldsInsideTheScopeOnly) {
  FsdpContext ctx(three_group_model());
  finalise_three_groups(ctx);
  {
    auto mb = microbatch(ctx, /*is_last=*/false);
    ASSERT_TRUE(mb.has_value());
    EXPECT_FALSE(ctx.is_last_microbatch());
    EXPECT_FALSE(mb->is_last());
  }
  EXPECT_TRUE(ctx.is_last_microbatch());
  EXPECT_EQ(ctx.num_microbatches(), 1);
  {
    auto mb = microbatch(ctx, /*is_last=*/true);
    ASSERT_TRUE(mb.has_value());
    EXPECT_TRUE(ctx.is_last_microbatch());
    EXPECT_EQ(mb->index(), 1);
  }
  EXPECT_EQ(ctx.num_microbatches(), 2);
}

TEST(MicrobatchTest, MicrobatchBeforeFinalisationIsAnError) {
  FsdpContext ctx(three_group_model());
  auto scope = fully_shard_context(ctx);
  ASSERT_TRUE(scope.has_value());
  const auto mb = microbatch(ctx, /*is_last=*/true);
  EXPECT_EQ(error_of(mb),
            "microbatch 0 (is_last=true) of model 'three_groups': requires a finalised context: "
            "expected the fully_shard_context scope exited, got a context not finalised");
  EXPECT_EQ(mb.error().code(), ErrorCode::kFailedPrecondition);
}

TEST(MicrobatchTest, NestedMicrobatchScopesAreAnError) {
  FsdpContext ctx(three_group_model());
  finalise_three_groups(ctx);
  auto outer = microbatch(ctx, /*is_last=*/false);
  ASSERT_TRUE(outer.has_value());
  EXPECT_EQ(error_of(microbatch(ctx, /*is_last=*/true)),
            "microbatch 0 (is_last=true) of model 'three_groups': expected no open microbatch "
            "scope, got one still open (microbatch scopes do not nest)");
  // The failed attempt changed nothing: the outer scope's flag still holds.
  EXPECT_FALSE(ctx.is_last_microbatch());
  EXPECT_EQ(error_of(ctx.config()),
            "fsdp context of model 'three_groups': step: expected every microbatch scope "
            "closed, got microbatch 0 still open");
}

TEST(MicrobatchTest, MicrobatchAfterTheLastIsAnError) {
  FsdpContext ctx(three_group_model());
  finalise_three_groups(ctx);
  run_microbatches(ctx, 2);
  EXPECT_EQ(error_of(microbatch(ctx, /*is_last=*/false)),
            "microbatch 2 (is_last=false) of model 'three_groups': expected no microbatch after "
            "the last one, got one after microbatch 1 (is_last=true); one context builds one "
            "optimizer step");
  EXPECT_EQ(ctx.num_microbatches(), 2);
}

TEST(MicrobatchTest, StepWithoutALastMicrobatchIsAnError) {
  FsdpContext ctx(three_group_model());
  finalise_three_groups(ctx);
  for (int i = 0; i < 2; ++i) {
    auto mb = microbatch(ctx, /*is_last=*/false);
    ASSERT_TRUE(mb.has_value());
  }
  EXPECT_EQ(error_of(ctx.schedule()),
            "fsdp context of model 'three_groups': step: expected a last microbatch "
            "(is_last=true), got 2 microbatches with is_last=false");
}

TEST(MicrobatchTest, ScopeLeftByAnExceptionIsNotCounted) {
  FsdpContext ctx(three_group_model());
  finalise_three_groups(ctx);
  EXPECT_THROW(
      {
        auto mb = microbatch(ctx, /*is_last=*/true);
        ASSERT_TRUE(mb.has_value());
        throw std::runtime_error("backward failed");
      },
      std::runtime_error);
  EXPECT_EQ(ctx.num_microbatches(), 0);
  EXPECT_TRUE(ctx.is_last_microbatch());
  // The step can still be run: the failed microbatch neither counted nor ended it.
  run_microbatches(ctx, 2);
  EXPECT_EQ(ctx.config()->num_microbatches(), 2);
}

TEST(MicrobatchTest, ScheduleReportsBuildErrorsWithTheContext) {
  FsdpContext ctx(three_group_model(), Workload{.seq_len = 0, .micro_batch_size = 1});
  finalise_three_groups(ctx);
  const std::string message = error_of(ctx.schedule());
  EXPECT_EQ(message.rfind("fsdp context of model 'three_groups': ", 0), 0u) << message;
  EXPECT_NE(message.find("seq"), std::string::npos) << message;
}

}  // namespace
}  // namespace fsdp

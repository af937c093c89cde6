// SPDX-License-Identifier: Apache-2.0
// fully_shard: every error path (one line naming the module and the expected and actual value)
// and the ownership rule that children are wrapped before their ancestors.
#include "core/api/fully_shard.h"

#include "tests/core/api/api_test_util.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace fsdp {
namespace {

using testing::decoder_tree;
using testing::error_of;
using testing::mesh_of;
using testing::zero3_placements;

const char kSameArguments[] =
    "; not implemented: one FsdpConfig per context, so every fully_shard call takes the same "
    "arguments";

// A context on the decoder tree with an open scope; dp=2 ZeRO-3 arguments at hand.
class FullyShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto scope = fully_shard_context(ctx_);
    ASSERT_TRUE(scope.has_value()) << scope.error().message();
    scope_.emplace(std::move(scope).value());
  }

  // The error of fully_shard(module) with the default arguments, or "" on success.
  std::string wrap_error(const std::string& module) {
    const Status s = fully_shard(module, mesh_, placements_);
    return s.has_value() ? "" : s.error().message();
  }

  FsdpContext ctx_{decoder_tree()};
  std::optional<FullyShardScope> scope_;
  DeviceMesh mesh_ = mesh_of("dp=2");
  Placements placements_ = zero3_placements(mesh_);
};

TEST_F(FullyShardTest, OutsideAScopeIsAnError) {
  ASSERT_FALSE(scope_->close().has_value());  // nothing wrapped yet: finalisation fails
  const Status s = fully_shard("embed", mesh_, placements_);
  EXPECT_EQ(error_of(s),
            "fully_shard('embed'): must run inside fully_shard_context: expected an active "
            "scope, got none");
  EXPECT_EQ(s.error().code(), ErrorCode::kFailedPrecondition);
}

TEST_F(FullyShardTest, ExplicitContextMustBeTheActiveOne) {
  FsdpContext other(testing::three_group_model());
  EXPECT_EQ(error_of(fully_shard(other, "R", mesh_, placements_)),
            "fully_shard('R'): must run inside fully_shard_context of this context: expected "
            "the scope of model 'three_groups', got the scope of model 'decoder'");
  EXPECT_TRUE(fully_shard(ctx_, "embed", mesh_, placements_).has_value());
  EXPECT_EQ(ctx_.wrapped_modules(), (std::vector<std::string>{"embed"}));
}

TEST_F(FullyShardTest, UnknownModuleIsAnError) {
  EXPECT_EQ(wrap_error("layers.7"),
            "fully_shard('layers.7'): module: expected one of the 10 modules of model "
            "'decoder', got an unknown name");
  EXPECT_EQ(wrap_error(std::string("bad\nname")),
            "fully_shard('bad?name'): module: expected one of the 10 modules of model "
            "'decoder', got an unknown name");
}

TEST_F(FullyShardTest, WrappingTwiceIsAnError) {
  ASSERT_EQ(wrap_error("layers.0"), "");
  EXPECT_EQ(wrap_error("layers.0"),
            "fully_shard('layers.0'): expected a module not yet wrapped, got one already wrapped "
            "by fully_shard");
}

TEST_F(FullyShardTest, WrappingAChildAfterItsAncestorIsAnError) {
  ASSERT_EQ(wrap_error("layers.0"), "");
  ASSERT_EQ(wrap_error("model"), "");  // takes embed, layers.1 and head
  EXPECT_EQ(wrap_error("layers.1.mlp"),
            "fully_shard('layers.1.mlp'): parameter 'layers.1.mlp.w' of module 'layers.1.mlp': "
            "expected an unowned parameter, got one owned by 'model', wrapped earlier (wrap "
            "modules before their ancestors)");
  // The container "layers" has no parameters itself, but its subtree holds layers.1's, which
  // the root owns.
  EXPECT_NE(wrap_error("layers").find("parameter 'layers.1.norm' of module 'layers.1'"),
            std::string::npos);
  EXPECT_EQ(ctx_.wrapped_modules(), (std::vector<std::string>{"layers.0", "model"}));
}

TEST_F(FullyShardTest, ParameterlessModuleMayBeWrappedAfterItsAncestor) {
  FsdpContext tree_ctx(Model::make("t", {testing::module_of("root", Unit::kNoParent,
                                                            {testing::make_param("root.b", {4})}),
                                         testing::module_of("act", 0, {}, 50)})
                           .value());
  scope_.reset();  // the decoder scope fails to finalise (nothing wrapped); open another
  auto scope = fully_shard_context(tree_ctx);
  ASSERT_TRUE(scope.has_value());
  ASSERT_TRUE(fully_shard("root", mesh_, placements_).has_value());
  ASSERT_TRUE(fully_shard("act", mesh_, placements_).has_value());
  ASSERT_TRUE(scope->close().has_value());
  const auto units = tree_ctx.unit_model();
  ASSERT_TRUE(units.has_value());
  ASSERT_EQ(units->num_units(), 2);
  EXPECT_EQ(units->units()[1].name(), "act");
  EXPECT_EQ(units->units()[1].flops().matmul, 50);
  EXPECT_EQ(units->units()[0].flops().matmul, 0);
}

TEST_F(FullyShardTest, PlacementsForAnotherMeshAreAnError) {
  const DeviceMesh four = mesh_of("dp=4");
  const Status s = fully_shard("embed", four, placements_);
  EXPECT_EQ(error_of(s),
            "fully_shard('embed'): placements: expected placements validated against the mesh "
            "dp=4, got placements for the mesh dp=2");
  EXPECT_EQ(s.error().code(), ErrorCode::kInvalidArgument);
}

TEST_F(FullyShardTest, InvalidGradScaleIsAnErrorNamingTheModule) {
  const std::string message =
      error_of(fully_shard("embed", mesh_, placements_, {}, /*grad_scale=*/-1.0));
  EXPECT_EQ(message.rfind("fully_shard('embed'): ", 0), 0u) << message;
  EXPECT_NE(message.find("grad_scale"), std::string::npos) << message;
  EXPECT_NE(message.find("-1"), std::string::npos) << message;
  EXPECT_TRUE(ctx_.wrapped_modules().empty());
}

TEST_F(FullyShardTest, UnpaddedOnATwoAxisMeshIsAnError) {
  const DeviceMesh mesh = mesh_of("dp_outer=2,dp_inner=2");
  const Placements hsdp = make_strategy_placements(Strategy::kHsdp, mesh).value();
  const Status s = fully_shard("embed", mesh, hsdp, {}, 1.0, {}, ShardLayout::kUnpadded);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(s.error().message().rfind("fully_shard('embed'): ", 0), 0u) << s.error().message();
}

TEST_F(FullyShardTest, ArgumentsDifferingFromTheFirstCallAreNotImplemented) {
  ASSERT_EQ(wrap_error("embed"), "");
  const DeviceMesh four = mesh_of("dp=4");
  EXPECT_EQ(error_of(fully_shard("head", four, zero3_placements(four))),
            std::string("fully_shard('head'): mesh: expected dp=2 (as for 'embed'), got dp=4") +
                kSameArguments);
  const Placements zero2 = make_strategy_placements(Strategy::kZero2, mesh_).value();
  EXPECT_EQ(error_of(fully_shard("head", mesh_, zero2)),
            "fully_shard('head'): placements: expected " + to_string(placements_) +
                " (as for 'embed'), got " + to_string(zero2) + kSameArguments);
  const MixedPrecisionPolicy bf16_main =
      MixedPrecisionPolicy::make(DType::kBf16, std::nullopt, std::nullopt).value();
  EXPECT_EQ(error_of(fully_shard("head", mesh_, placements_, bf16_main)),
            "fully_shard('head'): mixed_precision_policy: expected " +
                to_string(MixedPrecisionPolicy{}) + " (as for 'embed'), got " +
                to_string(bf16_main) + kSameArguments);
  EXPECT_EQ(error_of(fully_shard("head", mesh_, placements_, {}, 0.5)),
            std::string("fully_shard('head'): grad_scale: expected 1 (as for 'embed'), got 0.5") +
                kSameArguments);
  const SchedulePolicy no_prefetch =
      SchedulePolicy::make(PrefetchPolicy::none(), PrefetchPolicy::none(), 0, false).value();
  EXPECT_EQ(error_of(fully_shard("head", mesh_, placements_, {}, 1.0, no_prefetch)),
            "fully_shard('head'): schedule_policy: expected " + to_string(SchedulePolicy{}) +
                " (as for 'embed'), got " + to_string(no_prefetch) + kSameArguments);
  EXPECT_EQ(error_of(fully_shard("head", mesh_, placements_, {}, 1.0, {}, ShardLayout::kUnpadded)),
            std::string("fully_shard('head'): shard_layout: expected padded (as for 'embed'), "
                        "got unpadded") +
                kSameArguments);
  // None of the failed calls wrapped anything.
  EXPECT_EQ(ctx_.wrapped_modules(), (std::vector<std::string>{"embed"}));
}

}  // namespace
}  // namespace fsdp

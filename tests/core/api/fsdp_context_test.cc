// SPDX-License-Identifier: Apache-2.0
// FsdpContext and fully_shard_context: the current context inside and outside a scope, nesting,
// finalisation on normal exit and not on exception unwinding, finalisation errors, the unit
// tree built from the wrapped modules and the §4.1.3 orders.
#include "core/api/fsdp_context.h"

#include "tests/core/api/api_test_util.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace fsdp {
namespace {

using testing::decoder_tree;
using testing::make_param;
using testing::error_of;
using testing::mesh_of;
using testing::module_of;
using testing::three_group_model;
using testing::zero3_placements;

using Names = std::vector<std::string>;

// Wraps `names` in order inside one scope of `ctx` and closes it.
Status wrap_all(FsdpContext& ctx, const Names& names, const DeviceMesh& mesh) {
  FSDP_TRY(FullyShardScope scope, fully_shard_context(ctx));
  const Placements placements = zero3_placements(mesh);
  for (const std::string& n : names) {
    FSDP_RETURN_IF_ERROR(fully_shard(n, mesh, placements));
  }
  return scope.close();
}

// Wraps `module` of the active context with ZeRO-3 on dp=2.
void wrap_one(const std::string& module) {
  const DeviceMesh mesh = mesh_of("dp=2");
  const Status s = fully_shard(module, mesh, zero3_placements(mesh));
  ASSERT_TRUE(s.has_value()) << s.error().message();
}

TEST(FsdpContextTest, CurrentContextIsSetOnlyInsideTheScope) {
  FsdpContext ctx(three_group_model());
  EXPECT_EQ(current_fully_shard_context(), nullptr);
  {
    auto scope = fully_shard_context(ctx);
    ASSERT_TRUE(scope.has_value()) << scope.error().message();
    EXPECT_EQ(current_fully_shard_context(), &ctx);
    EXPECT_EQ(&scope->context(), &ctx);
    wrap_one("R");
    EXPECT_FALSE(ctx.is_finalized());
  }
  EXPECT_EQ(current_fully_shard_context(), nullptr);
  EXPECT_TRUE(ctx.is_finalized());
}

TEST(FsdpContextTest, ScopeFinalisesOnNormalExit) {
  FsdpContext ctx(three_group_model());
  {
    auto scope = fully_shard_context(ctx);
    ASSERT_TRUE(scope.has_value());
    wrap_one("L0");
    wrap_one("L1");
    wrap_one("R");
    const auto early = ctx.unit_model();
    ASSERT_FALSE(early.has_value());
    EXPECT_NE(early.error().message().find("scope is still open"), std::string::npos)
        << early.error().message();
  }
  auto units = ctx.unit_model();
  ASSERT_TRUE(units.has_value()) << units.error().message();
  EXPECT_EQ(*units, three_group_model());
  EXPECT_EQ(ctx.wrapped_modules(), (Names{"L0", "L1", "R"}));
}

TEST(FsdpContextTest, ScopeDoesNotFinaliseOnExceptionUnwinding) {
  FsdpContext ctx(three_group_model());
  EXPECT_THROW(
      {
        auto scope = fully_shard_context(ctx);
        ASSERT_TRUE(scope.has_value());
        wrap_one("R");
        throw std::runtime_error("model construction failed");
      },
      std::runtime_error);
  EXPECT_EQ(current_fully_shard_context(), nullptr);
  EXPECT_FALSE(ctx.is_finalized());
  EXPECT_EQ(error_of(ctx.unit_model()),
            "fsdp context of model 'three_groups': expected a finalised context, got one whose "
            "fully_shard_context scope exited by an exception");
  // The wrapped module stays wrapped, and a new scope can finish the construction.
  auto again = fully_shard_context(ctx);
  ASSERT_TRUE(again.has_value()) << again.error().message();
  const DeviceMesh mesh = mesh_of("dp=2");
  const Status twice = fully_shard("R", mesh, zero3_placements(mesh));
  ASSERT_FALSE(twice.has_value());
  EXPECT_NE(twice.error().message().find("already wrapped"), std::string::npos);
  EXPECT_TRUE(again->close().has_value());
  EXPECT_TRUE(ctx.is_finalized());
}

TEST(FsdpContextTest, NestedScopesAreAnError) {
  FsdpContext outer(three_group_model());
  FsdpContext inner(decoder_tree());
  auto scope = fully_shard_context(outer);
  ASSERT_TRUE(scope.has_value());
  const auto nested = fully_shard_context(inner);
  ASSERT_FALSE(nested.has_value());
  EXPECT_EQ(nested.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(nested.error().message(),
            "fully_shard_context for model 'decoder': does not support nesting: expected no "
            "active scope, got the scope of model 'three_groups'");
  const auto same = fully_shard_context(outer);
  ASSERT_FALSE(same.has_value());
  // The failed attempts leave the outer scope active.
  EXPECT_EQ(current_fully_shard_context(), &outer);
}

TEST(FsdpContextTest, FinalisedContextCannotBeReopened) {
  FsdpContext ctx(three_group_model());
  ASSERT_TRUE(wrap_all(ctx, {"R"}, mesh_of("dp=2")).has_value());
  EXPECT_EQ(error_of(fully_shard_context(ctx)),
            "fully_shard_context for model 'three_groups': expected a context not yet "
            "finalised, got a finalised one");
}

TEST(FsdpContextTest, CloseTwiceIsAnError) {
  FsdpContext ctx(three_group_model());
  auto scope = fully_shard_context(ctx);
  ASSERT_TRUE(scope.has_value());
  wrap_one("R");
  ASSERT_TRUE(scope->close().has_value());
  EXPECT_EQ(current_fully_shard_context(), nullptr);
  EXPECT_EQ(error_of(scope->close()),
            "fully_shard_context: expected an open scope, got one already closed");
}

TEST(FsdpContextTest, MovedScopeKeepsTheContextActive) {
  FsdpContext ctx(three_group_model());
  auto scope = fully_shard_context(ctx);
  ASSERT_TRUE(scope.has_value());
  {
    FullyShardScope moved = std::move(scope).value();
    EXPECT_EQ(current_fully_shard_context(), &ctx);
    wrap_one("R");
  }
  // Only the moved-to scope finalised; the moved-from one inside `scope` does nothing.
  EXPECT_TRUE(ctx.is_finalized());
  EXPECT_EQ(current_fully_shard_context(), nullptr);
}

TEST(FsdpContextTest, AccessorsBeforeAnyScopeSayTheContextWasNeverOpened) {
  const FsdpContext ctx(three_group_model());
  EXPECT_EQ(error_of(ctx.schedule()),
            "fsdp context of model 'three_groups': expected a finalised context, got one never "
            "opened by fully_shard_context");
}

TEST(FsdpContextTest, ScopeWithoutFullyShardFailsToFinalise) {
  FsdpContext ctx(three_group_model());
  auto scope = fully_shard_context(ctx);
  ASSERT_TRUE(scope.has_value());
  EXPECT_EQ(error_of(scope->close()),
            "fsdp context of model 'three_groups': expected at least one fully_shard call "
            "before the fully_shard_context scope ends, got none");
  EXPECT_FALSE(ctx.is_finalized());
}

TEST(FsdpContextTest, ParametersOutsideEveryWrappedModuleAreAnError) {
  FsdpContext ctx(decoder_tree());
  const Status closed = wrap_all(ctx, {"layers.0", "layers.1", "head"}, mesh_of("dp=2"));
  ASSERT_FALSE(closed.has_value());
  EXPECT_EQ(closed.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(closed.error().message(),
            "fsdp context of model 'decoder': module 'embed' (1 parameters, 0 matmul FLOPs per "
            "token): expected it or an ancestor to be wrapped by fully_shard, got none wrapped "
            "(the reference leaves such parameters unsharded and unreduced, which the schedule "
            "IR does not model)");
}

TEST(FsdpContextTest, FinaliseErrorFromTheDestructorIsReportedLater) {
  FsdpContext ctx(decoder_tree());
  {
    auto scope = fully_shard_context(ctx);
    ASSERT_TRUE(scope.has_value());
    wrap_one("head");
  }
  const auto schedule = ctx.schedule();
  ASSERT_FALSE(schedule.has_value());
  EXPECT_EQ(schedule.error().message().rfind(
                "fully_shard_context finalisation: fsdp context of model 'decoder': module "
                "'embed'",
                0),
            0u)
      << schedule.error().message();
}

TEST(FsdpContextTest, EmptyContainersNeedNoWrappedAncestor) {
  // "model" and "layers" hold nothing, so wrapping every module that carries work suffices.
  FsdpContext ctx(decoder_tree());
  ASSERT_TRUE(
      wrap_all(ctx, {"embed", "layers.0", "layers.1", "head"}, mesh_of("dp=2")).has_value());
  const auto units = ctx.unit_model();
  ASSERT_TRUE(units.has_value()) << units.error().message();
  ASSERT_EQ(units->num_units(), 4);
  for (const Unit& u : units->units()) {
    EXPECT_EQ(u.parent(), Unit::kNoParent) << u.name();
  }
}

// The decoder with layers and the root wrapped: each layer takes its attn and mlp; the root
// takes the "layers" container; embed and head are their own units.
TEST(FsdpContextTest, UnwrappedModulesMergeIntoTheInnermostWrappedAncestor) {
  FsdpContext ctx(decoder_tree());
  ASSERT_TRUE(
      wrap_all(ctx, {"layers.1", "layers.0", "embed", "head", "model"}, mesh_of("dp=2"))
          .has_value());
  const auto units = ctx.unit_model();
  ASSERT_TRUE(units.has_value()) << units.error().message();

  std::vector<Unit> expected;
  expected.push_back(module_of("model", Unit::kNoParent, {}));
  expected.push_back(module_of("embed", 0, {make_param("embed.weight", {16, 8})}));
  for (int i = 0; i < 2; ++i) {
    const std::string p = "layers." + std::to_string(i);
    expected.push_back(module_of(p, 0,
                                 {make_param(p + ".norm", {8}), make_param(p + ".attn.w", {8, 8}),
                                  make_param(p + ".mlp.w", {8, 8}, DType::kFp32)},
                                 310, {96, 16}));
  }
  expected.push_back(module_of("head", 0, {make_param("head.w", {16, 8})}, 300));
  EXPECT_EQ(*units, Model::make("decoder", std::move(expected)).value());

  // Parameter counts per unit: 128, 8 + 64 + 64 per layer, 128, and none for the root.
  std::vector<std::int64_t> counts;
  for (const Unit& u : units->units()) {
    counts.push_back(u.num_parameters());
  }
  EXPECT_EQ(counts, (std::vector<std::int64_t>{0, 128, 136, 136, 128}));
  EXPECT_EQ(units->num_parameters(), ctx.modules().num_parameters());
  // Registration order does not matter; the units follow the module tree.
  EXPECT_EQ(ctx.wrapped_modules(), (Names{"layers.1", "layers.0", "embed", "head", "model"}));
  EXPECT_EQ(*ctx.forward_order(), (Names{"model", "embed", "layers.0", "layers.1", "head"}));
}

TEST(FsdpContextTest, RootTakesEverythingWhenOnlyTheRootIsWrapped) {
  FsdpContext ctx(decoder_tree());
  ASSERT_TRUE(wrap_all(ctx, {"model"}, mesh_of("dp=2")).has_value());
  const auto units = ctx.unit_model();
  ASSERT_TRUE(units.has_value());
  ASSERT_EQ(units->num_units(), 1);
  const Unit& root = units->units()[0];
  EXPECT_EQ(root.params().size(), 8u);
  EXPECT_EQ(root.num_parameters(), ctx.modules().num_parameters());
  EXPECT_EQ(root.flops().matmul, ctx.modules().flops().matmul);
  EXPECT_EQ(root.activations(), ctx.modules().activations());
  // DFS pre-order of the module tree is the parameter order (the reference's owned-parameter DFS).
  EXPECT_EQ(root.params()[0].name(), "embed.weight");
  EXPECT_EQ(root.params()[1].name(), "layers.0.norm");
  EXPECT_EQ(root.params()[7].name(), "head.w");
}

// §4.1.3 vectors: model{left{inner}, right} all wrapped; sibling roots L0, L1.
TEST(FsdpContextTest, OrdersFollowTheReferenceVectors) {
  std::vector<Unit> tree;
  tree.push_back(module_of("model", Unit::kNoParent, {make_param("model.b", {4})}));
  tree.push_back(module_of("left", 0, {make_param("left.w", {4})}));
  tree.push_back(module_of("left.inner", 1, {make_param("left.inner.w", {4})}));
  tree.push_back(module_of("right", 0, {make_param("right.w", {4})}));
  FsdpContext nested(Model::make("nested", std::move(tree)).value());
  ASSERT_TRUE(
      wrap_all(nested, {"left.inner", "left", "right", "model"}, mesh_of("dp=2")).has_value());
  EXPECT_EQ(*nested.forward_order(), (Names{"model", "left", "left.inner", "right"}));
  EXPECT_EQ(*nested.backward_order(), (Names{"model", "right", "left", "left.inner"}));

  std::vector<Unit> siblings;
  siblings.push_back(module_of("L0", Unit::kNoParent, {make_param("L0.w", {4})}));
  siblings.push_back(module_of("L1", Unit::kNoParent, {make_param("L1.w", {4})}));
  FsdpContext flat(Model::make("flat", std::move(siblings)).value());
  ASSERT_TRUE(wrap_all(flat, {"L0", "L1"}, mesh_of("dp=2")).has_value());
  EXPECT_EQ(*flat.forward_order(), (Names{"L0", "L1"}));
  EXPECT_EQ(*flat.backward_order(), (Names{"L1", "L0"}));
}

TEST(FsdpContextDeathTest, DestroyingAContextWithAnOpenScopeAborts) {
  EXPECT_DEATH(
      {
        auto ctx = std::make_unique<FsdpContext>(three_group_model());
        auto scope = fully_shard_context(*ctx);
        ctx.reset();
      },
      "destroyed while a fully_shard_context or microbatch scope on it is open");
}

}  // namespace
}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
#include "core/policy/recompute_policy.h"

#include <string>

#include <gtest/gtest.h>

namespace fsdp {
namespace {

TEST(RecomputePolicyTest, ParsesEveryModeAndPrintsWhatItParses) {
  for (const char* text : {"none", "full", "full-all-units", "selective-op", "selective-layer:1",
                           "selective-layer:2", "selective-layer:17", "core-attention"}) {
    const auto policy = RecomputePolicy::parse(text);
    ASSERT_TRUE(policy.has_value()) << text << ": " << policy.error().message();
    EXPECT_EQ(to_string(*policy), text);
  }
  EXPECT_EQ(RecomputePolicy::parse("none")->mode(), RecomputeMode::kNone);
  EXPECT_EQ(RecomputePolicy(), *RecomputePolicy::parse("none"));
  EXPECT_EQ(RecomputePolicy::full(), *RecomputePolicy::parse("full"));
  EXPECT_TRUE(RecomputePolicy::full().is_full());
  EXPECT_EQ(RecomputePolicy::full_all_units(), *RecomputePolicy::parse("full-all-units"));
  EXPECT_TRUE(RecomputePolicy::full_all_units().is_full_all_units());
  EXPECT_FALSE(RecomputePolicy::full_all_units().is_full());
  EXPECT_EQ(to_string(RecomputePolicy::full()), "full");
  EXPECT_EQ(to_string(RecomputePolicy::full_all_units()), "full-all-units");
  EXPECT_TRUE(RecomputePolicy().is_none());
  const RecomputePolicy layer = RecomputePolicy::parse("selective-layer:3").value();
  EXPECT_EQ(layer.mode(), RecomputeMode::kSelectiveLayer);
  EXPECT_EQ(layer.layer_frequency(), 3);
  EXPECT_FALSE(layer.is_full());
  EXPECT_EQ(RecomputePolicy::parse("core-attention")->mode(), RecomputeMode::kCoreAttention);
  EXPECT_EQ(RecomputePolicy::parse("selective-op")->mode(), RecomputeMode::kSelectiveOp);
}

TEST(RecomputePolicyTest, BadTextIsOneLineNamingTheOptionAndTheChoices) {
  for (const char* text : {"", "x", "on", "Full", "selective", "selective-op:2", "core_attention",
                           "full_all_units", "full-all"}) {
    const auto policy = RecomputePolicy::parse(text);
    ASSERT_FALSE(policy.has_value()) << text;
    EXPECT_EQ(policy.error().message(),
              std::string("--recompute is '") + text +
                  "'; expected none, full, full-all-units, selective-op, selective-layer:K or "
                  "core-attention");
  }
  for (const char* text : {"selective-layer:", "selective-layer:0", "selective-layer:-1",
                           "selective-layer:2x", "selective-layer:99999999999999999999"}) {
    const auto policy = RecomputePolicy::parse(text);
    ASSERT_FALSE(policy.has_value()) << text;
    EXPECT_EQ(policy.error().message(), std::string("--recompute is '") + text +
                                            "'; expected selective-layer:K with an integer K >= 1");
  }
  EXPECT_EQ(RecomputePolicy::make(RecomputeMode::kSelectiveLayer, 0).error().message(),
            "--recompute selective-layer:K needs K >= 1, got 0");
  EXPECT_FALSE(RecomputePolicy::make(RecomputeMode::kFull, 2).has_value());
  EXPECT_FALSE(RecomputePolicy::make(RecomputeMode::kFullAllUnits, 1).has_value());
}

Unit unit_with(UnitActivations activations) {
  return Unit::make("u", Unit::kNoParent, {}, UnitFlops{100, 3}, activations).value();
}

TEST(RecomputePolicyTest, CheckpointOfAUnitPerMode) {
  const CheckpointFigures op{.kept = 40, .transient = 50, .flops = {30, 0}};
  const CheckpointFigures core{.kept = 95, .transient = 7, .flops = {0, 3}};
  const Unit unit =
      unit_with({.stored = 100, .recompute = 10, .selective_op = op, .core_attention = core});
  EXPECT_EQ(checkpoint_of(RecomputePolicy(), unit, 0), (UnitCheckpoint{.kept = 100}));
  const UnitCheckpoint full{.recomputed = true, .kept = 10, .transient = 90, .flops = {100, 3}};
  EXPECT_EQ(checkpoint_of(RecomputePolicy::full(), unit, 0), full);
  EXPECT_EQ(checkpoint_of(RecomputePolicy::full_all_units(), unit, 0), full);
  EXPECT_EQ(checkpoint_of(*RecomputePolicy::parse("selective-op"), unit, 0),
            (UnitCheckpoint{.recomputed = true, .kept = 40, .transient = 50, .flops = {30, 0}}));
  EXPECT_EQ(checkpoint_of(*RecomputePolicy::parse("core-attention"), unit, 0),
            (UnitCheckpoint{.recomputed = true, .kept = 95, .transient = 7, .flops = {0, 3}}));
  // torchtitan counts blocks from 1: with K = 2 the second, fourth, ... block is checkpointed.
  const RecomputePolicy every2 = RecomputePolicy::parse("selective-layer:2").value();
  EXPECT_EQ(checkpoint_of(every2, unit, 0), (UnitCheckpoint{.kept = 100}));
  EXPECT_EQ(checkpoint_of(every2, unit, 1), full);
  EXPECT_EQ(checkpoint_of(every2, unit, 2), (UnitCheckpoint{.kept = 100}));
  EXPECT_EQ(checkpoint_of(every2, unit, 3), full);
  EXPECT_EQ(checkpoint_of(*RecomputePolicy::parse("selective-layer:1"), unit, 0), full);
  EXPECT_EQ(checkpoint_of(every2, unit, -1), (UnitCheckpoint{.kept = 100}));
}

// torch.compile's partitioner saves only what the backward graph reads: a compiled block leaves
// out the unread part of a selective mode's kept bytes, and nothing else changes.
TEST(RecomputePolicyTest, ACompiledBlockKeepsNoUnreadOutputs) {
  const CheckpointFigures op{.kept = 40, .transient = 50, .flops = {30, 0}, .unread = 15};
  const CheckpointFigures core{.kept = 95, .transient = 7, .flops = {0, 3}};
  const Unit unit =
      unit_with({.stored = 100, .recompute = 10, .selective_op = op, .core_attention = core});
  const RecomputePolicy selective_op = *RecomputePolicy::parse("selective-op");
  EXPECT_EQ(checkpoint_of(selective_op, unit, 0, false).kept, 40);
  EXPECT_EQ(checkpoint_of(selective_op, unit, 0, true),
            (UnitCheckpoint{.recomputed = true, .kept = 25, .transient = 50, .flops = {30, 0}}));
  for (const char* mode : {"none", "full", "core-attention", "selective-layer:1"}) {
    const RecomputePolicy policy = *RecomputePolicy::parse(mode);
    EXPECT_EQ(checkpoint_of(policy, unit, 0, true), checkpoint_of(policy, unit, 0, false)) << mode;
  }
  const Unit head =
      Unit::make("head", Unit::kNoParent, {}, UnitFlops{1, 0},
                 {.stored = 8, .selective_op = CheckpointFigures{.kept = 8}, .block = false})
          .value();
  const Model model = Model::make("m", {unit, head}).value();
  const std::vector<UnitCheckpoint> compiled = checkpoints_of(selective_op, model, true);
  ASSERT_EQ(compiled.size(), 2u);
  EXPECT_EQ(compiled[0].kept, 25);
  EXPECT_EQ(compiled[1].kept, 8);
}

TEST(RecomputePolicyTest, UnreadBytesBeyondKeptAreRefused) {
  const CheckpointFigures op{.kept = 40, .unread = 41};
  const auto unit = Unit::make("u", Unit::kNoParent, {}, UnitFlops{100, 3},
                               UnitActivations{.stored = 100, .selective_op = op});
  ASSERT_FALSE(unit.has_value());
  EXPECT_EQ(unit.error().message(),
            "unit 'u': activation bytes selective_op unread: expected at most kept (40), got 41");
}

TEST(RecomputePolicyTest, AUnitWithoutSelectiveFiguresIsRecomputedWhole) {
  const Unit unit = unit_with({.stored = 100, .recompute = 10});
  const UnitCheckpoint full = checkpoint_of(RecomputePolicy::full(), unit, 0);
  EXPECT_EQ(checkpoint_of(*RecomputePolicy::parse("selective-op"), unit, 0), full);
  EXPECT_EQ(checkpoint_of(*RecomputePolicy::parse("core-attention"), unit, 0), full);
}

TEST(RecomputePolicyTest, ANonBlockUnitIsNeverCheckpointedBySelectiveLayer) {
  const CheckpointFigures none{.kept = 100};
  const Unit head = unit_with({.stored = 100,
                               .recompute = 10,
                               .selective_op = none,
                               .core_attention = none,
                               .block = false});
  for (const char* mode : {"selective-layer:1", "selective-op", "core-attention"}) {
    const UnitCheckpoint c = checkpoint_of(*RecomputePolicy::parse(mode), head, -1);
    EXPECT_FALSE(c.recomputed) << mode;
    EXPECT_EQ(c.kept, 100) << mode;
  }
  // full is the frameworks' full checkpointing: the blocks only; full-all-units recomputes the
  // head too.
  EXPECT_EQ(checkpoint_of(RecomputePolicy::full(), head, -1), (UnitCheckpoint{.kept = 100}));
  EXPECT_EQ(checkpoint_of(RecomputePolicy::full_all_units(), head, -1),
            (UnitCheckpoint{.recomputed = true, .kept = 10, .transient = 90, .flops = {100, 3}}));
}

// full has the figures of selective-layer:1 on every unit of a model with blocks and non-blocks.
TEST(RecomputePolicyTest, FullIsSelectiveLayerOneAndFullAllUnitsRecomputesEveryUnit) {
  const auto make = [](const char* name, bool block) {
    return Unit::make(name, Unit::kNoParent, {}, UnitFlops{100, 3},
                      {.stored = 100, .recompute = 10, .block = block})
        .value();
  };
  const Model model = Model::make("m", {make("embedding", false), make("layers.0", true),
                                        make("layers.1", true), make("head", false)})
                          .value();
  const std::vector<UnitCheckpoint> full = checkpoints_of(RecomputePolicy::full(), model, false);
  EXPECT_EQ(full, checkpoints_of(*RecomputePolicy::parse("selective-layer:1"), model, false));
  ASSERT_EQ(full.size(), 4u);
  EXPECT_FALSE(full[0].recomputed);
  EXPECT_TRUE(full[1].recomputed);
  EXPECT_TRUE(full[2].recomputed);
  EXPECT_FALSE(full[3].recomputed);
  for (const UnitCheckpoint& c : checkpoints_of(RecomputePolicy::full_all_units(), model, false)) {
    EXPECT_TRUE(c.recomputed);
    EXPECT_EQ(c.kept, 10);
  }
  EXPECT_TRUE(RecomputePolicy::full().recomputes_whole_units());
  EXPECT_TRUE(RecomputePolicy::full_all_units().recomputes_whole_units());
  EXPECT_FALSE(RecomputePolicy::parse("selective-op")->recomputes_whole_units());
}

TEST(RecomputePolicyTest, NegativeFiguresAreRefusedByTheUnit) {
  const auto unit =
      Unit::make("u", Unit::kNoParent, {}, UnitFlops{},
                 UnitActivations{.stored = 1, .selective_op = CheckpointFigures{.kept = -1}});
  ASSERT_FALSE(unit.has_value());
  EXPECT_EQ(
      unit.error().message(),
      "unit 'u': activation bytes selective_op kept: expected a non-negative integer, got -1");
}

}  // namespace
}  // namespace fsdp

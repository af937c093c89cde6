// SPDX-License-Identifier: Apache-2.0
#include "core/policy/optimizer_policy.h"

#include <gtest/gtest.h>

namespace fsdp {
namespace {

TEST(OptimizerPolicyTest, StatesAndBytesPerElement) {
  const auto sgd = OptimizerPolicy::make(OptimizerKind::kSgd).value();
  const auto momentum = OptimizerPolicy::make(OptimizerKind::kSgdMomentum).value();
  const auto adam = OptimizerPolicy::make(OptimizerKind::kAdam).value();
  EXPECT_EQ(sgd.num_states(), 0);
  EXPECT_EQ(momentum.num_states(), 1);
  EXPECT_EQ(adam.num_states(), 2);
  EXPECT_EQ(sgd.state_bytes_per_element(), 0);
  EXPECT_EQ(momentum.state_bytes_per_element(), 4);
  EXPECT_EQ(adam.state_bytes_per_element(), 8);
  EXPECT_EQ(adam.state_dtype(), DType::kFp32);
  EXPECT_EQ(OptimizerPolicy(), adam);
  EXPECT_EQ(OptimizerPolicy::make(OptimizerKind::kAdam, DType::kBf16)->state_bytes_per_element(),
            4);
}

TEST(OptimizerPolicyTest, StateIsNeverFp8) {
  EXPECT_EQ(OptimizerPolicy::make(OptimizerKind::kAdam, DType::kFp8).error().message(),
            "adam state dtype must be fp32, bf16 or fp16, got fp8");
}

TEST(OptimizerPolicyTest, ParseAndToString) {
  for (const OptimizerKind k :
       {OptimizerKind::kSgd, OptimizerKind::kSgdMomentum, OptimizerKind::kAdam}) {
    EXPECT_EQ(parse_optimizer_kind(to_string(k)).value(), k);
  }
  EXPECT_EQ(parse_optimizer_kind("AdamW").value(), OptimizerKind::kAdam);
  EXPECT_EQ(parse_optimizer_kind("momentum").value(), OptimizerKind::kSgdMomentum);
  EXPECT_EQ(to_string(OptimizerKind::kSgdMomentum), "sgd-momentum");
  EXPECT_EQ(parse_optimizer_kind("sgd-momentum").value(), OptimizerKind::kSgdMomentum);
  EXPECT_EQ(parse_optimizer_kind("lion").error().message(),
            "optimizer 'lion' is unknown; expected sgd, sgd-momentum or adam");
  // One spelling on the command line; the old one only where saved files are read.
  EXPECT_EQ(parse_optimizer_kind("sgd_momentum").error().message(),
            "optimizer 'sgd_momentum' is unknown; expected sgd, sgd-momentum or adam");
  EXPECT_EQ(parse_saved_optimizer_kind("sgd_momentum").value(), OptimizerKind::kSgdMomentum);
  for (const OptimizerKind k :
       {OptimizerKind::kSgd, OptimizerKind::kSgdMomentum, OptimizerKind::kAdam}) {
    EXPECT_EQ(parse_saved_optimizer_kind(to_string(k)).value(), k);
  }
  EXPECT_FALSE(parse_saved_optimizer_kind("lion").has_value());
  EXPECT_EQ(to_string(OptimizerPolicy()), "adam(state=fp32)");
}

}  // namespace
}  // namespace fsdp

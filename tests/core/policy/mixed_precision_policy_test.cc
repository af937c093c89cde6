// SPDX-License-Identifier: Apache-2.0
#include "core/policy/mixed_precision_policy.h"

#include <gtest/gtest.h>

namespace fsdp {
namespace {

TEST(MixedPrecisionPolicyTest, DefaultIsFp32MainWeightsAndParamDtypeGrads) {
  const MixedPrecisionPolicy policy;
  EXPECT_EQ(policy.main_params_dtype(), DType::kFp32);
  EXPECT_EQ(policy.main_grads_dtype(), std::nullopt);
  EXPECT_EQ(policy.compute_dtype(), std::nullopt);
  EXPECT_EQ(policy.compute_dtype_for(DType::kBf16), DType::kBf16);
  EXPECT_EQ(policy.grad_dtype_for(DType::kBf16), DType::kBf16);
  EXPECT_EQ(policy.main_grads_dtype_for(DType::kBf16), DType::kBf16);
  EXPECT_FALSE(policy.model_weight_aliases_main(DType::kBf16));
  EXPECT_TRUE(policy.model_weight_aliases_main(DType::kFp32));
  EXPECT_EQ(to_string(policy), "main_params=fp32 main_grads=grad compute=param");
}

TEST(MixedPrecisionPolicyTest, ExplicitDtypes) {
  auto policy = MixedPrecisionPolicy::make(DType::kBf16, DType::kFp32, DType::kBf16);
  ASSERT_TRUE(policy);
  EXPECT_EQ(policy->compute_dtype_for(DType::kFp32), DType::kBf16);
  EXPECT_EQ(policy->main_grads_dtype_for(DType::kFp32), DType::kFp32);
  EXPECT_TRUE(policy->model_weight_aliases_main(DType::kFp32));
  EXPECT_EQ(to_string(*policy), "main_params=bf16 main_grads=fp32 compute=bf16");
}

TEST(MixedPrecisionPolicyTest, Fp8ComputeReducesGradientsInBf16) {
  const MixedPrecisionPolicy policy;
  EXPECT_EQ(policy.compute_dtype_for(DType::kFp8), DType::kFp8);
  EXPECT_EQ(policy.grad_dtype_for(DType::kFp8), DType::kBf16);
  EXPECT_EQ(policy.main_grads_dtype_for(DType::kFp8), DType::kBf16);
}

TEST(MixedPrecisionPolicyTest, MainStateNeverFp8) {
  EXPECT_EQ(MixedPrecisionPolicy::make(DType::kFp8, std::nullopt, std::nullopt).error().message(),
            "main params dtype must be fp32, bf16 or fp16, got fp8");
  EXPECT_EQ(MixedPrecisionPolicy::make(DType::kFp32, DType::kFp8, std::nullopt).error().message(),
            "main grads dtype must be fp32, bf16 or fp16, got fp8");
  EXPECT_TRUE(MixedPrecisionPolicy::make(DType::kFp32, std::nullopt, DType::kFp8));
}

}  // namespace
}  // namespace fsdp

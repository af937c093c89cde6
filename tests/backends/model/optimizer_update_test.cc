// SPDX-License-Identifier: Apache-2.0
// optimizer_update against steps worked out by hand (two steps each, so state carries over).
#include <array>
#include <vector>

#include "backends/model/decoder.h"

#include <gtest/gtest.h>

namespace fsdp::backend {
namespace {

constexpr std::array<float, 3> kGrad1 = {0.1F, 0.2F, -0.3F};
constexpr std::array<float, 3> kGrad2 = {-0.05F, 0.4F, 0.3F};

std::vector<float> start() {
  return {1.0F, -2.0F, 0.5F};
}

// Each value within 4 ulps of the expected one.
void expect_floats(const std::vector<float>& got, std::array<float, 3> want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_FLOAT_EQ(got[i], want[i]) << "element " << i;
  }
}

// w - 0.1 g1 from start() = (1 - 0.01, -2 - 0.02, 0.5 + 0.03): SGD's step and momentum's first.
constexpr std::array<float, 3> kFirstStepLr01 = {0.99F, -2.02F, 0.53F};

TEST(OptimizerUpdateTest, Sgd) {
  OptimizerHyper hyper;
  hyper.lr = 0.1;
  std::vector<float> w = start();
  optimizer_update(OptimizerKind::kSgd, hyper, 1, w, kGrad1, {});
  expect_floats(w, kFirstStepLr01);
}

TEST(OptimizerUpdateTest, SgdMomentum) {
  OptimizerHyper hyper;
  hyper.lr = 0.1;
  hyper.momentum = 0.9;
  std::vector<float> w = start();
  std::vector<float> buf(3, 0.0F);
  optimizer_update(OptimizerKind::kSgdMomentum, hyper, 1, w, kGrad1, buf);
  // Step 1: buf = g1, w = w - lr g1.
  EXPECT_FLOAT_EQ(buf[0], 0.1F);
  expect_floats(w, kFirstStepLr01);
  optimizer_update(OptimizerKind::kSgdMomentum, hyper, 2, w, kGrad2, buf);
  // Step 2: buf = 0.9 g1 + g2 = (0.04, 0.58, 0.03); w -= 0.1 buf.
  expect_floats(buf, {0.04F, 0.58F, 0.03F});
  expect_floats(w, {0.986F, -2.078F, 0.527F});
}

TEST(OptimizerUpdateTest, AdamWithBiasCorrection) {
  OptimizerHyper hyper;
  hyper.lr = 0.01;
  hyper.beta1 = 0.9;
  hyper.beta2 = 0.999;
  hyper.eps = 1e-8;
  std::vector<float> w = start();
  std::vector<float> state(6, 0.0F);
  optimizer_update(OptimizerKind::kAdam, hyper, 1, w, kGrad1, state);
  // Step 1: m = 0.1 g, v = 0.001 g^2; bias correction gives m^ = g, v^ = g^2, so each weight
  // moves by lr * g / (|g| + eps), i.e. lr against the sign of g.
  EXPECT_FLOAT_EQ(state[0], 0.01F);  // exp_avg[0]
  EXPECT_FLOAT_EQ(state[4], 4e-5F);  // exp_avg_sq[1]
  EXPECT_NEAR(w[0], 0.99, 1e-6);
  EXPECT_NEAR(w[1], -2.01, 1e-6);
  EXPECT_NEAR(w[2], 0.51, 1e-6);
  optimizer_update(OptimizerKind::kAdam, hyper, 2, w, kGrad2, state);
  // Step 2: m = 0.09 g1 + 0.1 g2 = (0.004, 0.058, 0.003);
  // v = 0.000999 g1^2 + 0.001 g2^2 = (1.249e-5, 1.9996e-4, 1.7991e-4);
  // w -= 0.01 (m / 0.19) / (sqrt(v / 0.001999) + 1e-8); e.g. w[2] = 0.51 - 0.01 * 0.0157895 / 0.3.
  EXPECT_NEAR(state[1], 0.058, 1e-8);
  EXPECT_NEAR(state[5], 1.7991e-4, 1e-10);
  EXPECT_NEAR(w[0], 0.987336631, 1e-6);
  EXPECT_NEAR(w[1], -2.019651819, 1e-6);
  EXPECT_NEAR(w[2], 0.509473684, 1e-6);
}

TEST(OptimizerUpdateTest, ZeroGradientLeavesSgdWeightsAndShrinksMomentum) {
  OptimizerHyper hyper;
  std::vector<float> w = start();
  const std::vector<float> zero(3, 0.0F);
  optimizer_update(OptimizerKind::kSgd, hyper, 1, w, zero, {});
  EXPECT_EQ(w, start());
  std::vector<float> buf = {1.0F, 1.0F, 1.0F};
  optimizer_update(OptimizerKind::kSgdMomentum, hyper, 5, w, zero, buf);
  EXPECT_FLOAT_EQ(buf[0], 0.9F);
  EXPECT_FLOAT_EQ(w[0], static_cast<float>(1.0 - hyper.lr * 0.9));
}

TEST(OptimizerUpdateDeathTest, StateOfTheWrongSizeIsAnInternalError) {
  std::vector<float> w = start();
  std::vector<float> state(3, 0.0F);
  EXPECT_DEATH(optimizer_update(OptimizerKind::kAdam, OptimizerHyper{}, 1, w, kGrad1, state),
               "adam state of 3 values for 3 weights");
  EXPECT_DEATH(optimizer_update(OptimizerKind::kSgd, OptimizerHyper{}, 0, w, kGrad1, {}),
               "step must be >= 1");
}

}  // namespace
}  // namespace fsdp::backend

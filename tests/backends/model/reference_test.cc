// SPDX-License-Identifier: Apache-2.0
// train_unsharded: it learns, it is deterministic, and one step equals the FSDP gradient rule
// g = grad_scale / W * sum_r sum_mb grad L(r, mb) written out by hand.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/model/decoder.h"
#include "tests/backends/model/decoder_test_util.h"

#include <gtest/gtest.h>

namespace fsdp::backend {
namespace {

using testing::tiny_config;

TEST(TrainUnshardedTest, AdamLossFallsOverTwentySteps) {
  const DecoderConfig config;  // the defaults: vocab 64, hidden 32, ffn 64, 2 layers
  OptimizerHyper hyper;
  hyper.lr = 1e-2;
  const TrainResult result =
      train_unsharded(config, OptimizerKind::kAdam, hyper, /*steps=*/20, /*num_microbatches=*/2,
                      /*data_world=*/2, /*grad_scale=*/1.0)
          .value();
  ASSERT_EQ(result.losses.size(), 20U);
  for (const double loss : result.losses) {
    EXPECT_TRUE(std::isfinite(loss));
  }
  EXPECT_NEAR(result.losses.front(), std::log(64.0), 1.0);
  EXPECT_LT(result.losses.back(), 0.5 * result.losses.front());  // measured: 4.10 -> 0.76
}

TEST(TrainUnshardedTest, SgdMomentumLossFalls) {
  OptimizerHyper hyper;
  hyper.lr = 0.5;
  hyper.momentum = 0.9;
  const TrainResult result =
      train_unsharded(DecoderConfig{}, OptimizerKind::kSgdMomentum, hyper, 20, 1, 2, 1.0).value();
  EXPECT_LT(result.losses.back(), 0.9 * result.losses.front());
}

TEST(TrainUnshardedTest, SameSeedGivesBitIdenticalRuns) {
  const DecoderConfig config = tiny_config();
  const OptimizerHyper hyper;
  const TrainResult a = train_unsharded(config, OptimizerKind::kAdam, hyper, 5, 2, 2, 0.5).value();
  const TrainResult b = train_unsharded(config, OptimizerKind::kAdam, hyper, 5, 2, 2, 0.5).value();
  EXPECT_EQ(a.losses, b.losses);  // exact equality of doubles, not a tolerance
  EXPECT_EQ(a.final_params, b.final_params);
  DecoderConfig other = config;
  other.seed += 1;
  const TrainResult c = train_unsharded(other, OptimizerKind::kAdam, hyper, 5, 2, 2, 0.5).value();
  EXPECT_NE(c.losses, a.losses);
}

TEST(TrainUnshardedTest, ZeroStepsReturnsTheInitialParameters) {
  const DecoderConfig config = tiny_config();
  const TrainResult r = train_unsharded(config, OptimizerKind::kSgd, {}, 0, 1, 1, 1.0).value();
  EXPECT_TRUE(r.losses.empty());
  EXPECT_EQ(r.final_params, initial_parameters(config));
}

TEST(TrainUnshardedTest, OneStepOnTwoRanksIsTheAverageFormula) {
  // Two data ranks with two microbatches each, SGD, grad_scale 3: the reference must equal
  // w - lr * 3 / 2 * (sum over the four (rank, microbatch) gradients), each gradient computed by
  // that rank's own decoder, and the loss must be the mean of the four local losses.
  const DecoderConfig config = tiny_config();
  OptimizerHyper hyper;
  hyper.lr = 0.05;
  constexpr double kGradScale = 3.0;
  constexpr std::int64_t kWorld = 2;
  constexpr std::int64_t kMb = 2;
  const ParamValues w0 = initial_parameters(config);
  std::vector<std::vector<std::vector<double>>> sum;  // in double: order does not matter here
  for (const auto& unit : w0) {
    auto& u = sum.emplace_back();
    for (const auto& p : unit) {
      u.emplace_back(p.size(), 0.0);
    }
  }
  double loss = 0.0;
  for (std::int64_t r = 0; r < kWorld; ++r) {
    auto decoder = HostDecoder::make(config, kMb, r, kWorld).value();
    decoder->begin_step(0);
    for (std::int32_t mb = 0; mb < kMb; ++mb) {
      ParamValues g;
      testing::run_microbatch(*decoder, w0, mb, &g);
      for (std::size_t u = 0; u < g.size(); ++u) {
        for (std::size_t p = 0; p < g[u].size(); ++p) {
          for (std::size_t i = 0; i < g[u][p].size(); ++i) {
            sum[u][p][i] += g[u][p][i];
          }
        }
      }
    }
    loss += decoder->step_loss() * kMb;
  }
  loss /= kWorld * kMb;
  const TrainResult result =
      train_unsharded(config, OptimizerKind::kSgd, hyper, 1, kMb, kWorld, kGradScale).value();
  ASSERT_EQ(result.losses.size(), 1U);
  EXPECT_NEAR(result.losses[0], loss, 1e-12);
  double moved = 0.0;
  for (std::size_t u = 0; u < w0.size(); ++u) {
    for (std::size_t p = 0; p < w0[u].size(); ++p) {
      for (std::size_t i = 0; i < w0[u][p].size(); ++i) {
        const double expected = w0[u][p][i] - hyper.lr * kGradScale / kWorld * sum[u][p][i];
        EXPECT_NEAR(result.final_params[u][p][i], expected, 1e-6 * (1.0 + std::fabs(expected)))
            << "unit " << u << " param " << p << " element " << i;
        moved = std::max(
            moved, std::fabs(static_cast<double>(result.final_params[u][p][i]) - w0[u][p][i]));
      }
    }
  }
  EXPECT_GT(moved, 1e-3);
}

TEST(TrainUnshardedTest, TwoRanksOfOneMicrobatchEqualOneRankOfTwo) {
  // The global batch is rank-major, so (W=2, 1 microbatch) and (W=1, 2 microbatches) see the same
  // samples; with grad_scale = W both apply the same gradient, up to summation order.
  const DecoderConfig config = tiny_config();
  const OptimizerHyper hyper;
  const TrainResult two_ranks =
      train_unsharded(config, OptimizerKind::kAdam, hyper, 3, 1, 2, 2.0).value();
  const TrainResult one_rank =
      train_unsharded(config, OptimizerKind::kAdam, hyper, 3, 2, 1, 1.0).value();
  for (std::size_t s = 0; s < 3; ++s) {
    EXPECT_NEAR(two_ranks.losses[s], one_rank.losses[s], 1e-6 * one_rank.losses[s]);
  }
  for (std::size_t u = 0; u < one_rank.final_params.size(); ++u) {
    for (std::size_t p = 0; p < one_rank.final_params[u].size(); ++p) {
      for (std::size_t i = 0; i < one_rank.final_params[u][p].size(); ++i) {
        EXPECT_NEAR(two_ranks.final_params[u][p][i], one_rank.final_params[u][p][i], 1e-5);
      }
    }
  }
}

TEST(TrainUnshardedTest, RejectsBadArguments) {
  const DecoderConfig config = tiny_config();
  const auto message = [&](std::int64_t steps, std::int64_t mb, std::int64_t world, double scale) {
    auto r = train_unsharded(config, OptimizerKind::kSgd, {}, steps, mb, world, scale);
    return r.has_value() ? std::string("ok") : r.error().message();
  };
  EXPECT_EQ(message(-1, 1, 1, 1.0), "train_unsharded: steps must be >= 0, got -1");
  EXPECT_EQ(message(1, 1, 0, 1.0), "train_unsharded: data_world must be >= 1, got 0");
  EXPECT_EQ(message(1, 0, 1, 1.0),
            "train_unsharded: host decoder: num_microbatches must be in [1, 2^31), got 0");
  EXPECT_EQ(message(1, 1, 1, std::nan("")), "train_unsharded: grad_scale must be finite, got nan");
  DecoderConfig bad = config;
  bad.seq_len = 0;
  auto r = train_unsharded(bad, OptimizerKind::kSgd, {}, 1, 1, 1, 1.0);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message(), "decoder config: seq_len must be >= 1, got 0");
}

}  // namespace
}  // namespace fsdp::backend

// SPDX-License-Identifier: Apache-2.0
// HostDecoder: every unit's backward against central finite differences of the loss, the whole
// chain against a directional derivative, recomputation, activation accounting and misuse.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "backends/model/decoder.h"
#include "backends/model/internal/splitmix.h"
#include "tests/backends/model/decoder_test_util.h"

#include <gtest/gtest.h>

namespace fsdp::backend {
namespace {

using testing::check_unit;
using testing::loss_and_grads;
using testing::perturbed_parameters;
using testing::tiny_config;
using testing::tiny_llama_config;

// Both families: the small decoder, the Llama network (GQA, RoPE, SwiGLU) and the Llama network
// with every bias (q/k/v, o_proj, MLP).
// The Mixtral case routes every token to every expert (top_k = experts) with room for all: the
// loss is then smooth in the router too (expert_parallel_test.cc checks the top-k and the drops).
DecoderConfig tiny_moe_config() {
  return decoder_config_of_arch(testing::tiny_moe_arch(/*experts=*/4, /*top_k=*/4), "tiny-moe",
                                /*seq_len=*/5, /*micro_batch_size=*/2, /*seed=*/42)
      .value();
}

std::vector<DecoderConfig> every_family() {
  return {tiny_config(), tiny_llama_config(false), tiny_llama_config(true), tiny_moe_config()};
}

std::string family_name(const DecoderConfig& c) {
  if (c.experts > 0) {
    return "mixtral";
  }
  return c.family == DecoderFamily::kMlp ? "mlp" : (c.qkv_bias ? "llama+biases" : "llama");
}

TEST(HostDecoderTest, EmbeddingGradientMatchesFiniteDifferences) {
  // The embedding gradient is the end of the chain: it checks every unit's input gradient too.
  for (const DecoderConfig& config : every_family()) {
    SCOPED_TRACE(family_name(config));
    EXPECT_GT(check_unit(config, 0), 1e-2);
  }
}

TEST(HostDecoderTest, LayerGradientsMatchFiniteDifferences) {
  for (const DecoderConfig& config : every_family()) {
    for (std::size_t u = 1; u <= static_cast<std::size_t>(config.layers); ++u) {
      SCOPED_TRACE(family_name(config) + " layers." + std::to_string(u - 1));
      EXPECT_GT(check_unit(config, u), 1e-2);
    }
  }
}

TEST(HostDecoderTest, HeadGradientMatchesFiniteDifferences) {
  for (const DecoderConfig& config : every_family()) {
    SCOPED_TRACE(family_name(config));
    EXPECT_GT(check_unit(config, static_cast<std::size_t>(config.layers) + 1), 1e-2);
  }
}

TEST(HostDecoderTest, WholeChainMatchesDirectionalDerivative) {
  // <grad, d> against (L(p + h d) - L(p - h d)) / 2h for a random direction d over every
  // parameter of every unit, on a wider model with more layers than the per-element checks.
  DecoderConfig config = tiny_config();
  config.hidden = 16;
  config.ffn = 24;
  config.layers = 4;
  config.vocab = 11;
  const ParamValues params = perturbed_parameters(config);
  ParamValues grads;
  loss_and_grads(config, params, &grads);
  // Richardson extrapolation of two central differences cancels the h^2 term, which the many
  // parameters moving at once make large.
  std::vector<double> direction;
  double analytic = 0.0;
  std::uint64_t n = 1000;
  for (std::size_t u = 0; u < params.size(); ++u) {
    for (std::size_t p = 0; p < params[u].size(); ++p) {
      for (std::size_t e = 0; e < params[u][p].size(); ++e) {
        direction.push_back(2.0 * internal::unit_interval(internal::splitmix64(++n)) - 1.0);
        analytic += grads[u][p][e] * direction.back();
      }
    }
  }
  const auto central = [&](double h) {
    ParamValues plus = params;
    ParamValues minus = params;
    std::size_t k = 0;
    for (std::size_t u = 0; u < params.size(); ++u) {
      for (std::size_t p = 0; p < params[u].size(); ++p) {
        for (std::size_t e = 0; e < params[u][p].size(); ++e, ++k) {
          plus[u][p][e] = static_cast<float>(params[u][p][e] + h * direction[k]);
          minus[u][p][e] = static_cast<float>(params[u][p][e] - h * direction[k]);
        }
      }
    }
    return (loss_and_grads(config, plus) - loss_and_grads(config, minus)) / (2.0 * h);
  };
  constexpr double kStep = 1e-2;
  const double numeric = (4.0 * central(kStep / 2) - central(kStep)) / 3.0;
  EXPECT_GT(std::fabs(analytic), 1e-2);
  EXPECT_NEAR(analytic, numeric, 1e-3 * std::fabs(numeric) + 1e-4);
}

TEST(HostDecoderTest, InitialLossIsNearUniformGuess) {
  const DecoderConfig config = tiny_config();
  const double loss = loss_and_grads(config, initial_parameters(config));
  EXPECT_GT(loss, 0.5 * std::log(static_cast<double>(config.vocab)));
  EXPECT_LT(loss, 2.0 * std::log(static_cast<double>(config.vocab)));
}

// Forward and backward of microbatch 0 with the given recompute setting; returns the gradients.
ParamValues gradients_with(const DecoderConfig& config, bool set_recompute, bool call_recompute) {
  const ParamValues params = perturbed_parameters(config);
  auto decoder = HostDecoder::make(config, 1, 0, 1).value();
  const auto num_units = static_cast<std::int32_t>(params.size());
  for (std::int32_t u = 0; u < num_units; ++u) {
    decoder->set_recompute(u, set_recompute);
  }
  decoder->begin_step(0);
  for (std::int32_t u = 0; u < num_units; ++u) {
    decoder->forward(u, 0, testing::const_ptrs(params[static_cast<std::size_t>(u)]));
  }
  ParamValues grads = params;
  for (std::int32_t u = num_units; u-- > 0;) {
    const auto i = static_cast<std::size_t>(u);
    if (call_recompute) {
      decoder->recompute(u, 0, testing::const_ptrs(params[i]));
    }
    decoder->backward(u, 0, testing::const_ptrs(params[i]), testing::mutable_ptrs(grads[i]));
  }
  return grads;
}

TEST(HostDecoderTest, RecomputationIsBitIdentical) {
  for (const DecoderConfig& config : every_family()) {
    SCOPED_TRACE(family_name(config));
    const ParamValues stored = gradients_with(config, false, false);
    EXPECT_EQ(gradients_with(config, true, false), stored);  // backward recomputes itself
    EXPECT_EQ(gradients_with(config, true, true), stored);   // recompute() ahead of backward
    EXPECT_EQ(gradients_with(config, false, true), stored);  // recompute() over kept activations
  }
}

TEST(HostDecoderTest, ActivationBytesMatchTheModel) {
  for (const DecoderConfig& config : every_family()) {
    SCOPED_TRACE(family_name(config));
    const Model model = decoder_model(config).value();
    const ParamValues params = initial_parameters(config);
    const std::int64_t tokens = config.micro_batch_size * config.seq_len;
    for (const bool recompute : {false, true}) {
      auto decoder = HostDecoder::make(config, 2, 0, 1).value();
      decoder->begin_step(0);
      std::int64_t expected = 0;
      for (std::int32_t u = 0; u < model.num_units(); ++u) {
        decoder->set_recompute(u, recompute);
        const auto i = static_cast<std::size_t>(u);
        decoder->forward(u, 0, testing::const_ptrs(params[i]));
        const UnitActivations& acts = model.units()[i].activations();
        // The importer's embedding keeps the (int64) token ids; the driver holds the step's ids
        // for the whole step and activation_bytes() leaves them out (decoder.h).
        if (u > 0 || config.family == DecoderFamily::kMlp) {
          expected += tokens * (recompute ? acts.recompute : acts.stored);
        }
        EXPECT_EQ(decoder->activation_bytes(), expected) << "after forward of unit " << u;
      }
      EXPECT_GT(expected, 0);
      ParamValues grads = params;
      for (std::int32_t u = model.num_units(); u-- > 0;) {
        const auto i = static_cast<std::size_t>(u);
        decoder->backward(u, 0, testing::const_ptrs(params[i]), testing::mutable_ptrs(grads[i]));
      }
      EXPECT_EQ(decoder->activation_bytes(), 0);
    }
  }
}

TEST(HostDecoderTest, MicrobatchesAreIndependent) {
  // Microbatch 1's gradient does not depend on whether microbatch 0 ran before it.
  const DecoderConfig config = tiny_config();
  const ParamValues params = initial_parameters(config);
  auto both = HostDecoder::make(config, 2, 0, 1).value();
  both->begin_step(3);
  ParamValues g0;
  ParamValues g1_after;
  testing::run_microbatch(*both, params, 0, &g0);
  testing::run_microbatch(*both, params, 1, &g1_after);
  auto alone = HostDecoder::make(config, 2, 0, 1).value();
  alone->begin_step(3);
  ParamValues g1_alone;
  testing::run_microbatch(*alone, params, 1, &g1_alone);
  EXPECT_EQ(g1_after, g1_alone);
  EXPECT_NE(g0, g1_alone);  // different samples, different gradients
}

TEST(HostDecoderTest, DecodersOnConcurrentThreadsMatchSerialRuns) {
  // Ranks as threads (the in-process communicator): one decoder per thread, all calling BLAS at
  // once, give bit for bit the gradients of one-at-a-time runs.
  const DecoderConfig config = tiny_config();
  const ParamValues params = perturbed_parameters(config);
  constexpr int kThreads = 4;
  std::vector<ParamValues> serial(kThreads);
  std::vector<ParamValues> concurrent(kThreads);
  const auto run = [&](int r, ParamValues* out) {
    auto decoder = HostDecoder::make(config, 1, r, kThreads).value();
    decoder->begin_step(0);
    testing::run_microbatch(*decoder, params, 0, out);
  };
  for (int r = 0; r < kThreads; ++r) {
    run(r, &serial[static_cast<std::size_t>(r)]);
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < kThreads; ++r) {
    threads.emplace_back(run, r, &concurrent[static_cast<std::size_t>(r)]);
  }
  for (std::thread& t : threads) {
    t.join();
  }
  EXPECT_EQ(concurrent, serial);
  EXPECT_NE(serial[0], serial[1]);  // the ranks read different samples
}

TEST(HostDecoderTest, MakeRejectsBadArguments) {
  const DecoderConfig config = tiny_config();
  auto bad_mb = HostDecoder::make(config, 0, 0, 1);
  ASSERT_FALSE(bad_mb.has_value());
  EXPECT_EQ(bad_mb.error().message(), "host decoder: num_microbatches must be in [1, 2^31), got 0");
  auto bad_world = HostDecoder::make(config, 1, 0, 0);
  ASSERT_FALSE(bad_world.has_value());
  EXPECT_EQ(bad_world.error().message(), "host decoder: data_world must be >= 1, got 0");
  auto bad_rank = HostDecoder::make(config, 1, 2, 2);
  ASSERT_FALSE(bad_rank.has_value());
  EXPECT_EQ(bad_rank.error().message(), "host decoder: data_rank must be in [0, 2), got 2");
  DecoderConfig bad_config = config;
  bad_config.hidden = 0;
  auto bad = HostDecoder::make(bad_config, 1, 0, 1);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidArgument);
}

TEST(HostDecoderDeathTest, BackwardBeforeForwardIsAnInternalError) {
  const DecoderConfig config = tiny_config();
  const ParamValues params = initial_parameters(config);
  auto decoder = HostDecoder::make(config, 1, 0, 1).value();
  decoder->begin_step(0);
  ParamValues grads = params;
  EXPECT_DEATH(
      decoder->backward(1, 0, testing::const_ptrs(params[1]), testing::mutable_ptrs(grads[1])),
      "without its forward");
  EXPECT_DEATH(decoder->forward(0, 0, testing::const_ptrs(params[1])), "expected 1");
}

}  // namespace
}  // namespace fsdp::backend

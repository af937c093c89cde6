// SPDX-License-Identifier: Apache-2.0
// Test helpers for the decoder: tiny configs of both families, the loss and gradients of one
// microbatch run through the public HostDecoder API (the path the executor takes), and the
// finite-difference check of a unit's gradients.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/model/decoder.h"
#include "backends/model/internal/splitmix.h"

#include <gtest/gtest.h>

namespace fsdp::backend::testing {

// Small enough for finite differences over every parameter under ASan.
inline DecoderConfig tiny_config() {
  DecoderConfig c;
  c.vocab = 7;
  c.hidden = 6;
  c.ffn = 10;
  c.layers = 2;
  c.seq_len = 5;
  c.micro_batch_size = 2;
  c.seed = 42;
  return c;
}

// A 2-layer Llama-family architecture small enough for finite differences over every parameter:
// grouped-query attention (2 heads sharing 1 kv head of size 4), SwiGLU, RoPE; `biases` turns on
// the q/k/v, o_proj and MLP biases (llama's attention_bias and mlp_bias).
inline HubArch tiny_llama_arch(bool biases) {
  HubArch a;
  a.model_type = "llama";
  a.hidden = 8;
  a.vocab = 11;
  a.layers = 2;
  a.heads = 2;
  a.kv_heads = 1;
  a.qk_head_dim = 4;
  a.v_head_dim = 4;
  a.intermediate = 12;
  a.rope_theta = 10000.0;
  a.rms_norm_eps = 1e-5;
  a.qkv_bias = biases;
  a.o_bias = biases;
  a.mlp_bias = biases;
  return a;
}

// A tiny Llama architecture that tp = 2 splits: 4 heads over 2 kv heads of size 2 (hidden 8),
// o_proj and MLP biases (whole tensors beside split ones), no q/k/v biases (the k_proj bias's
// gradient is zero up to rounding: softmax ignores a shift shared by every key, so Adam's steps
// of its rounding noise differ when a tensor-parallel sum rounds differently).
inline HubArch tiny_tp_llama_arch() {
  HubArch a = tiny_llama_arch(/*biases=*/false);
  a.heads = 4;
  a.kv_heads = 2;
  a.qk_head_dim = 2;
  a.v_head_dim = 2;
  a.o_bias = true;
  a.mlp_bias = true;
  return a;
}

// A tiny Mixtral architecture: tiny_llama_arch's attention, every MLP `experts` SwiGLU experts
// of width 12 behind a top-k router.
inline HubArch tiny_moe_arch(std::int64_t experts = 4, std::int64_t top_k = 2) {
  HubArch a = tiny_llama_arch(/*biases=*/false);
  a.model_type = "mixtral";
  a.experts = experts;
  a.top_k = top_k;
  a.expert_intermediate = a.intermediate;
  return a;
}

// tiny_llama_arch as a config of 2 samples of 5 tokens.
inline DecoderConfig tiny_llama_config(bool biases = false) {
  auto c = decoder_config_of_arch(tiny_llama_arch(biases), "tiny-llama", /*seq_len=*/5,
                                  /*micro_batch_size=*/2,
                                  /*seed=*/42);
  EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().message());
  return *c;
}

inline std::vector<const float*> const_ptrs(const std::vector<std::vector<float>>& unit) {
  std::vector<const float*> out;
  for (const auto& p : unit) {
    out.push_back(p.data());
  }
  return out;
}

inline std::vector<float*> mutable_ptrs(std::vector<std::vector<float>>& unit) {
  std::vector<float*> out;
  for (auto& p : unit) {
    out.push_back(p.data());
  }
  return out;
}

// Forward over every unit of microbatch `mb`, then (when `grads` is not null) backward over every
// unit in reverse, overwriting *grads with d(local loss of mb) / d(params).
inline void run_microbatch(HostDecoder& decoder, const ParamValues& params, std::int32_t mb,
                           ParamValues* grads) {
  const auto num_units = static_cast<std::int32_t>(params.size());
  for (std::int32_t u = 0; u < num_units; ++u) {
    decoder.forward(u, mb, const_ptrs(params[static_cast<std::size_t>(u)]));
  }
  if (grads == nullptr) {
    return;
  }
  *grads = params;
  for (std::int32_t u = num_units; u-- > 0;) {
    const auto i = static_cast<std::size_t>(u);
    decoder.backward(u, mb, const_ptrs(params[i]), mutable_ptrs((*grads)[i]));
  }
}

// The loss of the single microbatch of step 0 on rank 0 of 1, and its gradients when asked.
inline double loss_and_grads(const DecoderConfig& config, const ParamValues& params,
                             ParamValues* grads = nullptr) {
  auto made = HostDecoder::make(config, /*num_microbatches=*/1, /*data_rank=*/0,
                                /*data_world=*/1);
  EXPECT_TRUE(made.has_value());
  HostDecoder& decoder = **made;
  decoder.begin_step(0);
  run_microbatch(decoder, params, 0, grads);
  return decoder.step_loss();
}

// Initial parameters with every 1-D tensor (norm weights, biases) moved to uniform in [0.5, 1.5),
// so that a backward that forgot a norm weight or a bias would show.
inline ParamValues perturbed_parameters(const DecoderConfig& config) {
  ParamValues params = initial_parameters(config);
  std::uint64_t n = 0;
  const Model model = decoder_model(config).value();
  for (std::size_t u = 0; u < params.size(); ++u) {
    for (std::size_t p = 0; p < params[u].size(); ++p) {
      if (model.units()[u].params()[p].shape().ndim() != 1) {
        continue;
      }
      for (float& w : params[u][p]) {
        w = static_cast<float>(0.5 + internal::unit_interval(internal::splitmix64(++n)));
      }
    }
  }
  return params;
}

// Central difference of the loss in parameter (u, p, e), divided by the step actually taken
// after rounding to fp32.
inline double numeric_gradient(const DecoderConfig& config, ParamValues& params, std::size_t u,
                               std::size_t p, std::size_t e) {
  float& w = params[u][p][e];
  const float saved = w;
  const float step = 1e-2F * std::max(1.0F, std::fabs(saved));
  w = saved + step;
  const float plus = w;
  const double loss_plus = loss_and_grads(config, params);
  w = saved - step;
  const float minus = w;
  const double loss_minus = loss_and_grads(config, params);
  w = saved;
  return (loss_plus - loss_minus) / (static_cast<double>(plus) - minus);
}

// Checks every element of every parameter of unit u; returns the largest |analytic gradient|.
inline double check_unit(const DecoderConfig& config, std::size_t u) {
  ParamValues params = perturbed_parameters(config);
  ParamValues grads;
  loss_and_grads(config, params, &grads);
  const Model model = decoder_model(config).value();
  double largest = 0.0;
  for (std::size_t p = 0; p < params[u].size(); ++p) {
    const std::string& name = model.units()[u].params()[p].name();
    for (std::size_t e = 0; e < params[u][p].size(); ++e) {
      const double analytic = grads[u][p][e];
      const double numeric = numeric_gradient(config, params, u, p, e);
      largest = std::max(largest, std::fabs(analytic));
      EXPECT_NEAR(analytic, numeric, 2e-4 + 2e-3 * std::fabs(numeric)) << name << "[" << e << "]";
    }
  }
  return largest;
}

// Asserts that every element of every parameter of `got` is within `relative` of the largest
// |element| of the same parameter of `want` (e.g. the joined gradients of a split decoder against
// the whole decoder's).
inline void expect_params_near(const ParamValues& got, const ParamValues& want, double relative) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t u = 0; u < got.size(); ++u) {
    ASSERT_EQ(got[u].size(), want[u].size()) << "unit " << u;
    for (std::size_t p = 0; p < got[u].size(); ++p) {
      ASSERT_EQ(got[u][p].size(), want[u][p].size()) << "unit " << u << " param " << p;
      double scale = 1e-30;
      for (const float g : want[u][p]) {
        scale = std::max(scale, static_cast<double>(std::fabs(g)));
      }
      for (std::size_t e = 0; e < got[u][p].size(); ++e) {
        ASSERT_NEAR(got[u][p][e], want[u][p][e], relative * scale)
            << "unit " << u << " param " << p << " element " << e;
      }
    }
  }
}

}  // namespace fsdp::backend::testing

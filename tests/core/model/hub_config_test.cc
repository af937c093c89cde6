// SPDX-License-Identifier: Apache-2.0
// The hub config importer: exact parameter counts for every preset (shared/data/models/README.md),
// the unit and tensor structure per family, the FLOP accounting against published figures, and
// one-line errors for every kind of malformed input.
#include "core/model/hub_config.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "core/model/model_presets.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fsdp {
namespace {

using nlohmann::json;

// Imported once per test binary: DeepSeek-V3 has 45k tensors, slow to build under sanitizers.
const Model& preset(std::string_view name) {
  static std::map<std::string, Model, std::less<>> cache;
  if (const auto it = cache.find(name); it != cache.end()) {
    return it->second;
  }
  auto m = load_model_preset(name);
  EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().message());
  return cache.emplace(std::string(name), std::move(m).value()).first->second;
}

const Param* find_param(const Model& m, std::string_view name) {
  for (const Unit& u : m.units()) {
    for (const Param& p : u.params()) {
      if (p.name() == name) {
        return &p;
      }
    }
  }
  return nullptr;
}

// Sum of the norm weights and biases and embedding tables: the parameters no matmul uses.
std::int64_t non_matmul_params(const Model& m) {
  std::int64_t n = 0;
  for (const Unit& u : m.units()) {
    for (const Param& p : u.params()) {
      const bool lookup = p.name().find("embed_tokens") != std::string::npos ||
                          p.name().find("wte") != std::string::npos ||
                          p.name().find("wpe") != std::string::npos;
      if (p.shape().ndim() == 1 || lookup) {
        n += p.numel();
      }
    }
  }
  return n;
}

TEST(HubConfigTest, ExactParameterCountsOfEveryPreset) {
  EXPECT_EQ(preset("llama-3-8b").num_parameters(), 8'030'261'248);
  EXPECT_EQ(preset("llama-3-70b").num_parameters(), 70'553'706'496);
  EXPECT_EQ(preset("llama-3.1-405b").num_parameters(), 405'853'388'800);
  EXPECT_EQ(preset("mixtral-8x7b").num_parameters(), 46'702'792'704);
  EXPECT_EQ(preset("qwen2.5-7b").num_parameters(), 7'615'616'512);
  EXPECT_EQ(preset("deepseek-v3").num_parameters(), 671'026'419'200);
  EXPECT_EQ(preset("gpt3-175b").num_parameters(), 174'604'259'328);
}

TEST(HubConfigTest, DeepseekV3IsWithinHalfAPercentOf671Billion) {
  const double n = static_cast<double>(preset("deepseek-v3").num_parameters());
  EXPECT_LT(std::abs(n / 671e9 - 1.0), 0.005);
}

TEST(HubConfigTest, Gpt3IsAbout175Billion) {
  const double n = static_cast<double>(preset("gpt3-175b").num_parameters());
  EXPECT_LT(std::abs(n / 175e9 - 1.0), 0.01);
}

TEST(HubConfigTest, LlamaUnitsAndTensors) {
  const Model& m = preset("llama-3-8b");
  EXPECT_EQ(m.name(), "llama-3-8b");
  ASSERT_EQ(m.num_units(), 34);
  EXPECT_EQ(m.units().front().name(), "embedding");
  EXPECT_EQ(m.units()[1].name(), "layers.0");
  EXPECT_EQ(m.units().back().name(), "head");
  for (const Unit& u : m.units()) {
    EXPECT_EQ(u.parent(), Unit::kNoParent);
  }
  const Unit& layer = m.units()[1];
  std::vector<std::string> names;
  for (const Param& p : layer.params()) {
    names.push_back(p.name());
    EXPECT_EQ(p.dtype(), DType::kBf16);
    EXPECT_TRUE(p.requires_grad());
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "model.layers.0.self_attn.q_proj.weight",
                       "model.layers.0.self_attn.k_proj.weight",
                       "model.layers.0.self_attn.v_proj.weight",
                       "model.layers.0.self_attn.o_proj.weight",
                       "model.layers.0.mlp.gate_proj.weight",
                       "model.layers.0.mlp.up_proj.weight",
                       "model.layers.0.mlp.down_proj.weight",
                       "model.layers.0.input_layernorm.weight",
                       "model.layers.0.post_attention_layernorm.weight",
                   }));
  EXPECT_EQ(find_param(m, "model.layers.0.self_attn.k_proj.weight")->shape(),
            Shape::make({1024, 4096}).value());
  EXPECT_EQ(find_param(m, "model.layers.31.mlp.down_proj.weight")->shape(),
            Shape::make({4096, 14336}).value());
  EXPECT_EQ(find_param(m, "lm_head.weight")->shape(), Shape::make({128256, 4096}).value());
}

TEST(HubConfigTest, QwenHasQkvBiasesButNoOutputBias) {
  const Model& m = preset("qwen2.5-7b");
  EXPECT_EQ(find_param(m, "model.layers.0.self_attn.q_proj.bias")->shape(),
            Shape::make({3584}).value());
  EXPECT_EQ(find_param(m, "model.layers.0.self_attn.k_proj.bias")->shape(),
            Shape::make({512}).value());
  EXPECT_NE(find_param(m, "model.layers.0.self_attn.v_proj.bias"), nullptr);
  EXPECT_EQ(find_param(m, "model.layers.0.self_attn.o_proj.bias"), nullptr);
}

TEST(HubConfigTest, MixtralHasEightExpertsAndARouterPerLayer) {
  const Model& m = preset("mixtral-8x7b");
  EXPECT_EQ(find_param(m, "model.layers.5.block_sparse_moe.gate.weight")->shape(),
            Shape::make({8, 4096}).value());
  EXPECT_EQ(find_param(m, "model.layers.5.block_sparse_moe.experts.7.w2.weight")->shape(),
            Shape::make({4096, 14336}).value());
  EXPECT_EQ(find_param(m, "model.layers.5.block_sparse_moe.experts.8.w1.weight"), nullptr);
}

TEST(HubConfigTest, DeepseekV3HasMlaDenseAndMoeLayers) {
  const Model& m = preset("deepseek-v3");
  ASSERT_EQ(m.num_units(), 63);  // embedding + 61 layers (no MTP layer) + head
  EXPECT_EQ(find_param(m, "model.layers.0.self_attn.q_a_proj.weight")->shape(),
            Shape::make({1536, 7168}).value());
  EXPECT_EQ(find_param(m, "model.layers.0.self_attn.q_b_proj.weight")->shape(),
            Shape::make({128 * 192, 1536}).value());
  EXPECT_EQ(find_param(m, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight")->shape(),
            Shape::make({576, 7168}).value());
  EXPECT_EQ(find_param(m, "model.layers.0.self_attn.kv_b_proj.weight")->shape(),
            Shape::make({128 * 256, 512}).value());
  EXPECT_EQ(find_param(m, "model.layers.0.self_attn.o_proj.weight")->shape(),
            Shape::make({7168, 128 * 128}).value());
  // Layers 0-2 are dense, 3-60 are MoE.
  EXPECT_EQ(find_param(m, "model.layers.2.mlp.gate_proj.weight")->shape(),
            Shape::make({18432, 7168}).value());
  EXPECT_EQ(find_param(m, "model.layers.3.mlp.gate_proj.weight"), nullptr);
  EXPECT_EQ(find_param(m, "model.layers.3.mlp.experts.255.down_proj.weight")->shape(),
            Shape::make({7168, 2048}).value());
  EXPECT_EQ(find_param(m, "model.layers.60.mlp.shared_experts.up_proj.weight")->shape(),
            Shape::make({2048, 7168}).value());
  const Param* bias = find_param(m, "model.layers.3.mlp.gate.e_score_correction_bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->dtype(), DType::kFp32);
  EXPECT_FALSE(bias->requires_grad());
  EXPECT_EQ(m.num_parameters() - m.num_trainable_parameters(), 58 * 256);
  EXPECT_EQ(find_param(m, "model.layers.61.input_layernorm.weight"), nullptr);
}

TEST(HubConfigTest, Gpt2StyleTiesTheHeadAndLearnsPositions) {
  const Model& m = preset("gpt3-175b");
  EXPECT_EQ(m.num_units(), 98);
  EXPECT_EQ(find_param(m, "lm_head.weight"), nullptr);
  EXPECT_EQ(find_param(m, "transformer.wpe.weight")->shape(), Shape::make({2048, 12288}).value());
  EXPECT_EQ(find_param(m, "transformer.h.0.attn.c_attn.weight")->shape(),
            Shape::make({12288, 3 * 12288}).value());
  EXPECT_EQ(find_param(m, "transformer.h.95.mlp.c_fc.weight")->shape(),
            Shape::make({12288, 4 * 12288}).value());
  EXPECT_NE(find_param(m, "transformer.ln_f.bias"), nullptr);
  // The tied head still does its logits matmul.
  EXPECT_EQ(m.units().back().flops().matmul, 2LL * 12288 * 50257);
}

TEST(HubConfigTest, GptTwoSmallHasItsPublishedCount) {
  const json config = {{"model_type", "gpt2"}, {"n_embd", 768},      {"n_layer", 12},
                       {"n_head", 12},         {"n_positions", 1024}, {"vocab_size", 50257}};
  const auto m = import_hub_config(config.dump(), "gpt2.json");
  ASSERT_TRUE(m.has_value()) << m.error().message();
  EXPECT_EQ(m->num_parameters(), 124'439'808);  // GPT-2 small (124M)
  EXPECT_EQ(m->units().front().params().front().dtype(), DType::kFp32);  // no torch_dtype
  EXPECT_EQ(m->name(), "gpt2");
}

// Dense model: forward matmul FLOPs per token = 2 x every matmul weight (all but the embedding and
// the norms), so the training FLOPs per token are 6 x those parameters (Kaplan et al. 2020).
TEST(HubConfigTest, DenseForwardMatmulFlopsAreTwicePerMatmulParameter) {
  for (const char* name : {"llama-3-8b", "llama-3-70b", "llama-3.1-405b", "qwen2.5-7b"}) {
    const Model& m = preset(name);
    EXPECT_EQ(m.flops().matmul, 2 * (m.num_parameters() - non_matmul_params(m))) << name;
  }
  // Tied GPT-3: the head's matmul reuses the embedding table.
  const Model& gpt3 = preset("gpt3-175b");
  EXPECT_EQ(gpt3.flops().matmul, 2 * (gpt3.num_parameters() - non_matmul_params(gpt3) +
                                      50257LL * 12288));
}

// Brown et al. 2020, Table D.1: GPT-3 175B was trained with 3.14e23 FLOPs on 300B tokens; that
// figure is 6 x N x D ignoring attention.
TEST(HubConfigTest, Gpt3TrainingComputeMatchesThePublishedFigure) {
  const Model& m = preset("gpt3-175b");
  const double total = 3.0 * static_cast<double>(m.flops().matmul) * 300e9;
  EXPECT_NEAR(total / 3.14e23, 1.0, 0.005);
}

// Llama 3 paper (Dubey et al. 2024): 405B trained with 3.8e25 FLOPs on 15.6T tokens.
TEST(HubConfigTest, Llama405bTrainingComputeMatchesThePublishedFigure) {
  const Model& m = preset("llama-3.1-405b");
  const double total = 3.0 * static_cast<double>(m.flops().matmul) * 15.6e12;
  EXPECT_NEAR(total / 3.8e25, 1.0, 0.01);
}

// Narayanan et al. 2021 (eq. 3): with full recomputation a GPT iteration costs
// 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) FLOPs: 4 passes over the layers, 3 over the logits.
TEST(HubConfigTest, AttentionAccountingMatchesMegatronFormula) {
  const Model& m = preset("gpt3-175b");
  const std::int64_t h = 12288;
  const std::int64_t l = 96;
  const std::int64_t v = 50257;
  const std::int64_t s = 2048;
  std::int64_t layers_forward = 0;
  for (const Unit& u : m.units()) {
    if (u.name().starts_with("layers.")) {
      layers_forward += u.forward_flops_per_token(s).value();
    }
  }
  const std::int64_t head_forward = m.units().back().forward_flops_per_token(s).value();
  const std::int64_t per_token = 4 * layers_forward + 3 * head_forward;
  EXPECT_EQ(per_token, 96 * l * h * h + 16 * s * l * h + 6 * v * h);
}

// Only the experts a token is routed to do work: Mixtral's published 12.9B active parameters.
TEST(HubConfigTest, MoeFlopsCountOnlyRoutedExperts) {
  const Model& m = preset("mixtral-8x7b");
  const std::int64_t h = 4096;
  const std::int64_t attention = h * h * 2 + 2 * h * 1024;
  const std::int64_t per_layer = attention + 8 * h + 2 * 3 * h * 14336;
  EXPECT_EQ(m.flops().matmul, 2 * (32 * per_layer + 32000 * h));
  const double active = static_cast<double>(m.flops().matmul / 2 + non_matmul_params(m));
  EXPECT_NEAR(active / 12.9e9, 1.0, 0.01);
  // Against all experts the count would be 4x larger per MoE block.
  EXPECT_LT(m.flops().matmul, m.num_parameters());
}

TEST(HubConfigTest, DeepseekV3ActivatesAbout37BillionParameters) {
  const Model& m = preset("deepseek-v3");
  const std::int64_t h = 7168;
  const std::int64_t mla = h * 1536 + 1536 * 128 * 192 + h * 576 + 512 * 128 * 256 + 128 * 128 * h;
  const std::int64_t dense = mla + 3 * h * 18432;
  const std::int64_t moe = mla + 256 * h + 9 * 3 * h * 2048;  // 8 routed + 1 shared expert
  EXPECT_EQ(m.flops().matmul, 2 * (3 * dense + 58 * moe + 129280 * h));
  const double active = static_cast<double>(m.flops().matmul / 2 + non_matmul_params(m));
  EXPECT_NEAR(active / 37e9, 1.0, 0.02);
  // MLA attention: scores over 192 dims, context over 128, for each of 128 heads.
  EXPECT_EQ(m.units()[1].flops().attention_per_seq, 2 * 128 * (192 + 128));
}

TEST(HubConfigTest, ActivationsAreCountedWithAndWithoutRecompute) {
  const Model& m = preset("llama-3-8b");
  const Unit& layer = m.units()[1];
  // norm in/out x2, q, k, v, attention output, gate, up, down input (bf16) + fp32 LSE per head.
  EXPECT_EQ(layer.activations().stored,
            2 * (4 * 4096 + 4096 + 1024 + 1024 + 4096 + 3 * 14336) + 4 * 32);
  EXPECT_EQ(layer.activations().recompute, 2 * 4096);
  EXPECT_EQ(m.units().back().activations().stored, 2 * 2 * 4096 + 4 * 128256);
}

// docs/models.md, "Worked example: a Llama 3 8B layer at s = 8192": the hand derivation.
TEST(HubConfigTest, CheckpointFiguresOfALlama3_8bLayer) {
  const Model& m = preset("llama-3-8b");
  const Unit& layer = m.units()[1];
  const UnitActivations& a = layer.activations();
  EXPECT_EQ(a.stored, 139'392);
  EXPECT_EQ(a.recompute, 8'192);
  EXPECT_TRUE(a.block);
  ASSERT_TRUE(a.selective_op.has_value());
  // Kept: input, q_proj output (mm 1), v (mm 3), attention output + lse, gate (mm 5), down
  // output (mm 7).
  EXPECT_EQ(a.selective_op->kept, 8'192 + 8'192 + 2'048 + 8'192 + 128 + 28'672 + 8'192);
  EXPECT_EQ(a.selective_op->kept, 63'616);
  // Of these, down_proj's output feeds only the layer's output: a compiled block does not keep it.
  EXPECT_EQ(a.selective_op->unread, 8'192);
  // Re-materialised: norm output, q and k after rotary, residual, norm output, up, SiLU x up.
  EXPECT_EQ(a.selective_op->transient, 8'192 + 8'192 + 2'048 + 8'192 + 8'192 + 28'672 + 28'672);
  EXPECT_EQ(a.selective_op->transient, 92'160);
  // Recomputed matmuls: k_proj (mm 2), o_proj (mm 4), up_proj (mm 6); attention is saved.
  EXPECT_EQ(a.selective_op->flops, (UnitFlops{2 * 4096 * (1024 + 4096 + 14336), 0}));
  EXPECT_EQ(a.selective_op->flops.matmul, 159'383'552);
  ASSERT_TRUE(a.core_attention.has_value());
  EXPECT_EQ(a.core_attention->kept, 139'392 - 128);
  EXPECT_EQ(a.core_attention->transient, 8'192 + 128);
  EXPECT_EQ(a.core_attention->flops, (UnitFlops{0, 16'384}));
  EXPECT_EQ(a.core_attention->unread, 0);
  // GiB per layer at s = 8192, micro-batch 1 (docs/models.md's table).
  const auto gib = [](std::int64_t per_token) {
    return static_cast<double>(per_token * 8192) / static_cast<double>(1LL << 30);
  };
  EXPECT_NEAR(gib(a.stored), 1.0635, 5e-5);
  EXPECT_NEAR(gib(a.recompute), 0.0625, 5e-5);
  EXPECT_NEAR(gib(a.selective_op->kept), 0.4854, 5e-5);
  EXPECT_NEAR(gib(a.selective_op->kept - a.selective_op->unread), 0.4229, 5e-5);
  EXPECT_NEAR(gib(a.selective_op->transient), 0.7031, 5e-5);
  EXPECT_NEAR(gib(a.core_attention->kept), 1.0625, 5e-5);
  // torchtitan checkpoints the blocks only: embedding and head keep everything.
  for (const Unit* u : {&m.units().front(), &m.units().back()}) {
    EXPECT_FALSE(u->activations().block) << u->name();
    EXPECT_EQ(u->activations().selective_op, (CheckpointFigures{.kept = u->activations().stored}))
        << u->name();
    EXPECT_EQ(u->activations().core_attention, u->activations().selective_op) << u->name();
  }
}

// Invariants of the per-tensor accounting on every preset's blocks (dense, GQA, MLA, MoE, GPT).
TEST(HubConfigTest, CheckpointFiguresAreConsistentOnEveryPreset) {
  for (const char* name :
       {"llama-3-8b", "llama-3-70b", "gpt3-175b", "mixtral-8x7b", "deepseek-v3"}) {
    const Model& m = preset(name);
    for (const Unit& u : m.units()) {
      const UnitActivations& a = u.activations();
      if (!a.block) {
        continue;
      }
      ASSERT_TRUE(a.selective_op.has_value() && a.core_attention.has_value()) << name;
      // Only the attention core's lse is freed by core-attention; its output is re-materialised.
      const std::int64_t lse = a.stored - a.core_attention->kept;
      EXPECT_GT(lse, 0) << name << " " << u.name();
      EXPECT_EQ(a.core_attention->flops, (UnitFlops{0, u.flops().attention_per_seq}));
      EXPECT_GT(a.core_attention->transient, lse);
      // selective-op saves the attention and recomputes part of the matmuls.
      EXPECT_EQ(a.selective_op->flops.attention_per_seq, 0) << name;
      EXPECT_GT(a.selective_op->flops.matmul, 0) << name;
      EXPECT_LE(a.selective_op->flops.matmul, u.flops().matmul) << name;
      EXPECT_GE(a.selective_op->kept, a.recompute) << name;
      EXPECT_LT(a.selective_op->transient, a.stored) << name;
      // Everything backward reads is kept or re-materialised.
      EXPECT_GE(a.selective_op->kept + a.selective_op->transient, a.stored) << name;
    }
  }
}

// GPT-2's Conv1D is addmm, which torchtitan's save list does not hold: selective-op keeps only
// the layer input and the attention, and recomputes every matmul.
TEST(HubConfigTest, SelectiveOpRecomputesEveryAddmm) {
  const json config = {{"model_type", "gpt2"}, {"n_embd", 768},       {"n_layer", 2},
                       {"n_head", 12},         {"n_positions", 1024}, {"vocab_size", 50257}};
  const Model m = import_hub_config(config.dump(), "gpt2.json").value();
  const UnitActivations& a = m.units()[1].activations();
  EXPECT_EQ(a.selective_op->kept, 4 * 768 + 4 * 768 + 4 * 12);  // fp32 (no torch_dtype)
  EXPECT_EQ(a.selective_op->flops.matmul, m.units()[1].flops().matmul);
  EXPECT_EQ(a.selective_op->kept + a.selective_op->transient, a.stored);
}

TEST(HubConfigTest, HeadDimAndTiedEmbeddingsAreHonoured) {
  const json config = {{"model_type", "mistral"},   {"hidden_size", 5120},
                       {"intermediate_size", 14336}, {"num_attention_heads", 32},
                       {"num_key_value_heads", 8},   {"head_dim", 128},
                       {"num_hidden_layers", 2},     {"vocab_size", 1000},
                       {"tie_word_embeddings", true}, {"torch_dtype", "bfloat16"}};
  const auto m = import_hub_config(config.dump(), "nemo.json", "nemo");
  ASSERT_TRUE(m.has_value()) << m.error().message();
  EXPECT_EQ(m->name(), "nemo");
  EXPECT_EQ(find_param(*m, "model.layers.0.self_attn.q_proj.weight")->shape(),
            Shape::make({4096, 5120}).value());
  EXPECT_EQ(find_param(*m, "lm_head.weight"), nullptr);
}

// ---- malformed input ---------------------------------------------------------------------------

json llama_config() {
  return json::parse(find_model_preset("llama-3-8b")->config_json);
}

std::string import_error(const json& config) {
  const auto m = import_hub_config(config.dump(), "cfg.json");
  EXPECT_FALSE(m.has_value());
  return m ? std::string() : m.error().message();
}

TEST(HubConfigErrorTest, UnknownModelType) {
  json c = llama_config();
  c["model_type"] = "bert";
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'model_type': expected one of llama, mistral, mixtral, qwen2, "
            "deepseek_v3, gpt2, got \"bert\"");
}

TEST(HubConfigErrorTest, MissingField) {
  json c = llama_config();
  c.erase("hidden_size");
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'hidden_size': expected a positive integer, got nothing (the field "
            "is missing)");
  c = llama_config();
  c.erase("model_type");
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'model_type': expected a string, got nothing (the field is missing)");
}

TEST(HubConfigErrorTest, NegativeAndZeroFields) {
  json c = llama_config();
  c["num_hidden_layers"] = -3;
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'num_hidden_layers': expected a positive integer, got -3");
  c = llama_config();
  c["vocab_size"] = 0;
  EXPECT_EQ(import_error(c), "cfg.json: field 'vocab_size': expected a positive integer, got 0");
}

TEST(HubConfigErrorTest, WrongTypes) {
  json c = llama_config();
  c["intermediate_size"] = "big";
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'intermediate_size': expected a positive integer, got \"big\"");
  c = llama_config();
  c["hidden_size"] = 4096.5;
  EXPECT_EQ(import_error(c), "cfg.json: field 'hidden_size': expected a positive integer, got 4096.5");
  c = llama_config();
  c["tie_word_embeddings"] = "yes";
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'tie_word_embeddings': expected true or false, got \"yes\"");
  c = llama_config();
  c["torch_dtype"] = "int8";
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'torch_dtype': expected one of bfloat16, float16, float32, "
            "float8_e4m3fn, got \"int8\"");
}

TEST(HubConfigErrorTest, HeadsMustDivideHiddenSize) {
  json c = llama_config();
  c["num_attention_heads"] = 48;
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'num_attention_heads': expected a divisor of hidden_size 4096, got "
            "48");
  c = llama_config();
  c["num_key_value_heads"] = 5;
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'num_key_value_heads': expected a divisor of num_attention_heads 32, "
            "got 5");
  const json gpt = {{"model_type", "gpt2"}, {"n_embd", 100},      {"n_layer", 1},
                    {"n_head", 3},          {"n_positions", 16}, {"vocab_size", 10}};
  EXPECT_EQ(import_error(gpt),
            "cfg.json: field 'n_head': expected a divisor of n_embd 100, got 3");
}

TEST(HubConfigErrorTest, MoeContradictions) {
  json c = json::parse(find_model_preset("mixtral-8x7b")->config_json);
  c["num_experts_per_tok"] = 9;
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'num_experts_per_tok': expected at most num_local_experts 8, got 9");
  json d = json::parse(find_model_preset("deepseek-v3")->config_json);
  d.erase("kv_lora_rank");
  EXPECT_EQ(import_error(d),
            "cfg.json: field 'kv_lora_rank': expected a positive integer, got nothing (the field "
            "is missing)");
}

TEST(HubConfigErrorTest, SizesThatOverflowInt64) {
  json c = llama_config();
  c["hidden_size"] = 9223372036854775807LL;
  c["num_attention_heads"] = 1;
  c["num_key_value_heads"] = 1;
  const std::string e = import_error(c);
  EXPECT_EQ(e.rfind("cfg.json: field 'vocab_size': expected dims whose product fits int64, got "
                    "128256 x 9223372036854775807 (tensor 'model.embed_tokens.weight')",
                    0),
            0U)
      << e;
  c = llama_config();
  c["hidden_size"] = json::parse("18446744073709551615");
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'hidden_size': expected a positive integer that fits int64, got "
            "18446744073709551615");
  c = llama_config();
  c["hidden_size"] = json::parse("1e300");
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'hidden_size': expected a positive integer that fits int64, got "
            "1e+300");
}

TEST(HubConfigErrorTest, FlopOverflowIsReported) {
  json c = llama_config();
  // Every tensor fits, but 2 x 3 x h x i does not.
  c["hidden_size"] = 1LL << 30;
  c["intermediate_size"] = 1LL << 31;
  c["num_attention_heads"] = 1LL << 30;
  c["num_key_value_heads"] = 1LL << 30;
  c["vocab_size"] = 1;
  const std::string e = import_error(c);
  EXPECT_EQ(e.rfind("cfg.json: ", 0), 0U) << e;
  EXPECT_NE(e.find("expected FLOP and activation-byte counts per token that fit int64"),
            std::string::npos)
      << e;
}

TEST(HubConfigErrorTest, TooManyLayersOrExpertsIsRefusedBeforeBuilding) {
  json c = llama_config();
  c["num_hidden_layers"] = 1'000'000;
  EXPECT_EQ(import_error(c),
            "cfg.json: field 'num_hidden_layers': expected at most 10000 layers, got 1000000");
  json d = json::parse(find_model_preset("mixtral-8x7b")->config_json);
  d["num_local_experts"] = 1'000'000;
  EXPECT_EQ(import_error(d),
            "cfg.json: field 'num_local_experts': expected a model of at most 1000000 tensors, "
            "got 1000000 experts in each of 32 layers");
}

TEST(HubConfigErrorTest, MalformedJsonAndNonObjects) {
  auto m = import_hub_config("{\"model_type\": ", "cfg.json");
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().message().rfind("cfg.json: invalid JSON: parse error at line 1, column 16",
                                      0),
            0U)
      << m.error().message();
  EXPECT_EQ(m.error().message().find('\n'), std::string::npos);
  m = import_hub_config("[1, 2]", "cfg.json");
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().message(), "cfg.json: top level: expected a JSON object, got [1, 2]");
}

}  // namespace
}  // namespace fsdp

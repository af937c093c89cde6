// SPDX-License-Identifier: Apache-2.0
// HubArch: what the hub-config importer reads from a config.json, normalised across the families
// it accepts (docs/models.md): sizes, attention and MLP shapes, biases, experts, and the numbers a
// real run needs besides the tensors (RoPE base, norm epsilon, sliding window). The importer
// (hub_config.h) builds the fsdp::Model from it; the training backends build the same network's
// kernels from it, so both describe one network. read_hub_arch validates every field;
// apply_hub_overrides shrinks a config for a test (`--layers`, `--hidden`, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/base/expected.h"
#include "core/model/dtype.h"

#include <nlohmann/json.hpp>

namespace fsdp {

struct HubArch {
  std::string model_type;
  bool gpt2_names = false;  // transformer.h.<i>... names, Conv1D (in, out) weights, LayerNorm
  DType dtype = DType::kFp32;
  std::int64_t hidden = 0;
  std::int64_t vocab = 0;
  std::int64_t layers = 0;
  std::int64_t positions = 0;  // learned absolute position embeddings (gpt2); 0: none
  bool tied = false;
  // Attention. qk_head_dim / v_head_dim are per head; kv_heads only for grouped-query attention.
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t qk_head_dim = 0;
  std::int64_t v_head_dim = 0;
  bool explicit_head_dim = false;  // the config gave head_dim (else hidden / heads)
  bool qkv_bias = false;
  bool o_bias = false;
  // Multi-head latent attention (deepseek_v3); q_lora 0 means q is projected directly.
  bool mla = false;
  std::int64_t q_lora = 0;
  std::int64_t kv_lora = 0;
  std::int64_t qk_rope = 0;
  // Dense MLP: gated (SwiGLU: gate, up, down) or plain (fc, proj with GELU).
  std::int64_t intermediate = 0;
  bool mlp_bias = false;
  // Mixture of experts; experts 0 means dense layers only.
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  std::int64_t expert_intermediate = 0;
  std::int64_t shared_intermediate = 0;  // all shared experts fused as one MLP; 0: none
  std::int64_t first_dense = 0;
  std::int64_t moe_freq = 1;
  bool score_correction_bias = false;  // deepseek_v3 noaux_tc router bias (fp32, not trained)
  // What a real run needs besides the tensors (RoPE families and RMSNorm; defaults as
  // transformers' LlamaConfig when the config omits them).
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  std::string rope_scaling;         // the rope_scaling type ("llama3", "linear", ...); "" = none
  std::int64_t sliding_window = 0;  // mistral; 0: full causal attention
};

// The model_type values read_hub_arch accepts.
std::span<const std::string_view> supported_model_types();

// Reads and validates a hub config's architecture. `source` (usually the path) starts every error,
// which names the field, the expected and the actual value: an unknown model_type, a missing,
// mistyped or out-of-range size, heads that do not divide the hidden size, kv heads that do not
// divide the heads, a non-positive or non-finite rope_theta / rms_norm_eps, too many layers or
// tensors (hub_config.h's limits). Never throws.
Expected<HubArch> read_hub_arch(const nlohmann::json& doc, std::string_view source);

// Sizes that replace a config's, to shrink a published model for a test; unset fields keep the
// config's value. hidden or heads given recompute the head size as hidden / heads (the config's
// head_dim no longer applies); kv_heads defaults to the config's when it still divides heads.
struct HubOverrides {
  std::optional<std::int64_t> layers;
  std::optional<std::int64_t> hidden;
  std::optional<std::int64_t> ffn;  // intermediate_size (and the experts' for mixtral)
  std::optional<std::int64_t> heads;
  std::optional<std::int64_t> kv_heads;
  std::optional<std::int64_t> vocab;
  std::optional<DType> dtype;

  bool empty() const {
    return !layers && !hidden && !ffn && !heads && !kv_heads && !vocab && !dtype;
  }
};

// The architecture with `overrides` applied. Errors (one line, naming the option as `--layers`,
// `--hidden`, ... and the expected and actual value): a size < 1 or beyond the importer's limits;
// heads that do not divide hidden; kv heads that do not divide heads; a head size override for a
// family whose head sizes do not follow hidden (deepseek_v3's --kv-heads).
Expected<HubArch> apply_hub_overrides(HubArch arch, const HubOverrides& overrides);

}  // namespace fsdp

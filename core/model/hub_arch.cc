// SPDX-License-Identifier: Apache-2.0
// Reading a hub config's architecture (hub_arch.h); the family rules are in docs/models.md.
#include "core/model/hub_arch.h"

#include <array>
#include <cmath>
#include <optional>

#include "core/base/strings.h"
#include "core/model/hub_config.h"
#include "core/model/internal/checked_arith.h"
#include "core/model/json_fields.h"

namespace fsdp {
namespace {

using internal::Arith;

constexpr std::array<std::string_view, 6> kModelTypes = {"llama",   "mistral",     "mixtral",
                                                         "qwen2",   "deepseek_v3", "gpt2"};

// A positive finite number (JSON integer or float); `fallback` when absent or null.
Expected<double> get_positive_double_or(const JsonObjectReader& r, std::string_view key,
                                        double fallback) {
  const nlohmann::json* v = r.find(key);
  if (v == nullptr) {
    return fallback;
  }
  if (!v->is_number()) {
    return r.error(key, "a positive number", describe_json(*v));
  }
  const double x = v->get<double>();
  if (!(x > 0.0 && std::isfinite(x))) {
    return r.error(key, "a positive finite number", describe_json(*v));
  }
  return x;
}

// rope_theta, rms_norm_eps, rope_scaling and sliding_window (families with RoPE and RMSNorm).
Status read_runtime_fields(const JsonObjectReader& r, HubArch& a) {
  FSDP_TRY(a.rope_theta, get_positive_double_or(r, "rope_theta", 10000.0));
  FSDP_TRY(a.rms_norm_eps, get_positive_double_or(r, "rms_norm_eps", 1e-6));
  if (const nlohmann::json* scaling = r.find("rope_scaling"); scaling != nullptr) {
    if (!scaling->is_object()) {
      return r.error("rope_scaling", "an object or null", describe_json(*scaling));
    }
    FSDP_TRY(const JsonObjectReader s, JsonObjectReader::make(*scaling, r.source(), "rope_scaling"));
    FSDP_TRY(std::optional<std::string> type, s.get_optional_string("rope_type"));
    if (!type) {
      FSDP_TRY(type, s.get_optional_string("type"));
    }
    a.rope_scaling = type.value_or("unknown");
  }
  FSDP_TRY(a.sliding_window, r.get_int_or("sliding_window", 1, 0));
  return ok_status();
}

Status check_divides(const JsonObjectReader& r, std::string_view divisor_key, std::int64_t divisor,
                     std::string_view dividend_key, std::int64_t dividend) {
  if (dividend % divisor != 0) {
    return r.error(divisor_key, str_cat("a divisor of ", dividend_key, " ", dividend),
                   str_cat(divisor));
  }
  return ok_status();
}

Expected<DType> read_dtype(const JsonObjectReader& r) {
  FSDP_TRY(const std::optional<std::string> text, r.get_optional_string("torch_dtype"));
  if (!text) {
    return DType::kFp32;  // transformers loads weights in float32 when torch_dtype is absent
  }
  auto dtype = parse_dtype(*text);
  if (!dtype) {
    return r.error("torch_dtype", "one of bfloat16, float16, float32, float8_e4m3fn",
                   describe_json(*r.find("torch_dtype")));
  }
  return dtype;
}

// llama, mistral, mixtral, qwen2: grouped-query attention with RoPE and a SwiGLU MLP.
Expected<HubArch> read_llama_like(const JsonObjectReader& r, HubArch a) {
  FSDP_TRY(a.hidden, r.get_int("hidden_size", 1));
  FSDP_TRY(a.intermediate, r.get_int("intermediate_size", 1));
  FSDP_TRY(a.layers, r.get_int("num_hidden_layers", 1));
  FSDP_TRY(a.vocab, r.get_int("vocab_size", 1));
  FSDP_TRY(a.heads, r.get_int("num_attention_heads", 1));
  FSDP_TRY(a.kv_heads, r.get_int_or("num_key_value_heads", 1, a.heads));
  FSDP_TRY(const std::optional<std::int64_t> head_dim, r.get_optional_int("head_dim", 1));
  if (head_dim) {
    a.qk_head_dim = *head_dim;
    a.explicit_head_dim = true;
  } else {
    FSDP_RETURN_IF_ERROR(check_divides(r, "num_attention_heads", a.heads, "hidden_size", a.hidden));
    a.qk_head_dim = a.hidden / a.heads;
  }
  a.v_head_dim = a.qk_head_dim;
  if (a.kv_heads > a.heads || a.heads % a.kv_heads != 0) {
    return r.error("num_key_value_heads",
                   str_cat("a divisor of num_attention_heads ", a.heads), str_cat(a.kv_heads));
  }
  FSDP_TRY(a.tied, r.get_bool_or("tie_word_embeddings", false));
  if (a.model_type == "llama") {
    FSDP_TRY(const bool attention_bias, r.get_bool_or("attention_bias", false));
    FSDP_TRY(a.mlp_bias, r.get_bool_or("mlp_bias", false));
    a.qkv_bias = attention_bias;
    a.o_bias = attention_bias;
  } else if (a.model_type == "qwen2") {
    a.qkv_bias = true;  // Qwen2 always has q/k/v biases and no o_proj bias
  } else if (a.model_type == "mixtral") {
    FSDP_TRY(a.experts, r.get_int("num_local_experts", 1));
    FSDP_TRY(a.top_k, r.get_int("num_experts_per_tok", 1));
    if (a.top_k > a.experts) {
      return r.error("num_experts_per_tok",
                     str_cat("at most num_local_experts ", a.experts), str_cat(a.top_k));
    }
    a.expert_intermediate = a.intermediate;
  }
  return a;
}

Expected<HubArch> read_deepseek_v3(const JsonObjectReader& r, HubArch a) {
  a.mla = true;
  FSDP_TRY(a.hidden, r.get_int("hidden_size", 1));
  FSDP_TRY(a.intermediate, r.get_int("intermediate_size", 1));
  FSDP_TRY(a.layers, r.get_int("num_hidden_layers", 1));
  FSDP_TRY(a.vocab, r.get_int("vocab_size", 1));
  FSDP_TRY(a.heads, r.get_int("num_attention_heads", 1));
  FSDP_TRY(a.q_lora, r.get_int_or("q_lora_rank", 1, 0));
  FSDP_TRY(a.kv_lora, r.get_int("kv_lora_rank", 1));
  FSDP_TRY(const std::int64_t qk_nope, r.get_int("qk_nope_head_dim", 0));
  FSDP_TRY(a.qk_rope, r.get_int("qk_rope_head_dim", 0));
  FSDP_TRY(a.v_head_dim, r.get_int("v_head_dim", 1));
  Arith m;
  a.qk_head_dim = m.add(qk_nope, a.qk_rope);
  if (m.overflow() || a.qk_head_dim == 0) {
    return r.error("qk_nope_head_dim", "a head size qk_nope_head_dim + qk_rope_head_dim in [1, 2^63)",
                   str_cat(qk_nope, " + ", a.qk_rope));
  }
  FSDP_TRY(const bool attention_bias, r.get_bool_or("attention_bias", false));
  a.qkv_bias = attention_bias;  // on q_a_proj (or q_proj) and kv_a_proj_with_mqa; see build
  a.o_bias = attention_bias;
  FSDP_TRY(a.tied, r.get_bool_or("tie_word_embeddings", false));
  FSDP_TRY(a.experts, r.get_int_or("n_routed_experts", 1, 0));
  if (a.experts > 0) {
    FSDP_TRY(a.expert_intermediate, r.get_int("moe_intermediate_size", 1));
    FSDP_TRY(a.top_k, r.get_int("num_experts_per_tok", 1));
    if (a.top_k > a.experts) {
      return r.error("num_experts_per_tok", str_cat("at most n_routed_experts ", a.experts),
                     str_cat(a.top_k));
    }
    FSDP_TRY(const std::int64_t shared, r.get_int_or("n_shared_experts", 0, 0));
    a.shared_intermediate = m.mul(shared, a.expert_intermediate);
    if (m.overflow()) {
      return r.error("n_shared_experts",
                     "a count whose product with moe_intermediate_size fits int64",
                     str_cat(shared));
    }
    FSDP_TRY(a.first_dense, r.get_int_or("first_k_dense_replace", 0, 0));
    FSDP_TRY(a.moe_freq, r.get_int_or("moe_layer_freq", 1, 1));
    FSDP_TRY(const std::optional<std::string> topk_method, r.get_optional_string("topk_method"));
    a.score_correction_bias = !topk_method || *topk_method == "noaux_tc";
  }
  return a;
}

Expected<HubArch> read_gpt2(const JsonObjectReader& r, HubArch a) {
  a.gpt2_names = true;
  FSDP_TRY(a.hidden, r.get_int("n_embd", 1));
  FSDP_TRY(a.layers, r.get_int("n_layer", 1));
  FSDP_TRY(a.heads, r.get_int("n_head", 1));
  FSDP_TRY(a.positions, r.get_int("n_positions", 1));
  FSDP_TRY(a.vocab, r.get_int("vocab_size", 1));
  FSDP_RETURN_IF_ERROR(check_divides(r, "n_head", a.heads, "n_embd", a.hidden));
  a.kv_heads = a.heads;
  a.qk_head_dim = a.hidden / a.heads;
  a.v_head_dim = a.qk_head_dim;
  a.qkv_bias = true;
  a.o_bias = true;
  a.mlp_bias = true;
  FSDP_TRY(const std::optional<std::int64_t> inner, r.get_optional_int("n_inner", 1));
  if (inner) {
    a.intermediate = *inner;
  } else {
    Arith m;
    a.intermediate = m.mul(4, a.hidden);
    if (m.overflow()) {
      return r.error("n_embd", "a size whose 4x MLP width fits int64", str_cat(a.hidden));
    }
  }
  FSDP_TRY(a.tied, r.get_bool_or("tie_word_embeddings", true));
  return a;
}

// The importer's limits on layers and tensors; `error(key, expected, got)` words the failure.
template <class ErrorFn>
Status check_limits(const HubArch& a, const ErrorFn& error) {
  if (a.layers > kMaxHubLayers) {
    return error(a.gpt2_names ? "n_layer" : "num_hidden_layers",
                   str_cat("at most ", kMaxHubLayers, " layers"), str_cat(a.layers));
  }
  // 16 covers every dense tensor of a layer; experts add 3 each, plus the router's. Both factors
  // are bounded before they are multiplied.
  if (a.experts > kMaxHubTensors ||
      (16 + 3 * a.experts + 2) * a.layers > kMaxHubTensors) {
    return error(a.model_type == "mixtral" ? "num_local_experts" : "n_routed_experts",
                   str_cat("a model of at most ", kMaxHubTensors, " tensors"),
                   str_cat(a.experts, " experts in each of ", a.layers, " layers"));
  }
  return ok_status();
}

}  // namespace

std::span<const std::string_view> supported_model_types() { return kModelTypes; }

Expected<HubArch> read_hub_arch(const nlohmann::json& doc, std::string_view source) {
  FSDP_TRY(const JsonObjectReader r, JsonObjectReader::make(doc, std::string(source), ""));
  HubArch a;
  FSDP_TRY(a.model_type, r.get_string("model_type"));
  bool known = false;
  for (const std::string_view t : kModelTypes) {
    known = known || a.model_type == t;
  }
  if (!known) {
    return r.error("model_type", str_cat("one of ", join(kModelTypes, ", ")),
                   describe_json(*r.find("model_type")));
  }
  FSDP_TRY(a.dtype, read_dtype(r));
  if (a.model_type == "deepseek_v3") {
    FSDP_TRY(a, read_deepseek_v3(r, std::move(a)));
  } else if (a.model_type == "gpt2") {
    FSDP_TRY(a, read_gpt2(r, std::move(a)));
  } else {
    FSDP_TRY(a, read_llama_like(r, std::move(a)));
  }
  if (!a.gpt2_names) {
    FSDP_RETURN_IF_ERROR(read_runtime_fields(r, a));
  }
  FSDP_RETURN_IF_ERROR(check_limits(a, [&](std::string_view key, std::string_view expected,
                                            std::string_view got) {
    return r.error(key, expected, got);
  }));
  return a;
}

Expected<HubArch> apply_hub_overrides(HubArch a, const HubOverrides& o) {
  const auto bad = [](std::string_view option, std::string_view expected, std::int64_t got) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(option, ": expected ", expected, ", got ", got));
  };
  const std::pair<std::string_view, const std::optional<std::int64_t>*> sizes[] = {
      {"--layers", &o.layers}, {"--hidden", &o.hidden},     {"--ffn", &o.ffn},
      {"--heads", &o.heads},   {"--kv-heads", &o.kv_heads}, {"--vocab", &o.vocab}};
  for (const auto& [option, value] : sizes) {
    if (value->has_value() && **value < 1) {
      return bad(option, "a positive integer", **value);
    }
  }
  if (o.layers) {
    a.layers = *o.layers;
  }
  if (o.vocab) {
    a.vocab = *o.vocab;
  }
  if (o.ffn) {
    a.intermediate = *o.ffn;
    if (a.model_type == "mixtral") {
      a.expert_intermediate = *o.ffn;  // Mixtral's experts are intermediate_size wide
    }
  }
  if (o.dtype) {
    a.dtype = *o.dtype;
  }
  if (a.mla) {
    // deepseek_v3's head sizes are their own fields; only the number of heads follows.
    if (o.kv_heads) {
      return bad("--kv-heads", "no value for deepseek_v3 (every head has its own latent K/V)",
                 *o.kv_heads);
    }
    if (o.hidden) {
      a.hidden = *o.hidden;
    }
    if (o.heads) {
      a.heads = *o.heads;
      a.kv_heads = *o.heads;
    }
  } else if (o.hidden || o.heads || o.kv_heads) {
    const std::int64_t old_heads = a.heads;
    a.hidden = o.hidden.value_or(a.hidden);
    a.heads = o.heads.value_or(a.heads);
    if (o.hidden || o.heads) {
      if (a.hidden % a.heads != 0) {
        // Name the flag that was given; with only --hidden the heads are the config's.
        if (o.heads) {
          return bad("--heads", str_cat("heads that divide the hidden size ", a.hidden), a.heads);
        }
        return bad("--hidden", str_cat("a multiple of the config's ", a.heads, " heads"), a.hidden);
      }
      a.qk_head_dim = a.hidden / a.heads;
      a.v_head_dim = a.qk_head_dim;
      a.explicit_head_dim = false;
    }
    if (o.kv_heads) {
      a.kv_heads = *o.kv_heads;
    } else if (a.gpt2_names || a.kv_heads == old_heads || a.heads % a.kv_heads != 0) {
      a.kv_heads = a.heads;  // multi-head stays multi-head; a kv count that no longer divides
    }
    if (a.kv_heads > a.heads || a.heads % a.kv_heads != 0) {
      return bad("--kv-heads", str_cat("a divisor of the number of heads ", a.heads), a.kv_heads);
    }
  }
  FSDP_RETURN_IF_ERROR(check_limits(a, [&](std::string_view key, std::string_view expected,
                                            std::string_view got) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(key == "num_hidden_layers" || key == "n_layer" ? "--layers" : key,
                         ": expected ", expected, ", got ", got));
  }));
  return a;
}

}  // namespace fsdp

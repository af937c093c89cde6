// SPDX-License-Identifier: Apache-2.0
// The FLOP and activation accounting here is documented, with its sources, in docs/models.md.
#include "core/model/hub_config.h"

#include <array>
#include <optional>
#include <vector>

#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/model/hub_arch.h"
#include "core/model/internal/checked_arith.h"
#include "core/model/json_fields.h"

namespace fsdp {
namespace {

using nlohmann::json;
using internal::Arith;

bool is_moe_layer(const HubArch& a, std::int64_t layer) {
  return a.experts > 0 && layer >= a.first_dense && layer % a.moe_freq == 0;
}

// Collects a unit's parameters; keeps the first error (an element or byte count beyond int64),
// which names the config fields that give the tensor its dims.
class ParamList {
 public:
  ParamList(std::string_view source, DType dtype) : source_(source), dtype_(dtype) {}

  void add(std::string name, std::initializer_list<std::int64_t> dims, std::string_view fields,
           bool requires_grad = true, std::optional<DType> dtype = std::nullopt) {
    if (error_) {
      return;
    }
    auto shape = Shape::make(dims);
    const auto got = [&] { return str_cat(join(dims, " x "), " (tensor '", name, "')"); };
    if (!shape) {
      error_ = field_error(source_, fields, "dims whose product fits int64", got(),
                           ErrorCode::kOutOfRange);
      return;
    }
    auto param = Param::make(std::move(name), *shape, dtype.value_or(dtype_), requires_grad);
    if (!param) {
      error_ = field_error(source_, fields, "a tensor whose byte size fits int64", got(),
                           ErrorCode::kOutOfRange);
      return;
    }
    params_.push_back(std::move(param).value());
  }

  Expected<std::vector<Param>> take() {
    if (error_) {
      return *error_;
    }
    return std::move(params_);
  }

 private:
  std::string_view source_;
  DType dtype_;
  std::vector<Param> params_;
  std::optional<Error> error_;
};

// ---- building units ----------------------------------------------------------------------------

// Bytes per element of activations: the compute dtype, bf16 for fp8 (MXFP8) weights.
std::int64_t activation_width(const HubArch& a) { return a.dtype == DType::kFp32 ? 4 : 2; }

std::string layer_prefix(const HubArch& a, std::int64_t layer) {
  return a.gpt2_names ? str_cat("transformer.h.", layer, ".") : str_cat("model.layers.", layer, ".");
}

struct Cost {
  UnitFlops flops;
  UnitActivations activations;
  UnitWork work;
};

// ---- the forward's kernels (UnitWork; docs/models.md, "Kernels per unit") --------------------
// Bytes per element that the eager non-matmul kernels of torchtitan's Llama model move (read +
// write, w = activation bytes): RMSNorm upcasts to fp32 and runs pow, mean, rsqrt-mul, the
// downcast and the weight multiply as separate kernels (28 + 4w); RoPE multiplies in complex
// fp32 (16 + 2w); a residual add reads two tensors and writes one (3w); SiLU-and-multiply runs
// two kernels (5w per intermediate element); the loss upcasts the logits and runs log-softmax
// (8 + w per logit). Fused (torch.compile) each chain reads its inputs and writes its outputs
// once.
struct ElementwiseCost {
  std::int64_t eager = 0;
  std::int64_t fused = 0;
};

ElementwiseCost rms_norm_bytes(std::int64_t w) {
  return {28 + 4 * w, 2 * w};
}
ElementwiseCost layer_norm_bytes(std::int64_t w) {
  return {2 * w, 2 * w};
}  // one fused kernel
ElementwiseCost rope_bytes(std::int64_t w) {
  return {16 + 2 * w, 2 * w};
}
ElementwiseCost residual_bytes(std::int64_t w) {
  return {3 * w, 3 * w};
}
ElementwiseCost swiglu_bytes(std::int64_t w) {
  return {5 * w, 3 * w};
}
ElementwiseCost gelu_bytes(std::int64_t w) {
  return {2 * w, 2 * w};
}
ElementwiseCost copy_bytes(std::int64_t w) {
  return {2 * w, 2 * w};
}
ElementwiseCost loss_bytes(std::int64_t w) {
  return {8 + w, 4 + w};
}

// Adds `elements` per token of `per_element` bytes to the unit's elementwise traffic.
void add_elementwise(Arith& m, Cost& c, ElementwiseCost per_element, std::int64_t elements) {
  c.work.elementwise_bytes = m.add(c.work.elementwise_bytes, m.mul(per_element.eager, elements));
  c.work.fused_elementwise_bytes =
      m.add(c.work.fused_elementwise_bytes, m.mul(per_element.fused, elements));
}

void add_gemm(Cost& c, std::int64_t n, std::int64_t k, std::int64_t count = 1,
              std::int64_t rows_num = 1, std::int64_t rows_den = 1) {
  c.work.gemms.push_back(
      {.n = n, .k = k, .count = count, .rows_num = rows_num, .rows_den = rows_den});
}

// Adds the norm's parameters (weight, plus bias for LayerNorm).
void add_norm(const HubArch& a, ParamList& list, const std::string& name, std::int64_t size,
              std::string_view field) {
  list.add(name + ".weight", {size}, field);
  if (a.gpt2_names) {
    list.add(name + ".bias", {size}, field);
  }
}

// Self-attention of one layer: parameters, and its share of FLOPs and stored activations.
void add_attention(const HubArch& a, const std::string& p, ParamList& list, Arith& m, Cost& c) {
  const std::int64_t h = a.hidden;
  const std::int64_t w = activation_width(a);
  const std::int64_t q_dim = m.mul(a.heads, a.qk_head_dim);
  const std::int64_t o_in = m.mul(a.heads, a.v_head_dim);
  std::int64_t macs = 0;   // multiply-accumulates per token
  std::int64_t saved = 0;  // activation elements per token (dtype width)
  if (a.gpt2_names) {
    const std::int64_t qkv = m.mul(3, h);
    list.add(p + "attn.c_attn.weight", {h, qkv}, "n_embd");
    list.add(p + "attn.c_attn.bias", {qkv}, "n_embd");
    list.add(p + "attn.c_proj.weight", {h, h}, "n_embd");
    list.add(p + "attn.c_proj.bias", {h}, "n_embd");
    macs = m.add(m.mul(h, qkv), m.mul(h, h));
    add_gemm(c, qkv, h);
    add_gemm(c, h, h);
    // norm input, c_attn input, q/k/v, attention output (c_proj input)
    saved = m.add(m.mul(2, h), qkv, h);
  } else if (a.mla) {
    const std::string s = p + "self_attn.";
    const std::int64_t kv_a = m.add(a.kv_lora, a.qk_rope);
    const std::int64_t kv_b = m.mul(a.heads, m.add(a.qk_head_dim - a.qk_rope, a.v_head_dim));
    if (a.q_lora > 0) {
      list.add(s + "q_a_proj.weight", {a.q_lora, h}, "q_lora_rank");
      if (a.qkv_bias) {
        list.add(s + "q_a_proj.bias", {a.q_lora}, "q_lora_rank");
      }
      list.add(s + "q_a_layernorm.weight", {a.q_lora}, "q_lora_rank");
      list.add(s + "q_b_proj.weight", {q_dim, a.q_lora}, "num_attention_heads");
      macs = m.add(m.mul(h, a.q_lora), m.mul(a.q_lora, q_dim));
      add_gemm(c, a.q_lora, h);
      add_gemm(c, q_dim, a.q_lora);
      add_elementwise(m, c, rms_norm_bytes(w), a.q_lora);
      saved = m.mul(2, a.q_lora);  // q_a output (norm input) and q_b input
    } else {
      list.add(s + "q_proj.weight", {q_dim, h}, "num_attention_heads");
      macs = m.mul(h, q_dim);
      add_gemm(c, q_dim, h);
    }
    list.add(s + "kv_a_proj_with_mqa.weight", {kv_a, h}, "kv_lora_rank");
    if (a.qkv_bias) {
      list.add(s + "kv_a_proj_with_mqa.bias", {kv_a}, "kv_lora_rank");
    }
    list.add(s + "kv_a_layernorm.weight", {a.kv_lora}, "kv_lora_rank");
    list.add(s + "kv_b_proj.weight", {kv_b, a.kv_lora}, "num_attention_heads");
    list.add(s + "o_proj.weight", {h, o_in}, "num_attention_heads");
    if (a.o_bias) {
      list.add(s + "o_proj.bias", {h}, "hidden_size");
    }
    macs = m.add(macs, m.mul(h, kv_a), m.mul(a.kv_lora, kv_b), m.mul(o_in, h));
    add_gemm(c, kv_a, h);
    add_gemm(c, kv_b, a.kv_lora);
    add_gemm(c, h, o_in);
    add_elementwise(m, c, rms_norm_bytes(w), a.kv_lora);
    add_elementwise(m, c, rope_bytes(w), m.mul(2, m.mul(a.heads, a.qk_rope)));
    // norm input and output; kv_a output and kv_b input; q, k (full heads), v, attention output
    saved = m.add(saved, m.mul(2, h), kv_a, a.kv_lora, m.mul(2, q_dim), m.mul(2, o_in));
  } else {
    const std::string s = p + "self_attn.";
    const std::int64_t kv_dim = m.mul(a.kv_heads, a.qk_head_dim);
    list.add(s + "q_proj.weight", {q_dim, h}, "num_attention_heads");
    if (a.qkv_bias) {
      list.add(s + "q_proj.bias", {q_dim}, "num_attention_heads");
    }
    list.add(s + "k_proj.weight", {kv_dim, h}, "num_key_value_heads");
    if (a.qkv_bias) {
      list.add(s + "k_proj.bias", {kv_dim}, "num_key_value_heads");
    }
    list.add(s + "v_proj.weight", {kv_dim, h}, "num_key_value_heads");
    if (a.qkv_bias) {
      list.add(s + "v_proj.bias", {kv_dim}, "num_key_value_heads");
    }
    list.add(s + "o_proj.weight", {h, o_in}, "num_attention_heads");
    if (a.o_bias) {
      list.add(s + "o_proj.bias", {h}, "hidden_size");
    }
    macs = m.add(m.mul(h, q_dim), m.mul(2, h, kv_dim), m.mul(o_in, h));
    add_gemm(c, q_dim, h);
    add_gemm(c, kv_dim, h, 2);
    add_gemm(c, h, o_in);
    add_elementwise(m, c, rope_bytes(w), m.add(q_dim, kv_dim));
    if (a.kv_heads != a.heads) {
      // torchtitan's repeat_kv materialises k and v for every query head before attention.
      add_elementwise(m, c, copy_bytes(w), m.mul(2, q_dim));
    }
    saved = m.add(m.mul(2, h), q_dim, m.mul(2, kv_dim), o_in);
  }
  c.flops.matmul = m.add(c.flops.matmul, m.mul(2, macs));
  // Scores (q . k over qk_head_dim) and context (p . v over v_head_dim) for each query head.
  c.flops.attention_per_seq = m.mul(2, a.heads, m.add(a.qk_head_dim, a.v_head_dim));
  c.work.attention = {
      .heads = a.heads, .qk_head_dim = a.qk_head_dim, .v_head_dim = a.v_head_dim, .causal = true};
  // The attention output back from (batch, heads, seq) order (transpose + contiguous).
  add_elementwise(m, c, copy_bytes(w), o_in);
  // Flash attention keeps one fp32 log-sum-exp per head instead of the score matrix.
  c.activations.stored = m.add(c.activations.stored, m.mul(saved, w), m.mul(4, a.heads));
}

void add_dense_mlp(const HubArch& a, const std::string& p, ParamList& list, Arith& m, Cost& c,
                   std::int64_t inter, std::string_view module, std::string_view field) {
  const std::int64_t h = a.hidden;
  if (a.gpt2_names) {
    list.add(p + "mlp.c_fc.weight", {h, inter}, field);
    list.add(p + "mlp.c_fc.bias", {inter}, field);
    list.add(p + "mlp.c_proj.weight", {inter, h}, field);
    list.add(p + "mlp.c_proj.bias", {h}, field);
    c.flops.matmul = m.add(c.flops.matmul, m.mul(2, 2, m.mul(h, inter)));
    add_gemm(c, inter, h);
    add_gemm(c, h, inter);
    add_elementwise(m, c, gelu_bytes(activation_width(a)), inter);
    // c_fc output (GELU input) and GELU output (c_proj input)
    c.activations.stored = m.add(c.activations.stored, m.mul(2, inter, activation_width(a)));
    return;
  }
  const std::string s = p + std::string(module);
  list.add(s + "gate_proj.weight", {inter, h}, field);
  if (a.mlp_bias) {
    list.add(s + "gate_proj.bias", {inter}, field);
  }
  list.add(s + "up_proj.weight", {inter, h}, field);
  if (a.mlp_bias) {
    list.add(s + "up_proj.bias", {inter}, field);
  }
  list.add(s + "down_proj.weight", {h, inter}, field);
  if (a.mlp_bias) {
    list.add(s + "down_proj.bias", {h}, field);
  }
  c.flops.matmul = m.add(c.flops.matmul, m.mul(2, 3, m.mul(h, inter)));
  add_gemm(c, inter, h, 2);
  add_gemm(c, h, inter);
  add_elementwise(m, c, swiglu_bytes(activation_width(a)), inter);
  // gate and up outputs (SiLU-and-multiply inputs) and the down_proj input
  c.activations.stored = m.add(c.activations.stored, m.mul(3, inter, activation_width(a)));
}

void add_moe(const HubArch& a, const std::string& p, ParamList& list, Arith& m, Cost& c) {
  const std::int64_t h = a.hidden;
  const std::int64_t ie = a.expert_intermediate;
  const std::int64_t w = activation_width(a);
  const bool mixtral = a.model_type == "mixtral";
  const std::string s = p + (mixtral ? "block_sparse_moe." : "mlp.");
  const std::string_view experts_field = mixtral ? "num_local_experts" : "n_routed_experts";
  // Mixtral registers the router before the experts, DeepSeek after them.
  const auto add_router = [&] {
    list.add(s + "gate.weight", {a.experts, h}, experts_field);
    if (a.score_correction_bias) {
      // Updated by the load-balancing rule, not by gradients; kept in fp32 in the checkpoint.
      list.add(s + "gate.e_score_correction_bias", {a.experts}, experts_field,
               /*requires_grad=*/false, DType::kFp32);
    }
  };
  if (mixtral) {
    add_router();
  }
  const std::string_view size_field = mixtral ? "intermediate_size" : "moe_intermediate_size";
  for (std::int64_t e = 0; e < a.experts; ++e) {
    const std::string x = s + "experts." + std::to_string(e) + ".";
    if (mixtral) {
      list.add(x + "w1.weight", {ie, h}, size_field);
      list.add(x + "w2.weight", {h, ie}, size_field);
      list.add(x + "w3.weight", {ie, h}, size_field);
    } else {
      list.add(x + "gate_proj.weight", {ie, h}, size_field);
      list.add(x + "up_proj.weight", {ie, h}, size_field);
      list.add(x + "down_proj.weight", {h, ie}, size_field);
    }
  }
  if (!mixtral) {
    add_router();
  }
  // Router logits for every expert; then only the top_k experts a token is routed to.
  c.flops.matmul = m.add(c.flops.matmul, m.mul(2, h, a.experts),
                         m.mul(m.mul(2, 3, a.top_k), m.mul(h, ie)));
  add_gemm(c, a.experts, h);
  // Each expert sees top_k / experts of the tokens (balanced routing).
  add_gemm(c, ie, h, m.mul(2, a.experts), a.top_k, a.experts);
  add_gemm(c, h, ie, a.experts, a.top_k, a.experts);
  add_elementwise(m, c, swiglu_bytes(w), m.mul(a.top_k, ie));
  // Dispatch (gather of the routed copies) and combine (weighted scatter-add).
  add_elementwise(m, c, copy_bytes(w), m.mul(2, a.top_k, h));
  // fp32 router probabilities; per routed copy: its gathered input, gate/up outputs, down input
  c.activations.stored = m.add(c.activations.stored, m.mul(4, a.experts),
                               m.mul(m.mul(a.top_k, w), m.add(h, m.mul(3, ie))));
  if (a.shared_intermediate > 0) {
    add_dense_mlp(a, p, list, m, c, a.shared_intermediate, "mlp.shared_experts.",
                  "n_shared_experts");
  }
}

Expected<Unit> make_unit(std::string_view source, std::string name, ParamList& list,
                         const Arith& m, const Cost& c) {
  FSDP_TRY(std::vector<Param> params, list.take());
  if (m.overflow()) {
    return field_error(source, str_cat("(sizes of unit ", name, ")"),
                       "FLOP and activation-byte counts per token that fit int64",
                       "an overflow; reduce the size fields", ErrorCode::kOutOfRange);
  }
  auto unit = Unit::make(name, Unit::kNoParent, std::move(params), c.flops, c.activations, c.work);
  if (!unit) {
    return unit.error().with_context(source);
  }
  return unit;
}

Expected<Unit> build_embedding(const HubArch& a, std::string_view source) {
  ParamList list(source, a.dtype);
  Arith m;
  Cost c;
  if (a.gpt2_names) {
    list.add("transformer.wte.weight", {a.vocab, a.hidden}, "vocab_size");
    list.add("transformer.wpe.weight", {a.positions, a.hidden}, "n_positions");
  } else {
    list.add("model.embed_tokens.weight", {a.vocab, a.hidden}, "vocab_size");
  }
  // A lookup does no matmul; backward needs the int64 token ids.
  c.activations = {8, 8};
  add_elementwise(m, c, copy_bytes(activation_width(a)), a.gpt2_names ? 2 * a.hidden : a.hidden);
  return make_unit(source, "embedding", list, m, c);
}

Expected<Unit> build_layer(const HubArch& a, std::string_view source, std::int64_t layer) {
  ParamList list(source, a.dtype);
  Arith m;
  Cost c;
  const std::string p = layer_prefix(a, layer);
  const std::int64_t h = a.hidden;
  const std::int64_t w = activation_width(a);
  // Parameters in the order the hub modules register them (the order fully_shard groups them
  // in): GPT-2 blocks are ln_1, attn, ln_2, mlp; the others self_attn, mlp, then both norms.
  if (a.gpt2_names) {
    add_norm(a, list, p + "ln_1", h, "n_embd");
  }
  add_attention(a, p, list, m, c);
  if (a.gpt2_names) {
    add_norm(a, list, p + "ln_2", h, "n_embd");
  }
  if (is_moe_layer(a, layer)) {
    add_moe(a, p, list, m, c);
  } else {
    add_dense_mlp(a, p, list, m, c, a.intermediate, "mlp.",
                  a.gpt2_names ? "n_inner" : "intermediate_size");
  }
  if (!a.gpt2_names) {
    list.add(p + "input_layernorm.weight", {h}, "hidden_size");
    list.add(p + "post_attention_layernorm.weight", {h}, "hidden_size");
  }
  // The second norm's input and output (the MLP or router input).
  c.activations.stored = m.add(c.activations.stored, m.mul(2, h, w));
  add_elementwise(m, c, a.gpt2_names ? layer_norm_bytes(w) : rms_norm_bytes(w), m.mul(2, h));
  add_elementwise(m, c, residual_bytes(w), m.mul(2, h));
  // Recomputing the whole layer keeps only its input.
  c.activations.recompute = m.mul(h, w);
  return make_unit(source, str_cat("layers.", layer), list, m, c);
}

Expected<Unit> build_head(const HubArch& a, std::string_view source) {
  ParamList list(source, a.dtype);
  Arith m;
  Cost c;
  const std::int64_t h = a.hidden;
  const std::int64_t w = activation_width(a);
  if (a.gpt2_names) {
    add_norm(a, list, "transformer.ln_f", h, "n_embd");
  } else {
    list.add("model.norm.weight", {h}, "hidden_size");
  }
  if (!a.tied) {
    list.add("lm_head.weight", {a.vocab, h}, "vocab_size");
  }
  // The logits matmul runs whether or not its weight is tied to the embedding.
  c.flops.matmul = m.mul(2, h, a.vocab);
  add_gemm(c, a.vocab, h);
  add_elementwise(m, c, a.gpt2_names ? layer_norm_bytes(w) : rms_norm_bytes(w), h);
  add_elementwise(m, c, loss_bytes(w), a.vocab);
  // Norm input, lm_head input, and fp32 softmax probabilities for the cross-entropy backward.
  c.activations.stored = m.add(m.mul(2, h, w), m.mul(4, a.vocab));
  c.activations.recompute = m.mul(h, w);
  return make_unit(source, "head", list, m, c);
}

std::string default_name(const json& doc, std::string_view source) {
  if (const auto it = doc.find("_name_or_path"); it != doc.end() && it->is_string() &&
                                                  !it->get_ref<const std::string&>().empty()) {
    return it->get<std::string>();
  }
  std::string_view stem = source;
  if (const auto slash = stem.find_last_of('/'); slash != std::string_view::npos) {
    stem.remove_prefix(slash + 1);
  }
  if (stem.ends_with(".json")) {
    stem.remove_suffix(5);
  }
  return stem.empty() ? std::string("model") : std::string(stem);
}

Expected<Model> arch_to_model_impl(const HubArch& a, const std::string& source,
                                   std::string name) {
  std::vector<Unit> units;
  units.reserve(static_cast<std::size_t>(a.layers) + 2);
  FSDP_TRY(Unit embedding, build_embedding(a, source));
  units.push_back(std::move(embedding));
  for (std::int64_t i = 0; i < a.layers; ++i) {
    FSDP_TRY(Unit layer, build_layer(a, source, i));
    units.push_back(std::move(layer));
  }
  FSDP_TRY(Unit head, build_head(a, source));
  units.push_back(std::move(head));
  auto model = Model::make(std::move(name), std::move(units));
  if (!model) {
    return model.error().with_context(source);
  }
  return model;
}

}  // namespace

Expected<Model> hub_arch_to_model(const HubArch& arch, std::string_view source, std::string name) {
  try {
    return arch_to_model_impl(arch, std::string(source),
                              name.empty() ? std::string("model") : std::move(name));
  } catch (const std::exception& e) {
    return Error(ErrorCode::kInternal, str_cat(source, ": unexpected error: ", e.what()));
  }
}

Expected<Model> hub_config_to_model(const json& doc, std::string_view source, std::string name) {
  try {
    FSDP_TRY(const HubArch arch, read_hub_arch(doc, source));
    if (name.empty()) {
      name = default_name(doc, source);
    }
    return arch_to_model_impl(arch, std::string(source), std::move(name));
  } catch (const std::exception& e) {
    return Error(ErrorCode::kInternal, str_cat(source, ": unexpected error: ", e.what()));
  }
}

Expected<Model> import_hub_config(std::string_view text, std::string_view source,
                                  std::string name) {
  FSDP_TRY(const json doc, parse_json_text(text, source));
  return hub_config_to_model(doc, source, std::move(name));
}

}  // namespace fsdp

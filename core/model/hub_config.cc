// SPDX-License-Identifier: Apache-2.0
// The FLOP and activation accounting here is documented, with its sources, in docs/models.md.
#include "core/model/hub_config.h"

#include <array>
#include <numeric>
#include <optional>
#include <vector>

#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/model/hub_arch.h"
#include "core/model/internal/checked_arith.h"
#include "core/model/json_fields.h"
#include "core/model/model_split.h"
#include "core/model/unit_work.h"

namespace fsdp {
namespace {

using nlohmann::json;
using internal::Arith;

bool is_moe_layer(const HubArch& a, std::int64_t layer) {
  return a.experts > 0 && layer >= a.first_dense && layer % a.moe_freq == 0;
}

// What a split changes beside the divided sizes of the rank-local arch (local_arch below;
// docs/design/parallelism.md): the router's global expert count, sequence parallelism (tensors
// outside the tensor-parallel regions are held for 1/tp of the tokens), the capacity padding of
// the routed tokens, and the activation collectives each unit issues.
struct Split {
  std::int64_t tp = 1;
  std::int64_t ep = 1;
  bool sp = false;
  std::int64_t capacity_permille = 1000;  // routed tokens per balanced share, x1000
  std::int64_t experts = 0;               // every expert of a MoE layer (the router's outputs)
  // Divides per-token figures of tensors outside the tensor-parallel regions.
  std::int64_t seq() const { return sp ? tp : 1; }
};

// The field names of the sizes a split divides, per family.
std::string_view heads_field(const HubArch& a) {
  return a.gpt2_names ? "n_head" : "num_attention_heads";
}
std::string_view intermediate_field(const HubArch& a) {
  return a.gpt2_names ? "n_inner" : "intermediate_size";
}
std::string_view experts_field(const HubArch& a) {
  return a.model_type == "mixtral" ? "num_local_experts" : "n_routed_experts";
}
std::string_view expert_intermediate_field(const HubArch& a) {
  return a.model_type == "mixtral" ? "intermediate_size" : "moe_intermediate_size";
}

bool has_dense_layers(const HubArch& a) {
  for (std::int64_t l = 0; l < a.layers; ++l) {
    if (!is_moe_layer(a, l)) {
      return true;
    }
  }
  return false;
}

// The rank-local architecture: heads, key-value heads and MLP widths divided by tp, the
// vocabulary padded up to a multiple of tp and divided (Megatron pads it so), experts divided by
// ep. check_model_split has checked the divisions.
HubArch local_arch(HubArch a, const ModelSplit& split) {
  const std::int64_t tp = split.tp();
  a.heads /= tp;
  a.kv_heads /= tp;
  a.intermediate /= tp;
  a.expert_intermediate /= tp;
  a.shared_intermediate /= tp;
  a.vocab = (a.vocab + tp - 1) / tp;
  a.experts /= split.ep();
  return a;
}

// Collects a unit's parameters; keeps the first error (an element or byte count beyond int64),
// which names the config fields that give the tensor its dims.
class ParamList {
 public:
  ParamList(std::string_view source, DType dtype) : source_(source), dtype_(dtype) {}

  void add(std::string name, std::initializer_list<std::int64_t> dims, std::string_view fields,
           bool requires_grad = true, std::optional<DType> dtype = std::nullopt,
           bool expert = false) {
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
    auto param =
        Param::make(std::move(name), *shape, dtype.value_or(dtype_), requires_grad, expert);
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

// ceil(x / d) for x >= 0, d >= 1: a per-token figure of which each rank holds 1/d.
std::int64_t ceil_div(std::int64_t x, std::int64_t d) {
  return x / d + (x % d != 0 ? 1 : 0);
}

// Bytes per element of activations: the compute dtype, bf16 for fp8 (MXFP8) weights.
std::int64_t activation_width(const HubArch& a) { return a.dtype == DType::kFp32 ? 4 : 2; }

std::string layer_prefix(const HubArch& a, std::int64_t layer) {
  return a.gpt2_names ? str_cat("transformer.h.", layer, ".") : str_cat("model.layers.", layer, ".");
}

// Who produced a tensor of a block's forward: what torchtitan's op-level checkpointing policy
// decides on (docs/models.md, "Activation checkpointing modes").
enum class Producer : std::uint8_t {
  kMm,      // aten.mm (a linear without bias): in the save list, every other one saved
  kMatmul,  // addmm (a linear with bias, GPT-2's Conv1D) or a grouped mm: not in the save list
  kOther,   // norms, rotary, activations, residual adds, routing: recomputed
};

// One tensor of a block's forward, per token: its bytes, the bytes of it autograd keeps for
// backward without checkpointing (0 for a tensor backward does not read; less than all for a
// tensor of which backward reads a view), and the matmul FLOPs that produced it.
struct Tensor {
  Producer producer = Producer::kOther;
  std::int64_t bytes = 0;
  std::int64_t needed = 0;
  std::int64_t flops = 0;
  // Read neither by backward nor by the recompute of a tensor backward reads: a saved one is
  // kept by eager checkpointing only (CheckpointFigures::unread).
  bool unread = false;
};

struct Cost {
  UnitFlops flops;
  UnitActivations activations;
  std::vector<Tensor> tensors;     // the block's forward in execution order (no attention core)
  std::int64_t attention_out = 0;  // the attention core's output bytes (kept: o_proj's input)
  std::int64_t lse = 0;            // its fp32 log-sum-exp bytes (kept for its backward)
  UnitWork work;                   // its kernels (the per-op compute model)
};

// ---- the forward's kernels (UnitWork; docs/models.md, "Kernels per unit") --------------------
// Bytes per element that the eager non-matmul kernels of torchtitan's Llama model move (read +
// write, w = activation bytes): RMSNorm upcasts to fp32 and runs pow, mean, rsqrt-mul, the
// downcast and the weight multiply as separate kernels (28 + 4w); RoPE multiplies in complex
// fp32 (16 + 2w); a residual add reads two tensors and writes one (3w); SiLU-and-multiply runs
// two kernels (5w per intermediate element); the loss upcasts the logits and runs log-softmax
// (8 + w per logit). Fused (torch.compile) each chain reads its inputs and writes its outputs
// once. Under Megatron-Core's Transformer Engine layer (`te`) the chains are fused as well, and
// its layout differs in three copies (docs/models.md, "Kernels per unit"): TE's attention takes
// grouped k/v heads as they are (no repeat_kv) and writes its output in [s, b, heads x d] order
// (no transpose back), while under GQA q is copied out of the fused q/k/v output (its reshape
// of a split view).
struct ElementwiseCost {
  std::int64_t eager = 0;
  std::int64_t fused = 0;
  std::int64_t te = -1;  // -1: as fused
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
// A copy that PyTorch's layout needs and Transformer Engine's does not (repeat_kv, the attention
// output's transpose), and one that only Megatron-Core's q/k/v split makes.
ElementwiseCost torch_only_copy_bytes(std::int64_t w) {
  return {2 * w, 2 * w, 0};
}
ElementwiseCost te_only_copy_bytes(std::int64_t w) {
  return {0, 0, 2 * w};
}
// Eager under --compile too (the head is not compiled, see not_a_block); Megatron's fused
// cross entropy reads the logits and writes the fp32 probabilities once.
ElementwiseCost loss_bytes(std::int64_t w) {
  return {8 + w, 8 + w, 4 + w};
}

// Adds `elements` per token of `per_element` bytes to the unit's elementwise traffic.
void add_elementwise(Arith& m, Cost& c, ElementwiseCost per_element, std::int64_t elements) {
  c.work.elementwise_bytes = m.add(c.work.elementwise_bytes, m.mul(per_element.eager, elements));
  c.work.fused_elementwise_bytes =
      m.add(c.work.fused_elementwise_bytes, m.mul(per_element.fused, elements));
  const std::int64_t te = per_element.te < 0 ? per_element.fused : per_element.te;
  c.work.te_elementwise_bytes = m.add(c.work.te_elementwise_bytes, m.mul(te, elements));
}

GemmShape& add_gemm(Cost& c, std::int64_t n, std::int64_t k, std::int64_t count = 1,
                    std::int64_t rows_num = 1, std::int64_t rows_den = 1) {
  c.work.gemms.push_back(
      {.n = n, .k = k, .count = count, .rows_num = rows_num, .rows_den = rows_den});
  return c.work.gemms.back();
}

// The input groups (GemmShape::input_group) of a layer: the GEMMs that read the attention's
// norm output and those that read the MLP's, where Megatron-Core's Transformer Engine layer spec
// fuses them with the norm (linear_qkv, linear_fc1).
constexpr std::int64_t kAttentionInput = 1;
constexpr std::int64_t kMlpInput = 2;

// Records a tensor of the forward: the bytes backward reads count as stored, its FLOPs as matmul.
void produce(Cost& c, Arith& m, Producer producer, std::int64_t bytes, std::int64_t needed,
             std::int64_t flops = 0) {
  c.tensors.push_back(
      Tensor{.producer = producer, .bytes = bytes, .needed = needed, .flops = flops});
  c.activations.stored = m.add(c.activations.stored, needed);
  c.flops.matmul = m.add(c.flops.matmul, flops);
}

// The producer of a linear layer's output: aten.mm without bias, addmm with one.
Producer linear(bool bias) {
  return bias ? Producer::kMatmul : Producer::kMm;
}

// A block's figures per checkpointing mode, from its tensors (docs/models.md).
// selective-op (torchtitan's policy): the block input (the checkpoint's input), the outputs of
// odd-numbered aten.mm calls and the attention core's output and lse are kept; every other
// tensor backward reads is re-materialised by the recompute, which runs every op but the kept
// ones. A kept tensor that nothing of backward reads is `unread` (compiled blocks do not keep
// it). core-attention (Megatron-LM): only the core is recomputed; with flash attention its
// saved q, k, v stay (they are its checkpoint's inputs) and so does its output (o_proj saved
// it), so what is freed is the lse, and the recompute re-materialises output and lse.
void finish_block(Cost& c, Arith& m, std::int64_t input) {
  CheckpointFigures op{.kept = m.add(input, c.attention_out, c.lse), .flops = {0, 0}};
  std::int64_t mm_count = 0;
  for (const Tensor& t : c.tensors) {
    bool saved = false;
    if (t.producer == Producer::kMm) {
      ++mm_count;
      saved = mm_count % 2 == 1;
    }
    if (saved) {
      op.kept = m.add(op.kept, t.bytes);
      if (t.unread) {
        op.unread = m.add(op.unread, t.bytes);
      }
    } else {
      op.transient = m.add(op.transient, t.needed);
      op.flops.matmul = m.add(op.flops.matmul, t.flops);
    }
  }
  c.activations.selective_op = op;
  c.activations.core_attention = CheckpointFigures{.kept = c.activations.stored - c.lse,
                                                   .transient = m.add(c.attention_out, c.lse),
                                                   .flops = {0, c.flops.attention_per_seq}};
}

// The embedding and the head: torchtitan's apply_ac wraps the transformer blocks only, so its
// selective modes keep everything these units store and recompute nothing of them. Its
// apply_compile compiles the blocks only as well, so under --compile these units' kernels (the
// final norm, the loss) still run eager: their fused figure is the eager one.
void not_a_block(Cost& c) {
  const CheckpointFigures none{.kept = c.activations.stored};
  c.activations.selective_op = none;
  c.activations.core_attention = none;
  c.activations.block = false;
  c.work.fused_elementwise_bytes = c.work.elementwise_bytes;
}

// The attention core (flash attention): reads q, k, v (their producers count them), writes the
// output and one fp32 log-sum-exp per head, both kept for its backward.
void attend(const HubArch& a, Cost& c, Arith& m, std::int64_t out_elements) {
  c.attention_out = m.mul(out_elements, activation_width(a));
  c.lse = m.mul(4, a.heads);
  c.activations.stored = m.add(c.activations.stored, c.attention_out, c.lse);
}

// Adds the norm's parameters (weight, plus bias for LayerNorm).
void add_norm(const HubArch& a, ParamList& list, const std::string& name, std::int64_t size,
              std::string_view field) {
  list.add(name + ".weight", {size}, field);
  if (a.gpt2_names) {
    list.add(name + ".bias", {size}, field);
  }
}

// Self-attention of one layer: parameters, and its share of FLOPs and stored activations, tensor
// by tensor in the order of the hub module's forward (its norm's input and output are the
// layer's).
void add_attention(const HubArch& a, const Split& sp, const std::string& p, ParamList& list,
                   Arith& m, Cost& c) {
  const std::int64_t h = a.hidden;
  const std::int64_t w = activation_width(a);
  const std::int64_t q_dim = m.mul(a.heads, a.qk_head_dim);
  const std::int64_t o_in = m.mul(a.heads, a.v_head_dim);
  const auto bytes = [&](std::int64_t elements) { return m.mul(elements, w); };
  // A hidden-sized tensor outside the tensor-parallel region (1/tp of it per token under
  // sequence parallelism).
  const auto rep_bytes = [&](std::int64_t elements) { return ceil_div(bytes(elements), sp.seq()); };
  const auto mm_flops = [&](std::int64_t in, std::int64_t out) { return m.mul(2, in, out); };
  if (a.gpt2_names) {
    // c_attn's output columns are q, k and v of the rank's heads; c_proj's input rows the
    // rank's heads' context (the local heads of a tensor-parallel split).
    const std::int64_t qkv = m.mul(3, q_dim);
    list.add(p + "attn.c_attn.weight", {h, qkv}, "n_embd");
    list.add(p + "attn.c_attn.bias", {qkv}, "n_embd");
    list.add(p + "attn.c_proj.weight", {o_in, h}, "n_embd");
    list.add(p + "attn.c_proj.bias", {h}, "n_embd");
    add_gemm(c, qkv, h).input_group = kAttentionInput;
    add_gemm(c, h, o_in);
    // ln_1 output (c_attn input); q/k/v (flash attention's inputs); Conv1D is addmm
    produce(c, m, Producer::kOther, rep_bytes(h), rep_bytes(h));
    produce(c, m, Producer::kMatmul, bytes(qkv), bytes(qkv), mm_flops(h, qkv));
    attend(a, c, m, o_in);
    produce(c, m, Producer::kMatmul, rep_bytes(h), 0, mm_flops(o_in, h));
  } else if (a.mla) {
    const std::string s = p + "self_attn.";
    const std::int64_t kv_a = m.add(a.kv_lora, a.qk_rope);
    const std::int64_t kv_b = m.mul(a.heads, m.add(a.qk_head_dim - a.qk_rope, a.v_head_dim));
    // norm output (q and kv_a input)
    produce(c, m, Producer::kOther, rep_bytes(h), rep_bytes(h));
    if (a.q_lora > 0) {
      list.add(s + "q_a_proj.weight", {a.q_lora, h}, "q_lora_rank");
      if (a.qkv_bias) {
        list.add(s + "q_a_proj.bias", {a.q_lora}, "q_lora_rank");
      }
      list.add(s + "q_a_layernorm.weight", {a.q_lora}, "q_lora_rank");
      list.add(s + "q_b_proj.weight", {q_dim, a.q_lora}, "num_attention_heads");
      add_gemm(c, a.q_lora, h);
      add_gemm(c, q_dim, a.q_lora);
      add_elementwise(m, c, rms_norm_bytes(w), a.q_lora);
      // q_a output (norm input) and the norm's output (q_b input)
      produce(c, m, linear(a.qkv_bias), bytes(a.q_lora), bytes(a.q_lora), mm_flops(h, a.q_lora));
      produce(c, m, Producer::kOther, bytes(a.q_lora), bytes(a.q_lora));
      produce(c, m, Producer::kMm, bytes(q_dim), 0, mm_flops(a.q_lora, q_dim));
    } else {
      list.add(s + "q_proj.weight", {q_dim, h}, "num_attention_heads");
      add_gemm(c, q_dim, h);
      produce(c, m, Producer::kMm, bytes(q_dim), 0, mm_flops(h, q_dim));
    }
    // q with its rotary part applied (flash attention's input)
    produce(c, m, Producer::kOther, bytes(q_dim), bytes(q_dim));
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
    add_gemm(c, kv_a, h);
    add_gemm(c, kv_b, a.kv_lora);
    add_gemm(c, h, o_in);
    add_elementwise(m, c, rms_norm_bytes(w), a.kv_lora);
    add_elementwise(m, c, rope_bytes(w), m.mul(2, m.mul(a.heads, a.qk_rope)));
    // kv_a output (norm input and the shared rotary key), the norm's output (kv_b input), kv_b
    // output (backward reads its v view), full-head k (flash attention's input)
    produce(c, m, linear(a.qkv_bias), bytes(kv_a), bytes(kv_a), mm_flops(h, kv_a));
    produce(c, m, Producer::kOther, bytes(a.kv_lora), bytes(a.kv_lora));
    produce(c, m, Producer::kMm, bytes(kv_b), bytes(o_in), mm_flops(a.kv_lora, kv_b));
    produce(c, m, Producer::kOther, bytes(q_dim), bytes(q_dim));
    attend(a, c, m, o_in);
    produce(c, m, linear(a.o_bias), rep_bytes(h), 0, mm_flops(o_in, h));
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
    add_gemm(c, q_dim, h).input_group = kAttentionInput;
    add_gemm(c, kv_dim, h, 2).input_group = kAttentionInput;
    add_gemm(c, h, o_in);
    add_elementwise(m, c, rope_bytes(w), m.add(q_dim, kv_dim));
    if (a.kv_heads != a.heads) {
      // torchtitan's repeat_kv materialises k and v for every query head before attention.
      add_elementwise(m, c, torch_only_copy_bytes(w), m.mul(2, q_dim));
      // Megatron-Core reshapes q, [groups, heads per group x d] of linear_qkv's interleaved
      // output, to [heads, d]: a copy (with one head per group the reshape is a view).
      add_elementwise(m, c, te_only_copy_bytes(w), q_dim);
    }
    // norm output (q/k/v input); q and k before rotary (not read by backward) and after it;
    // v; flash attention reads q, k, v
    produce(c, m, Producer::kOther, rep_bytes(h), rep_bytes(h));
    produce(c, m, linear(a.qkv_bias), bytes(q_dim), 0, mm_flops(h, q_dim));
    produce(c, m, Producer::kOther, bytes(q_dim), bytes(q_dim));
    produce(c, m, linear(a.qkv_bias), bytes(kv_dim), 0, mm_flops(h, kv_dim));
    produce(c, m, Producer::kOther, bytes(kv_dim), bytes(kv_dim));
    produce(c, m, linear(a.qkv_bias), bytes(kv_dim), bytes(kv_dim), mm_flops(h, kv_dim));
    attend(a, c, m, o_in);
    produce(c, m, linear(a.o_bias), rep_bytes(h), 0, mm_flops(o_in, h));
  }
  // Scores (q . k over qk_head_dim) and context (p . v over v_head_dim) for each query head.
  c.flops.attention_per_seq = m.mul(2, a.heads, m.add(a.qk_head_dim, a.v_head_dim));
  c.work.attention = {.heads = a.heads, .qk_head_dim = a.qk_head_dim,
                      .v_head_dim = a.v_head_dim, .causal = true};
  // The attention output back from (batch, heads, seq) order (transpose + contiguous); TE's
  // attention writes [s, b, heads x d] itself.
  add_elementwise(m, c, torch_only_copy_bytes(w), o_in);
}

void add_dense_mlp(const HubArch& a, const Split& sp, const std::string& p, ParamList& list,
                   Arith& m, Cost& c, std::int64_t inter, std::string_view module,
                   std::string_view field) {
  const std::int64_t h = a.hidden;
  const std::int64_t w = activation_width(a);
  const std::int64_t inter_bytes = m.mul(inter, w);
  const std::int64_t h_bytes = ceil_div(m.mul(h, w), sp.seq());
  const std::int64_t flops = m.mul(2, h, inter);
  if (a.gpt2_names) {
    list.add(p + "mlp.c_fc.weight", {h, inter}, field);
    list.add(p + "mlp.c_fc.bias", {inter}, field);
    list.add(p + "mlp.c_proj.weight", {inter, h}, field);
    list.add(p + "mlp.c_proj.bias", {h}, field);
    add_gemm(c, inter, h).input_group = kMlpInput;
    add_gemm(c, h, inter);
    add_elementwise(m, c, gelu_bytes(w), inter);
    // c_fc output (GELU input) and GELU output (c_proj input); Conv1D is addmm
    produce(c, m, Producer::kMatmul, inter_bytes, inter_bytes, flops);
    produce(c, m, Producer::kOther, inter_bytes, inter_bytes);
    produce(c, m, Producer::kMatmul, h_bytes, 0, flops);
    c.tensors.back().unread = true;
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
  // A MoE layer's shared experts read the norm output with the router and the routed experts:
  // separate modules in Megatron-Core, not a group.
  add_gemm(c, inter, h, 2).input_group = module == "mlp." ? kMlpInput : 0;
  add_gemm(c, h, inter);
  add_elementwise(m, c, swiglu_bytes(w), inter);
  // gate and up outputs (SiLU-and-multiply inputs), in the order down(act(gate(x)) * up(x))
  // runs them, and the down_proj input
  produce(c, m, linear(a.mlp_bias), inter_bytes, inter_bytes, flops);
  produce(c, m, linear(a.mlp_bias), inter_bytes, inter_bytes, flops);
  produce(c, m, Producer::kOther, inter_bytes, inter_bytes);
  // down_proj's output goes into the residual sum, the layer's output: nothing of this layer's
  // backward reads it, nor is anything backward reads recomputed from it.
  produce(c, m, linear(a.mlp_bias), h_bytes, 0, flops);
  c.tensors.back().unread = true;
}

void add_moe(const HubArch& a, const Split& sp, const std::string& p, ParamList& list, Arith& m,
             Cost& c) {
  const std::int64_t h = a.hidden;
  const std::int64_t ie = a.expert_intermediate;
  const std::int64_t w = activation_width(a);
  const bool mixtral = a.model_type == "mixtral";
  const std::string s = p + (mixtral ? "block_sparse_moe." : "mlp.");
  const std::string_view field = experts_field(a);
  // The router scores every expert; a.experts are the rank's own (experts / ep).
  const std::int64_t all_experts = sp.experts;
  // Mixtral registers the router before the experts, DeepSeek after them.
  const auto add_router = [&] {
    list.add(s + "gate.weight", {all_experts, h}, field);
    if (a.score_correction_bias) {
      // Updated by the load-balancing rule, not by gradients; kept in fp32 in the checkpoint.
      list.add(s + "gate.e_score_correction_bias", {all_experts}, field,
               /*requires_grad=*/false, DType::kFp32);
    }
  };
  if (mixtral) {
    add_router();
  }
  const std::string_view size_field = mixtral ? "intermediate_size" : "moe_intermediate_size";
  // Under expert parallelism the rank holds experts / ep of them (named as on ep rank 0) and
  // marks them: FSDP shards them over the expert-data-parallel axes only. Without it they are
  // dense parameters to FSDP, grouped with the rest of the layer.
  const bool expert = sp.ep > 1;
  for (std::int64_t e = 0; e < a.experts; ++e) {
    const std::string x = s + "experts." + std::to_string(e) + ".";
    const auto add = [&](const char* name, std::initializer_list<std::int64_t> dims) {
      list.add(x + name, dims, size_field, true, std::nullopt, expert);
    };
    if (mixtral) {
      add("w1.weight", {ie, h});
      add("w2.weight", {h, ie});
      add("w3.weight", {ie, h});
    } else {
      add("gate_proj.weight", {ie, h});
      add("up_proj.weight", {ie, h});
      add("down_proj.weight", {h, ie});
    }
  }
  if (!mixtral) {
    add_router();
  }
  // Router logits for every expert (a linear without bias), kept as fp32 probabilities; then
  // only the top_k experts a token is routed to, as grouped matmuls (torchtitan's MoE): per
  // routed copy its gathered input, gate/up outputs, down input and down output (weighted and
  // combined).
  // Under sequence parallelism the router sees the rank's 1/tp of the tokens.
  add_gemm(c, all_experts, h, 1, 1, sp.seq());
  // Each of the rank's experts sees top_k / experts of the expert-parallel group's tokens
  // (balanced routing), padded to the capacity factor: top_k x capacity / local experts of the
  // rank's token count.
  const std::int64_t g = std::gcd(sp.capacity_permille, std::int64_t{1000});
  const std::int64_t routed_num = m.mul(a.top_k, sp.capacity_permille / g);
  const std::int64_t routed_den = m.mul(a.experts, 1000 / g);
  add_gemm(c, ie, h, m.mul(2, a.experts), routed_num, routed_den);
  add_gemm(c, h, ie, a.experts, routed_num, routed_den);
  // Routed copies per token: top_k x capacity.
  const auto routed = [&](std::int64_t per_copy) {
    return ceil_div(m.mul(a.top_k, sp.capacity_permille, per_copy), 1000);
  };
  add_elementwise(m, c, swiglu_bytes(w), routed(ie));
  // Dispatch (gather of the routed copies) and combine (weighted scatter-add).
  add_elementwise(m, c, copy_bytes(w), routed(m.mul(2, h)));
  const std::int64_t expert_flops = routed(m.mul(2, h, ie));
  produce(c, m, Producer::kMm, ceil_div(m.mul(all_experts, w), sp.seq()), 0,
          ceil_div(m.mul(2, h, all_experts), sp.seq()));
  produce(c, m, Producer::kOther, ceil_div(m.mul(4, all_experts), sp.seq()),
          ceil_div(m.mul(4, all_experts), sp.seq()));
  produce(c, m, Producer::kOther, routed(m.mul(h, w)), routed(m.mul(h, w)));
  produce(c, m, Producer::kMatmul, routed(m.mul(ie, w)), routed(m.mul(ie, w)), expert_flops);
  produce(c, m, Producer::kMatmul, routed(m.mul(ie, w)), routed(m.mul(ie, w)), expert_flops);
  produce(c, m, Producer::kOther, routed(m.mul(ie, w)), routed(m.mul(ie, w)));
  // The expert outputs are kept: the combine multiplies them by the routing weights, whose
  // gradient reads them (HF Mixtral's `expert_layer(x) * routing_weights`, Megatron-LM's
  // unpermute with probs).
  produce(c, m, Producer::kMatmul, routed(m.mul(h, w)), routed(m.mul(h, w)), expert_flops);
  if (a.shared_intermediate > 0) {
    add_dense_mlp(a, sp, p, list, m, c, a.shared_intermediate, "mlp.shared_experts.",
                  "n_shared_experts");
  }
}

// ---- activation collectives of a split (docs/design/parallelism.md) ----------------------------

void add_collective(Cost& c, CollectivePass pass, ActivationCollectiveKind kind, ParallelAxis axis,
                    std::string site, std::int64_t elements_per_token,
                    std::int64_t token_divisor = 1) {
  c.work.collectives.push_back({.pass = pass,
                                .kind = kind,
                                .axis = axis,
                                .site = std::move(site),
                                .elements_per_token = elements_per_token,
                                .token_divisor = token_divisor});
}

// A tensor-parallel block (attention, or the MLP): column-parallel input projections, then a
// row-parallel output projection (Megatron-LM). Without sequence parallelism the forward
// all-reduces the output (g) and the backward the input gradient (f). With it the forward
// all-gathers the sequence-sharded input and reduce-scatters the output; the backward
// all-gathers the output gradient, all-gathers the saved input again for the weight gradient
// and reduce-scatters the input gradient. Forward sites go to `fwd`, backward ones to `bwd`
// in the order the backward runs them.
void tp_block(const Split& sp, const std::string& block, std::int64_t h,
              std::vector<ActivationCollective>* fwd, std::vector<ActivationCollective>* bwd) {
  if (sp.tp == 1) {
    return;
  }
  using K = ActivationCollectiveKind;
  constexpr CollectivePass F = CollectivePass::kForward;
  constexpr CollectivePass B = CollectivePass::kBackward;
  constexpr ParallelAxis T = ParallelAxis::kTensor;
  if (!sp.sp) {
    fwd->push_back({F, K::kAllReduce, T, block + ".out", h, 1});
    bwd->push_back({B, K::kAllReduce, T, block + ".in_grad", h, 1});
    return;
  }
  fwd->push_back({F, K::kAllGather, T, block + ".in", h, sp.tp});
  fwd->push_back({F, K::kReduceScatter, T, block + ".out", h, sp.tp});
  bwd->push_back({B, K::kAllGather, T, block + ".out_grad", h, sp.tp});
  bwd->push_back({B, K::kAllGather, T, block + ".in", h, sp.tp});
  bwd->push_back({B, K::kReduceScatter, T, block + ".in_grad", h, sp.tp});
}

// A MoE layer's token exchange over the expert-parallel group: the forward dispatches every
// routed copy (top_k x capacity per token, hidden-sized) to its expert's rank and combines the
// expert outputs back; the backward sends the gradients the reverse way (Megatron-LM's
// all-to-all token dispatcher). Each member's send buffer is the elements per token below times
// its tokens (its share for itself stays local: the cost model counts (n - 1) / n of it).
void ep_exchange(const HubArch& a, const Split& sp, Arith& m,
                 std::vector<ActivationCollective>* fwd, std::vector<ActivationCollective>* bwd) {
  if (sp.ep == 1) {
    return;
  }
  using K = ActivationCollectiveKind;
  constexpr ParallelAxis E = ParallelAxis::kExpert;
  const std::int64_t per_token = m.mul(a.top_k, a.hidden, sp.capacity_permille);
  fwd->push_back({CollectivePass::kForward, K::kAllToAll, E, "moe.dispatch", per_token, 1000});
  fwd->push_back({CollectivePass::kForward, K::kAllToAll, E, "moe.combine", per_token, 1000});
  bwd->push_back({CollectivePass::kBackward, K::kAllToAll, E, "moe.combine_grad", per_token, 1000});
  bwd->push_back(
      {CollectivePass::kBackward, K::kAllToAll, E, "moe.dispatch_grad", per_token, 1000});
}

// The unit's collectives: forward sites in forward order, then backward sites in backward order
// (the reverse of the blocks' forward order).
void set_collectives(Cost& c, std::vector<std::vector<ActivationCollective>> fwd_blocks,
                     std::vector<std::vector<ActivationCollective>> bwd_blocks) {
  for (std::vector<ActivationCollective>& b : fwd_blocks) {
    for (ActivationCollective& x : b) {
      c.work.collectives.push_back(std::move(x));
    }
  }
  for (auto it = bwd_blocks.rbegin(); it != bwd_blocks.rend(); ++it) {
    for (ActivationCollective& x : *it) {
      c.work.collectives.push_back(std::move(x));
    }
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
  auto unit =
      Unit::make(name, Unit::kNoParent, std::move(params), c.flops, c.activations, c.work);
  if (!unit) {
    return unit.error().with_context(source);
  }
  return unit;
}

Expected<Unit> build_embedding(const HubArch& a, const Split& sp, std::string_view source) {
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
  // Vocabulary-parallel: each rank looks up its rows and the partial outputs are summed (all-
  // reduce), or reduce-scattered into the sequence-parallel region (then the backward
  // all-gathers the output gradient).
  if (sp.tp > 1) {
    using K = ActivationCollectiveKind;
    if (sp.sp) {
      add_collective(c, CollectivePass::kForward, K::kReduceScatter, ParallelAxis::kTensor,
                     "embedding.out", a.hidden, sp.tp);
      add_collective(c, CollectivePass::kBackward, K::kAllGather, ParallelAxis::kTensor,
                     "embedding.out_grad", a.hidden, sp.tp);
    } else {
      add_collective(c, CollectivePass::kForward, K::kAllReduce, ParallelAxis::kTensor,
                     "embedding.out", a.hidden);
    }
  }
  not_a_block(c);
  return make_unit(source, "embedding", list, m, c);
}

Expected<Unit> build_layer(const HubArch& a, const Split& sp, std::string_view source,
                           std::int64_t layer) {
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
  // The layer's input (the first norm's input), which every checkpointing mode keeps.
  const std::int64_t h_bytes = ceil_div(m.mul(h, w), sp.seq());
  c.activations.stored = h_bytes;
  add_attention(a, sp, p, list, m, c);
  if (a.gpt2_names) {
    add_norm(a, list, p + "ln_2", h, "n_embd");
  }
  // The residual sum (the second norm's input) and the norm's output (the MLP or router input).
  produce(c, m, Producer::kOther, h_bytes, h_bytes);
  produce(c, m, Producer::kOther, h_bytes, h_bytes);
  const bool moe = is_moe_layer(a, layer);
  if (moe) {
    add_moe(a, sp, p, list, m, c);
  } else {
    add_dense_mlp(a, sp, p, list, m, c, a.intermediate, "mlp.", intermediate_field(a));
  }
  if (!a.gpt2_names) {
    list.add(p + "input_layernorm.weight", {h}, "hidden_size");
    list.add(p + "post_attention_layernorm.weight", {h}, "hidden_size");
  }
  // The second residual sum: the layer's output, read by no backward of this layer.
  produce(c, m, Producer::kOther, h_bytes, 0);
  c.tensors.back().unread = true;
  const std::int64_t rep_elements = ceil_div(m.mul(2, h), sp.seq());
  add_elementwise(m, c, a.gpt2_names ? layer_norm_bytes(w) : rms_norm_bytes(w), rep_elements);
  add_elementwise(m, c, residual_bytes(w), rep_elements);
  // Recomputing the whole layer keeps only its input.
  c.activations.recompute = h_bytes;
  finish_block(c, m, c.activations.recompute);
  std::vector<std::vector<ActivationCollective>> fwd(2);
  std::vector<std::vector<ActivationCollective>> bwd(2);
  tp_block(sp, "attention", h, &fwd[0], &bwd[0]);
  if (moe && sp.ep > 1) {
    ep_exchange(a, sp, m, &fwd[1], &bwd[1]);
  } else {
    tp_block(sp, "mlp", h, &fwd[1], &bwd[1]);
  }
  set_collectives(c, std::move(fwd), std::move(bwd));
  return make_unit(source, str_cat("layers.", layer), list, m, c);
}

// What each member of a tensor-parallel group contributes per token to the vocabulary-parallel
// cross entropy: max, sum of exponentials, target logit.
constexpr std::int64_t kLossStatsPerToken = 3;

Expected<Unit> build_head(const HubArch& a, const Split& sp, std::string_view source) {
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
  add_gemm(c, a.vocab, h).output_head = true;
  add_elementwise(m, c, a.gpt2_names ? layer_norm_bytes(w) : rms_norm_bytes(w),
                  ceil_div(h, sp.seq()));
  add_elementwise(m, c, loss_bytes(w), a.vocab);
  // Norm input, lm_head input, and fp32 softmax probabilities for the cross-entropy backward
  // (the rank's vocabulary slice under tensor parallelism).
  const std::int64_t h_bytes = ceil_div(m.mul(h, w), sp.seq());
  c.activations.stored = m.add(m.mul(2, h_bytes), m.mul(4, a.vocab));
  c.activations.recompute = h_bytes;
  // The column-parallel output layer: its input gathered from the sequence-parallel region
  // (again in the backward, for the weight gradient), its input gradient all-reduced or
  // reduce-scattered. The vocabulary-parallel cross entropy all-gathers three values per token
  // from each member (its slice's logit maximum, sum of exponentials and target logit), from
  // which every member forms the whole softmax (docs/design/parallelism.md).
  std::vector<std::vector<ActivationCollective>> fwd(1);
  std::vector<std::vector<ActivationCollective>> bwd(1);
  if (sp.tp > 1) {
    using K = ActivationCollectiveKind;
    constexpr ParallelAxis T = ParallelAxis::kTensor;
    if (sp.sp) {
      fwd[0].push_back({CollectivePass::kForward, K::kAllGather, T, "head.in", h, sp.tp});
    }
    fwd[0].push_back(
        {CollectivePass::kForward, K::kAllGather, T, "head.loss_stats", kLossStatsPerToken, 1});
    if (sp.sp) {
      bwd[0].push_back({CollectivePass::kBackward, K::kAllGather, T, "head.in", h, sp.tp});
      bwd[0].push_back({CollectivePass::kBackward, K::kReduceScatter, T, "head.in_grad", h, sp.tp});
    } else {
      bwd[0].push_back({CollectivePass::kBackward, K::kAllReduce, T, "head.in_grad", h, 1});
    }
  }
  set_collectives(c, std::move(fwd), std::move(bwd));
  not_a_block(c);
  c.activations.loss_logits = a.vocab;
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

Expected<Model> arch_to_model_impl(const HubArch& whole, const std::string& source,
                                   std::string name, const ModelSplit& split) {
  FSDP_RETURN_IF_ERROR(check_model_split(whole, split, source));
  const HubArch a = local_arch(whole, split);
  Split sp{.tp = split.tp(),
           .ep = split.ep(),
           .sp = split.sequence_parallel(),
           .capacity_permille = static_cast<std::int64_t>(split.capacity_factor() * 1000.0 + 0.5),
           .experts = whole.experts};
  std::vector<Unit> units;
  units.reserve(static_cast<std::size_t>(a.layers) + 2);
  FSDP_TRY(Unit embedding, build_embedding(a, sp, source));
  units.push_back(std::move(embedding));
  for (std::int64_t i = 0; i < a.layers; ++i) {
    FSDP_TRY(Unit layer, build_layer(a, sp, source, i));
    units.push_back(std::move(layer));
  }
  FSDP_TRY(Unit head, build_head(a, sp, source));
  units.push_back(std::move(head));
  auto model = Model::make(std::move(name), std::move(units));
  if (!model) {
    return model.error().with_context(source);
  }
  return model;
}

}  // namespace

Status check_model_split(const HubArch& a, const ModelSplit& split, std::string_view source) {
  const auto fail = [&](std::string_view field, std::int64_t value, std::string_view axis,
                        std::int64_t size) {
    return Error(
        ErrorCode::kInvalidArgument,
        str_cat(source, ": ", axis, "=", size, " must divide ", field, " = ", value, ": expected ",
                axis == "ep" ? "an " : "a ", axis, " size that divides it"));
  };
  const std::int64_t tp = split.tp();
  if (tp > 1) {
    if (a.heads % tp != 0) {
      return fail(heads_field(a), a.heads, "tp", tp);
    }
    if (!a.gpt2_names && !a.mla && a.kv_heads % tp != 0) {
      return fail("num_key_value_heads", a.kv_heads, "tp", tp);
    }
    if (has_dense_layers(a) && a.intermediate % tp != 0) {
      return fail(intermediate_field(a), a.intermediate, "tp", tp);
    }
    if (a.experts > 0 && a.expert_intermediate % tp != 0) {
      return fail(expert_intermediate_field(a), a.expert_intermediate, "tp", tp);
    }
    if (a.shared_intermediate % tp != 0) {
      return fail("n_shared_experts x moe_intermediate_size", a.shared_intermediate, "tp", tp);
    }
  }
  const std::int64_t ep = split.ep();
  if (ep > 1) {
    if (a.experts == 0) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(source, ": ep=", ep,
                           " needs a mixture-of-experts model: expected experts to divide "
                           "over the ep axis, got a model without experts"));
    }
    if (a.experts % ep != 0) {
      return fail(experts_field(a), a.experts, "ep", ep);
    }
  }
  return ok_status();
}

Expected<Model> hub_arch_to_model(const HubArch& arch, std::string_view source, std::string name,
                                  const ModelSplit& split) {
  try {
    return arch_to_model_impl(arch, std::string(source),
                              name.empty() ? std::string("model") : std::move(name), split);
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
    return arch_to_model_impl(arch, std::string(source), std::move(name), ModelSplit());
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

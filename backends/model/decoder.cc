// SPDX-License-Identifier: Apache-2.0
// The decoder's description (validate, decoder_model), its seeded initial weights and its
// synthetic data. Formulas and the data generator: docs/design/backends.md, "The training model".
#include "backends/model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <utility>

#include "backends/model/internal/splitmix.h"
#include "core/base/check.h"
#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/model/hub_config.h"
#include "core/model/model_split.h"

namespace fsdp::backend {
namespace {

// Salts keep the weight, table and sample hash streams apart.
constexpr std::uint64_t kParamSalt = 0x7061'7261'6d73ULL;   // "params"
constexpr std::uint64_t kTableSalt = 0x7461'626c'65ULL;     // "table"
constexpr std::uint64_t kSampleSalt = 0x7361'6d70'6c65ULL;  // "sample"
// One target in kNoiseOneIn is a uniformly random token instead of the table's successor.
constexpr std::uint64_t kNoiseOneIn = 8;

constexpr std::int64_t kMaxBlasDim = std::numeric_limits<std::int32_t>::max();

Error invalid(std::string message) {
  return Error(ErrorCode::kInvalidArgument, str_cat("decoder config: ", message));
}

// a x b, or an error naming both factors.
Expected<std::int64_t> product(std::string_view what, std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (!checked_mul(a, b, &out)) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("decoder config: ", what, " (", a, " x ", b, ") overflows int64"));
  }
  return out;
}

Expected<Param> fp32_param(std::string name, std::initializer_list<std::int64_t> dims) {
  FSDP_TRY(Shape shape, Shape::make(dims));
  return Param::make(std::move(name), shape, DType::kFp32, /*requires_grad=*/true);
}

Expected<Unit> make_unit(std::string name, std::vector<Expected<Param>> params, UnitFlops flops,
                         UnitActivations activations) {
  std::vector<Param> values;
  for (Expected<Param>& p : params) {
    if (!p.has_value()) {
      return p.error().with_context(str_cat("decoder unit '", name, "'"));
    }
    values.push_back(std::move(p).value());
  }
  return Unit::make(std::move(name), Unit::kNoParent, std::move(values), flops, activations);
}

// Uniform in [-scale, scale) from the hash of (seed, unit, param, element).
float init_value(std::uint64_t seed, std::size_t unit, std::size_t param, std::size_t element,
                 double scale) {
  const std::uint64_t h = internal::hash_words(seed ^ kParamSalt, unit, param, element);
  return static_cast<float>((2.0 * internal::unit_interval(h) - 1.0) * scale);
}

// The kLlama fields: family, head counts and sizes, and every byte count its kernels form.
Status validate_llama(const DecoderConfig& c, std::int64_t tokens) {
  if (c.model_type != "llama" && c.model_type != "mistral" && c.model_type != "qwen2" &&
      c.model_type != "mixtral") {
    return invalid(
        str_cat("model_type must be llama, mistral, qwen2 or mixtral, got '", c.model_type, "'"));
  }
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"heads", c.heads}, {"kv_heads", c.kv_heads}, {"head_dim", c.head_dim}};
  for (const auto& [name, value] : sizes) {
    if (value < 1 || value > kMaxBlasDim) {
      return invalid(str_cat(name, " must be in [1, ", kMaxBlasDim, "], got ", value));
    }
  }
  if (c.kv_heads > c.heads || c.heads % c.kv_heads != 0) {
    return invalid(str_cat("kv_heads must divide heads ", c.heads, ", got ", c.kv_heads));
  }
  if (c.head_dim % 2 != 0) {  // RoPE rotates pairs (i, i + head_dim / 2)
    return invalid(str_cat("head_dim must be even (RoPE rotates pairs), got ", c.head_dim));
  }
  if (!(c.rope_theta > 1.0 && std::isfinite(c.rope_theta))) {
    return invalid(str_cat("rope_theta must be a finite number > 1, got ", c.rope_theta));
  }
  if (!(c.rms_norm_eps > 0.0 && c.rms_norm_eps < 1.0)) {
    return invalid(str_cat("rms_norm_eps must be in (0, 1), got ", c.rms_norm_eps));
  }
  FSDP_TRY(const std::int64_t q_dim, product("q width heads x head_dim", c.heads, c.head_dim));
  if (q_dim > kMaxBlasDim) {
    return invalid(str_cat("heads x head_dim must be <= ", kMaxBlasDim, ", got ", q_dim));
  }
  FSDP_RETURN_IF_ERROR(
      product("q activation bytes tokens x heads x head_dim x 4", tokens, 4 * q_dim));
  FSDP_RETURN_IF_ERROR(
      product("attention score bytes seq_len x seq_len x 8", c.seq_len, 8 * c.seq_len));
  FSDP_RETURN_IF_ERROR(
      product("projection bytes hidden x heads x head_dim x 4", c.hidden * 4, q_dim));
  return ok_status();
}

// The capacity factor in thousandths, as the hub importer rounds it (core/model/hub_config.cc).
std::int64_t capacity_permille(const DecoderConfig& c) {
  return std::llround(c.capacity_factor * 1000.0);
}

// experts, top_k and the capacity factor: Mixtral's router (docs/design/parallelism.md, "Experts
// for real"), with whole capacity slots so that the all-to-alls move exactly the IR's bytes.
Status validate_moe(const DecoderConfig& c, std::int64_t tokens) {
  if (c.experts < 0 || c.experts > kMaxBlasDim) {
    return invalid(str_cat("experts must be in [0, ", kMaxBlasDim, "], got ", c.experts));
  }
  if (c.experts == 0) {
    return ok_status();
  }
  if (c.family != DecoderFamily::kLlama || c.model_type != "mixtral") {
    return invalid(
        str_cat("experts=", c.experts, " need model_type mixtral, got '", c.model_type, "'"));
  }
  if (c.top_k < 1 || c.top_k > c.experts) {
    return invalid(str_cat("top_k must be in [1, experts = ", c.experts, "], got ", c.top_k));
  }
  if (!(c.capacity_factor >= 1.0 && c.capacity_factor <= 64.0)) {
    return invalid(str_cat("capacity_factor must be in [1, 64], got ", c.capacity_factor));
  }
  // top_k x permille x tokens / (1000 x experts) slots per expert, whole.
  const std::int64_t routed = c.top_k * capacity_permille(c);  // <= 2^31 x 64000
  FSDP_TRY(const std::int64_t num,
           product("routed copies top_k x capacity x tokens", routed, tokens));
  if (num % (1000 * c.experts) != 0) {
    return invalid(
        str_cat("top_k x capacity_factor x tokens / experts (slots per expert) must "
                "be a whole number, got ",
                c.top_k, " x ", c.capacity_factor, " x ", tokens, " / ", c.experts));
  }
  FSDP_RETURN_IF_ERROR(
      product("expert activation bytes routed copies x ffn x 16", num / 1000, 16 * c.ffn));
  return ok_status();
}

// tp and tp_rank: only the Llama family splits, over heads, kv heads and the MLP width as
// Megatron-LM does; the vocabulary is padded, but every rank must hold some real rows.
Status validate_split(const DecoderConfig& c) {
  if (c.tp < 1 || c.tp > kMaxBlasDim) {
    return invalid(str_cat("tp must be in [1, ", kMaxBlasDim, "], got ", c.tp));
  }
  if (c.tp_rank < 0 || c.tp_rank >= c.tp) {
    return invalid(str_cat("tp_rank must be in [0, ", c.tp, "), got ", c.tp_rank));
  }
  if (c.ep < 1 || c.ep > kMaxBlasDim) {
    return invalid(str_cat("ep must be in [1, ", kMaxBlasDim, "], got ", c.ep));
  }
  if (c.ep_rank < 0 || c.ep_rank >= c.ep) {
    return invalid(str_cat("ep_rank must be in [0, ", c.ep, "), got ", c.ep_rank));
  }
  if (c.ep > 1) {
    if (c.experts == 0) {
      return invalid(str_cat("ep=", c.ep,
                             " needs a mixture-of-experts model (model_type mixtral); this one "
                             "has no experts"));
    }
    if (c.experts % c.ep != 0) {
      return invalid(str_cat("ep=", c.ep, " must divide experts, got experts = ", c.experts));
    }
    if (c.tp > 1) {
      return invalid(str_cat("tp=", c.tp, " and ep=", c.ep,
                             " together are not trained (expert tensor parallelism)"));
    }
  }
  if (c.tp == 1) {
    return ok_status();
  }
  if (c.family != DecoderFamily::kLlama) {
    return invalid(str_cat("tp=", c.tp,
                           " needs a Llama-family model (--model); the small decoder has no "
                           "attention heads to split"));
  }
  const std::pair<const char*, std::int64_t> split[] = {
      {"heads", c.heads}, {"kv_heads", c.kv_heads}, {"ffn", c.ffn}};
  for (const auto& [name, value] : split) {
    if (value % c.tp != 0) {
      return invalid(str_cat("tp=", c.tp, " must divide ", name, ", got ", name, " = ", value));
    }
  }
  const std::int64_t rows = (c.vocab + c.tp - 1) / c.tp;
  if ((c.tp - 1) * rows >= c.vocab) {
    return invalid(str_cat("vocab must exceed (tp - 1) x ceil(vocab / tp) = ", (c.tp - 1) * rows,
                           " so that every tp rank holds real vocabulary rows, got ", c.vocab));
  }
  return ok_status();
}

// The hub architecture a kLlama config describes, in fp32 (what the backends train).
HubArch arch_of(const DecoderConfig& c) {
  HubArch a;
  a.model_type = c.model_type;
  a.dtype = DType::kFp32;
  a.hidden = c.hidden;
  a.vocab = c.vocab;
  a.layers = c.layers;
  a.heads = c.heads;
  a.kv_heads = c.kv_heads;
  a.qk_head_dim = c.head_dim;
  a.v_head_dim = c.head_dim;
  a.qkv_bias = c.qkv_bias;
  a.o_bias = c.o_bias;
  a.intermediate = c.ffn;
  a.mlp_bias = c.mlp_bias;
  a.rope_theta = c.rope_theta;
  a.rms_norm_eps = c.rms_norm_eps;
  if (c.experts > 0) {  // Mixtral: every layer's MLP is the experts, intermediate_size wide
    a.experts = c.experts;
    a.top_k = c.top_k;
    a.expert_intermediate = c.ffn;
  }
  return a;
}

// The config of the whole model (no tensor-parallel split).
DecoderConfig whole_config(DecoderConfig c) {
  c.tp = 1;
  c.tp_rank = 0;
  c.ep = 1;
  c.ep_rank = 0;
  return c;
}

// How one parameter of the whole model is cut: its local shape has fewer rows (dim 0: column-
// parallel weights, their biases, the vocabulary) or fewer columns (dim 1: row-parallel
// weights), or it is whole. Rows beyond the whole tensor are padding.
struct Cut {
  bool rows = false;
  bool cols = false;
  std::int64_t whole_rows = 0;
  std::int64_t local_rows = 0;
  std::int64_t whole_cols = 1;
  std::int64_t local_cols = 1;
};

Cut cut_of(const Param& whole, const Param& local) {
  const auto& w = whole.shape().dims();
  const auto& l = local.shape().dims();
  FSDP_CHECK(w.size() == l.size() && !w.empty())
      << "parameter " << whole.name() << ": split shape of another rank";
  Cut c;
  c.whole_rows = w[0];
  c.local_rows = l[0];
  if (w.size() > 1) {
    c.whole_cols = w[1];
    c.local_cols = l[1];
  }
  c.rows = c.local_rows != c.whole_rows;
  c.cols = c.local_cols != c.whole_cols;
  FSDP_CHECK(!(c.rows && c.cols) && w.size() <= 2)
      << "parameter " << whole.name() << " is cut along two dimensions";
  return c;
}

// Calls f(local element, whole element) for every element of slice `rank` that is not padding.
template <class F>
void for_each_slice_element(const Cut& c, std::int64_t rank, F f) {
  for (std::int64_t i = 0; i < c.local_rows; ++i) {
    const std::int64_t row = c.rows ? rank * c.local_rows + i : i;
    if (row >= c.whole_rows) {
      return;  // the vocabulary's padding rows
    }
    for (std::int64_t j = 0; j < c.local_cols; ++j) {
      const std::int64_t col = c.cols ? rank * c.local_cols + j : j;
      f(i * c.local_cols + j, row * c.whole_cols + col);
    }
  }
}

// The whole and the rank-local models of a config (both valid: the caller validated it).
std::pair<Model, Model> whole_and_local(const DecoderConfig& config) {
  Expected<Model> whole = decoder_model(whole_config(config));
  Expected<Model> local = decoder_model(config);
  FSDP_CHECK(whole.has_value() && local.has_value())
      << "tensor-parallel slices of an invalid decoder config";
  return {std::move(whole).value(), std::move(local).value()};
}

// The whole model's name of a rank-local parameter: the importer names a rank's experts as on ep
// rank 0 ("...experts.j..."); on ep rank q local expert j is global expert q x local + j.
std::string whole_name(const Param& param, std::int64_t ep_rank, std::int64_t local_experts) {
  const std::string& name = param.name();
  if (!param.expert() || ep_rank == 0) {
    return name;
  }
  constexpr std::string_view kMarker = ".experts.";
  const std::size_t at = name.find(kMarker);
  FSDP_CHECK(at != std::string::npos) << "expert parameter " << name << " without '.experts.'";
  const std::size_t first = at + kMarker.size();
  const std::size_t dot = name.find('.', first);
  const std::int64_t j = std::stoll(name.substr(first, dot - first));
  return str_cat(name.substr(0, first), ep_rank * local_experts + j, name.substr(dot));
}

// For each parameter of `local`'s unit u on ep rank `ep_rank`, its index in `whole`'s unit u.
std::vector<std::size_t> whole_indices(const DecoderConfig& config, const Model& whole,
                                       const Model& local, std::size_t u, std::int64_t ep_rank) {
  const auto& whole_params = whole.units()[u].params();
  const auto& local_params = local.units()[u].params();
  const std::int64_t local_experts = config.experts / config.ep;
  std::vector<std::size_t> out;
  out.reserve(local_params.size());
  for (const Param& p : local_params) {
    const std::string name = whole_name(p, ep_rank, local_experts);
    const auto it = std::find_if(whole_params.begin(), whole_params.end(),
                                 [&](const Param& w) { return w.name() == name; });
    FSDP_CHECK(it != whole_params.end()) << "parameter " << name << " is not in the whole model";
    out.push_back(static_cast<std::size_t>(it - whole_params.begin()));
  }
  return out;
}

}  // namespace

Expected<DecoderConfig> decoder_config_of_arch(const HubArch& a, std::string name,
                                               std::int64_t seq_len, std::int64_t micro_batch_size,
                                               std::uint64_t seed) {
  const auto refuse = [&](std::string_view field, std::string_view expected, std::string got) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("model '", name, "': field '", field, "': expected ", expected,
                         " for real training, got ", got));
  };
  if (a.model_type != "llama" && a.model_type != "mistral" && a.model_type != "qwen2" &&
      a.model_type != "mixtral") {
    return refuse("model_type", "llama, mistral, qwen2 or mixtral",
                  str_cat("'", a.model_type, "'"));
  }
  if (a.tied) {
    return refuse("tie_word_embeddings", "false (an untied head)", "true");
  }
  if (!a.rope_scaling.empty()) {
    return refuse("rope_scaling", "null (plain RoPE)", str_cat("'", a.rope_scaling, "'"));
  }
  if (a.qk_head_dim != a.v_head_dim || a.qk_head_dim % 2 != 0) {
    return refuse("head_dim", "an even head size", str_cat(a.qk_head_dim));
  }
  if (a.sliding_window > 0 && a.sliding_window < seq_len) {
    return refuse("sliding_window", str_cat("at least the sequence length ", seq_len),
                  str_cat(a.sliding_window));
  }
  DecoderConfig c;
  c.family = DecoderFamily::kLlama;
  c.name = std::move(name);
  c.model_type = a.model_type;
  c.vocab = a.vocab;
  c.hidden = a.hidden;
  c.ffn = a.intermediate;
  c.layers = a.layers;
  c.heads = a.heads;
  c.kv_heads = a.kv_heads;
  c.head_dim = a.qk_head_dim;
  c.rope_theta = a.rope_theta;
  c.rms_norm_eps = a.rms_norm_eps;
  c.qkv_bias = a.qkv_bias;
  c.o_bias = a.o_bias;
  c.mlp_bias = a.mlp_bias;
  c.experts = a.experts;
  c.top_k = a.top_k;
  c.seq_len = seq_len;
  c.micro_batch_size = micro_batch_size;
  c.seed = seed;
  FSDP_RETURN_IF_ERROR(validate(c));
  return c;
}

Status validate(const DecoderConfig& config) {
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"vocab", config.vocab},     {"hidden", config.hidden},
      {"ffn", config.ffn},         {"layers", config.layers},
      {"seq_len", config.seq_len}, {"micro_batch_size", config.micro_batch_size}};
  for (const auto& [name, value] : sizes) {
    if (value < 1) {
      return invalid(str_cat(name, " must be >= 1, got ", value));
    }
    // Token ids are int32 and every matrix dimension goes to BLAS as a 32-bit integer.
    if (value > kMaxBlasDim) {
      return invalid(str_cat(name, " must be <= ", kMaxBlasDim, ", got ", value));
    }
  }
  // Unit indices are int32: the embedding, the layers and the head.
  if (config.layers > kMaxBlasDim - 2) {
    return invalid(str_cat("layers must be <= ", kMaxBlasDim - 2, ", got ", config.layers));
  }
  FSDP_TRY(const std::int64_t tokens, product("tokens per microbatch micro_batch_size x seq_len",
                                              config.micro_batch_size, config.seq_len));
  if (tokens > kMaxBlasDim) {
    return invalid(str_cat("tokens per microbatch (micro_batch_size x seq_len) must be <= ",
                           kMaxBlasDim, ", got ", tokens));
  }
  // Every byte count the model or the kernels form must fit int64 (per-layer bytes, all
  // parameter bytes, the logits and the ffn activations of a microbatch).
  FSDP_TRY(const std::int64_t layer_bytes,
           product("layer bytes 2 x ffn x hidden x 4", config.ffn * config.hidden, 8));
  FSDP_TRY(const std::int64_t all_layers, product("all layer bytes", config.layers, layer_bytes));
  FSDP_TRY(const std::int64_t vocab_bytes,
           product("embedding bytes vocab x hidden x 4", config.vocab * config.hidden, 4));
  std::int64_t total = 0;
  if (!checked_add(all_layers, vocab_bytes, &total) || !checked_add(total, vocab_bytes, &total)) {
    return Error(ErrorCode::kOutOfRange, "decoder config: parameter bytes overflow int64");
  }
  FSDP_RETURN_IF_ERROR(product("logit bytes tokens x vocab x 4", tokens, 4 * config.vocab));
  FSDP_RETURN_IF_ERROR(product("ffn activation bytes tokens x ffn x 16", tokens, 16 * config.ffn));
  if (config.family == DecoderFamily::kLlama) {
    FSDP_RETURN_IF_ERROR(validate_llama(config, tokens));
  }
  FSDP_RETURN_IF_ERROR(validate_moe(config, tokens));
  return validate_split(config);
}

std::int64_t expert_capacity(const DecoderConfig& config) {
  if (config.experts == 0) {
    return 0;
  }
  return config.top_k * capacity_permille(config) * config.micro_batch_size * config.seq_len /
         (1000 * config.experts);
}

Expected<Model> decoder_model(const DecoderConfig& config) {
  FSDP_RETURN_IF_ERROR(validate(config));
  if (config.family == DecoderFamily::kLlama) {
    FSDP_TRY(const ModelSplit split,
             ModelSplit::make(config.tp, config.ep,
                              /*sequence_parallel=*/false, config.capacity_factor));
    return hub_arch_to_model(arch_of(config), "decoder config", config.name, split);
  }
  const std::int64_t v = config.vocab;
  const std::int64_t h = config.hidden;
  const std::int64_t f = config.ffn;
  constexpr std::int64_t kF32 = 4;
  std::vector<Unit> units;
  // The embedding keeps nothing: its backward reads the step's token ids, which live all step.
  // The embedding and the head are not blocks (UnitActivations::block): --recompute full
  // checkpoints the layers only, as torchtitan does (docs/models.md).
  FSDP_TRY(Unit embedding, make_unit("embedding", {fp32_param("embedding.weight", {v, h})},
                                     UnitFlops{}, UnitActivations{.block = false}));
  units.push_back(std::move(embedding));
  for (std::int64_t i = 0; i < config.layers; ++i) {
    const std::string p = str_cat("layers.", i);
    // Kept per token: the input x, 1/rms, the normed input n, u = W1 n and a = gelu(u); with
    // recomputation only x.
    const UnitActivations acts{kF32 * (2 * h + 2 * f + 1), kF32 * h};
    FSDP_TRY(Unit layer,
             make_unit(p,
                       {fp32_param(p + ".norm.weight", {h}), fp32_param(p + ".w1.weight", {f, h}),
                        fp32_param(p + ".w2.weight", {h, f})},
                       UnitFlops{/*matmul=*/4 * h * f, /*attention_per_seq=*/0}, acts));
    units.push_back(std::move(layer));
  }
  // Kept per token: the input x, 1/rms, the normed input n and the softmax probabilities.
  FSDP_TRY(Unit head,
           make_unit("head",
                     {fp32_param("head.norm.weight", {h}), fp32_param("head.out.weight", {v, h})},
                     UnitFlops{/*matmul=*/2 * h * v, /*attention_per_seq=*/0},
                     UnitActivations{
                         .stored = kF32 * (2 * h + v + 1), .recompute = kF32 * h, .block = false}));
  units.push_back(std::move(head));
  return Model::make("decoder", std::move(units));
}

ParamValues initial_parameters(const DecoderConfig& given) {
  const DecoderConfig config = whole_config(given);
  const Expected<Model> model = decoder_model(config);
  FSDP_CHECK(model.has_value()) << "initial_parameters of an invalid config: "
                                << model.error().message();
  ParamValues values;
  for (std::size_t u = 0; u < model->units().size(); ++u) {
    const Unit& unit = model->units()[u];
    auto& unit_values = values.emplace_back();
    for (std::size_t p = 0; p < unit.params().size(); ++p) {
      const Param& param = unit.params()[p];
      auto& data = unit_values.emplace_back(static_cast<std::size_t>(param.numel()));
      if (param.shape().ndim() == 1) {  // norm weights start at 1, biases at 0
        const bool bias = param.name().ends_with(".bias");
        std::fill(data.begin(), data.end(), bias ? 0.0F : 1.0F);
        continue;
      }
      // Embedding rows uniform in [-1, 1); a weight stored [out, in] (every matrix of both
      // families) uniform in [-1/sqrt(in), 1/sqrt(in)).
      const double scale =
          u == 0 ? 1.0 : 1.0 / std::sqrt(static_cast<double>(param.shape().dims()[1]));
      for (std::size_t e = 0; e < data.size(); ++e) {
        data[e] = init_value(config.seed, u, p, e, scale);
      }
    }
  }
  return values;
}

ParamValues split_parameters(const DecoderConfig& config, const ParamValues& whole_values) {
  const auto [whole, local] = whole_and_local(config);
  ParamValues out(whole.units().size());
  for (std::size_t u = 0; u < out.size(); ++u) {
    const auto& params = local.units()[u].params();
    const std::vector<std::size_t> source = whole_indices(config, whole, local, u, config.ep_rank);
    out[u].resize(params.size());
    for (std::size_t p = 0; p < params.size(); ++p) {
      const Cut c = cut_of(whole.units()[u].params()[source[p]], params[p]);
      std::vector<float>& dst = out[u][p];
      dst.assign(static_cast<std::size_t>(params[p].numel()), 0.0F);
      const std::vector<float>& src = whole_values[u][source[p]];
      for_each_slice_element(c, config.tp_rank, [&](std::int64_t l, std::int64_t w) {
        dst[static_cast<std::size_t>(l)] = src[static_cast<std::size_t>(w)];
      });
    }
  }
  return out;
}

ParamValues join_parameters(const DecoderConfig& config, const std::vector<ParamValues>& slices) {
  const std::int64_t parts = config.tp * config.ep;  // validate: not both > 1
  FSDP_CHECK(static_cast<std::int64_t>(slices.size()) == parts)
      << "join_parameters: " << slices.size() << " slices for tp=" << config.tp
      << ", ep=" << config.ep;
  const auto [whole, local] = whole_and_local(config);
  ParamValues out(whole.units().size());
  for (std::size_t u = 0; u < out.size(); ++u) {
    const auto& params = whole.units()[u].params();
    out[u].resize(params.size());
    for (std::size_t p = 0; p < params.size(); ++p) {
      out[u][p].assign(static_cast<std::size_t>(params[p].numel()), 0.0F);
    }
    const auto& local_params = local.units()[u].params();
    for (std::int64_t r = 0; r < parts; ++r) {
      const std::vector<std::size_t> target =
          whole_indices(config, whole, local, u, config.ep > 1 ? r : 0);
      for (std::size_t p = 0; p < local_params.size(); ++p) {
        const Cut c = cut_of(params[target[p]], local_params[p]);
        if (r > 0 && !c.rows && !c.cols && !local_params[p].expert()) {
          continue;  // whole on every rank: rank 0's copy
        }
        std::vector<float>& dst = out[u][target[p]];
        const std::vector<float>& src = slices[static_cast<std::size_t>(r)][u][p];
        for_each_slice_element(c, config.tp > 1 ? r : 0, [&](std::int64_t l, std::int64_t w) {
          dst[static_cast<std::size_t>(w)] = src[static_cast<std::size_t>(l)];
        });
      }
    }
  }
  return out;
}

std::int64_t global_sample_index(const DecoderConfig& config, std::int64_t num_microbatches,
                                 std::int64_t data_world, std::int64_t step, std::int64_t mb,
                                 std::int64_t data_rank, std::int64_t i) {
  FSDP_CHECK(step >= 0 && mb >= 0 && mb < num_microbatches && data_rank >= 0 &&
             data_rank < data_world && i >= 0 && i < config.micro_batch_size)
      << "global_sample_index(step=" << step << ", mb=" << mb << " of " << num_microbatches
      << ", rank=" << data_rank << " of " << data_world << ", i=" << i << ")";
  // A step's global batch is rank-major: rank r holds a contiguous block of it.
  return ((step * data_world + data_rank) * num_microbatches + mb) * config.micro_batch_size + i;
}

std::vector<std::int32_t> sample_tokens(const DecoderConfig& config, std::int64_t global_sample) {
  FSDP_CHECK(global_sample >= 0) << "sample_tokens of sample " << global_sample;
  const auto vocab = static_cast<std::uint64_t>(config.vocab);
  const auto gs = static_cast<std::uint64_t>(global_sample);
  const auto length = static_cast<std::size_t>(config.seq_len + 1);
  std::vector<std::int32_t> tokens;  // grown by push_back: no indexing a maybe-empty vector
  tokens.reserve(length);
  tokens.push_back(
      static_cast<std::int32_t>(internal::hash_words(config.seed ^ kSampleSalt, gs, 0) % vocab));
  for (std::size_t j = 1; j < length; ++j) {
    const std::uint64_t r = internal::hash_words(config.seed ^ kSampleSalt, gs, j);
    if (r % kNoiseOneIn == 0) {
      tokens.push_back(static_cast<std::int32_t>((r >> 8U) % vocab));
    } else {  // the fixed successor of the previous token: what the model can learn
      const auto prev = static_cast<std::uint64_t>(tokens.back());
      tokens.push_back(
          static_cast<std::int32_t>(internal::hash_words(config.seed ^ kTableSalt, prev) % vocab));
    }
  }
  return tokens;
}

}  // namespace fsdp::backend

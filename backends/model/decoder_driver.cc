// SPDX-License-Identifier: Apache-2.0
// The decoder's control flow over a kernel set (decoder_driver.h); the only copy of the model's
// forward, recompute and backward.
#include "backends/model/decoder_driver.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/base/check.h"
#include "core/base/strings.h"

namespace fsdp::backend {
namespace {

std::size_t idx(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

constexpr std::int64_t kF32 = sizeof(float);

}  // namespace

Status validate_decoder_args(std::string_view who, const DecoderConfig& config,
                             std::int64_t num_microbatches, std::int64_t data_rank,
                             std::int64_t data_world) {
  FSDP_RETURN_IF_ERROR(validate(config));
  if (num_microbatches < 1 || num_microbatches > std::numeric_limits<std::int32_t>::max()) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(who, ": num_microbatches must be in [1, 2^31), got ", num_microbatches));
  }
  if (data_world < 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(who, ": data_world must be >= 1, got ", data_world));
  }
  if (data_rank < 0 || data_rank >= data_world) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(who, ": data_rank must be in [0, ", data_world, "), got ", data_rank));
  }
  return ok_status();
}

void DecoderDriver::Saved::drop_intermediates() {
  DeviceArray x_kept = std::move(x);
  *this = Saved{};
  x = std::move(x_kept);
}

std::int64_t DecoderDriver::Saved::bytes() const {
  std::int64_t sum = 0;
  for (const DeviceArray* d : {&x, &inv_rms, &normed, &u, &a, &probs, &q, &k, &v, &attn, &lse, &mid,
                               &normed2, &gate, &up, &act, &router, &xin, &comb}) {
    sum += d->bytes();
  }
  return sum;
}

DecoderDriver::LlamaParams DecoderDriver::llama_params(const DecoderConfig& c) {
  LlamaParams p;
  int next = 0;
  const auto weight_and_bias = [&](int& weight, int& bias, bool has_bias) {
    weight = next++;
    if (has_bias) {
      bias = next++;
    }
  };
  weight_and_bias(p.q, p.q_bias, c.qkv_bias);
  weight_and_bias(p.k, p.k_bias, c.qkv_bias);
  weight_and_bias(p.v, p.v_bias, c.qkv_bias);
  weight_and_bias(p.o, p.o_bias, c.o_bias);
  if (c.experts > 0) {  // Mixtral's block_sparse_moe: the router, then the rank's experts
    p.router = next++;
    p.expert0 = next;
    next += static_cast<int>(3 * (c.experts / c.ep));
  } else {
    weight_and_bias(p.gate, p.gate_bias, c.mlp_bias);
    weight_and_bias(p.up, p.up_bias, c.mlp_bias);
    weight_and_bias(p.down, p.down_bias, c.mlp_bias);
  }
  p.input_norm = next++;
  p.post_norm = next++;
  p.count = next;
  return p;
}

DecoderDriver::DecoderDriver(const DecoderConfig& config, std::int64_t num_microbatches,
                             std::int64_t data_rank, std::int64_t data_world,
                             std::unique_ptr<DecoderKernels> kernels)
    : kernels_(std::move(kernels)),
      data_config_(config),
      config_(local_config(config)),
      num_mb_(num_microbatches),
      rank_(data_rank),
      world_(data_world),
      tokens_(config.micro_batch_size * config.seq_len),
      num_units_(static_cast<std::int32_t>(config.layers + 2)),
      eps_(config.family == DecoderFamily::kLlama ? config.rms_norm_eps : kRmsNormEps),
      lp_(llama_params(config)),
      inputs_(idx(num_microbatches)),
      targets_(idx(num_microbatches)),
      hidden_(idx(num_microbatches)),
      grad_(idx(num_microbatches)),
      row_loss_(idx(num_microbatches)),
      has_loss_(idx(num_microbatches), false),
      saved_(idx(num_units_) * idx(num_microbatches)),
      recompute_(idx(num_units_), false) {
  FSDP_CHECK(kernels_ != nullptr) << "decoder driver without a kernel set";
  vocab_first_ = config.tp_rank * config_.vocab;
  vocab_valid_ = std::min(config_.vocab, config.vocab - vocab_first_);
  local_experts_ = config.experts / config.ep;
  capacity_ = expert_capacity(config);
}

DecoderConfig DecoderDriver::local_config(const DecoderConfig& whole) {
  DecoderConfig c = whole;
  if (whole.tp > 1) {  // validate() checked that tp divides them
    c.heads = whole.heads / whole.tp;
    c.kv_heads = whole.kv_heads / whole.tp;
    c.ffn = whole.ffn / whole.tp;
    c.vocab = (whole.vocab + whole.tp - 1) / whole.tp;  // padded rows per rank
  }
  return c;
}

bool DecoderDriver::ok() const {
  return kernels_->ok() && comm_status_.ok();
}

bool DecoderDriver::can_communicate(std::string_view site) {
  if (!ok()) {
    return false;
  }
  if (split_ == nullptr) {
    comm_status_ = Error(
        ErrorCode::kFailedPrecondition,
        str_cat("decoder: ", split() ? "tp=" : "ep=", split() ? data_config_.tp : data_config_.ep,
                " needs its group's communicator (set_split_comm) for ", site));
    return false;
  }
  return true;
}

void DecoderDriver::all_reduce(std::string_view site, DeviceArray& buf, std::int64_t n) {
  if (can_communicate(site)) {
    comm_status_ = split_->all_reduce(site, buf.as<float>(), n);
  }
}

void DecoderDriver::all_gather(std::string_view site, const DeviceArray& send, std::int64_t n,
                               DeviceArray& recv) {
  if (can_communicate(site)) {
    comm_status_ = split_->all_gather(site, send.as<float>(), n, recv.as<float>());
  }
}

void DecoderDriver::all_to_all(std::string_view site, const DeviceArray& send, std::int64_t n,
                               DeviceArray& recv) {
  if (can_communicate(site)) {
    comm_status_ = split_->all_to_all(site, send.as<float>(), n, recv.as<float>());
  }
}

// The arrays go back to the kernel set before it is destroyed (member order).
DecoderDriver::~DecoderDriver() = default;

Status DecoderDriver::status() const {
  return kernels_->ok() ? comm_status_ : kernels_->status();
}

void DecoderDriver::begin_step(std::int64_t step) {
  FSDP_CHECK(step >= 0) << "begin_step(" << step << ")";
  if (!ok()) {
    return;
  }
  const auto seq = idx(config_.seq_len);
  std::vector<std::int32_t> in(idx(tokens_));
  std::vector<std::int32_t> tg(idx(tokens_));
  for (std::int64_t mb = 0; mb < num_mb_; ++mb) {
    for (std::int64_t i = 0; i < config_.micro_batch_size; ++i) {
      const std::vector<std::int32_t> sample = sample_tokens(
          data_config_, global_sample_index(data_config_, num_mb_, world_, step, mb, rank_, i));
      for (std::size_t j = 0; j < seq; ++j) {
        in[idx(i) * seq + j] = sample[j];
        tg[idx(i) * seq + j] = sample[j + 1];
      }
    }
    const auto bytes = static_cast<std::int64_t>(in.size() * sizeof(std::int32_t));
    inputs_[idx(mb)] = kernels_->array<std::int32_t>(tokens_);
    targets_[idx(mb)] = kernels_->array<std::int32_t>(tokens_);
    kernels_->upload(inputs_[idx(mb)].as<void>(), in.data(), bytes);
    kernels_->upload(targets_[idx(mb)].as<void>(), tg.data(), bytes);
    hidden_[idx(mb)].reset();
    grad_[idx(mb)].reset();
    row_loss_[idx(mb)].reset();
    has_loss_[idx(mb)] = false;
  }
  for (Saved& s : saved_) {
    s = Saved{};
  }
}

void DecoderDriver::forward(std::int32_t unit, std::int32_t mb,
                            std::span<const float* const> params) {
  check_call("forward", unit, mb, params.size());
  if (!ok()) {
    return;
  }
  const std::int64_t h = config_.hidden;
  DeviceArray& out = hidden_[idx(mb)];
  if (unit == 0) {
    out = embed(mb, params[0]);
    return;
  }
  FSDP_CHECK(out.bytes() == tokens_ * h * kF32)
      << "forward of unit " << unit << " microbatch " << mb << " before its input";
  Saved& s = saved(unit, mb);
  s.x = std::move(out);
  compute_intermediates(unit, mb, params, s);
  if (is_head(unit)) {
    has_loss_[idx(mb)] = true;
  } else if (llama()) {
    out = llama_output(params, s);
  } else {
    // x + W2 a: the residual stream enters as beta = 1.
    out = floats(tokens_ * h);
    kernels_->copy(out.as<float>(), s.x.as<float>(), tokens_ * h);
    kernels_->gemm(/*trans_a=*/false, /*trans_b=*/true, tokens_, h, config_.ffn, s.a.as<float>(),
                   params[2], /*beta=*/1.0F, out.as<float>());
  }
  if (recompute_[idx(unit)]) {
    s.drop_intermediates();
  }
}

void DecoderDriver::recompute(std::int32_t unit, std::int32_t mb,
                              std::span<const float* const> params) {
  check_call("recompute", unit, mb, params.size());
  if (!ok()) {
    return;
  }
  // A tensor-parallel recompute runs the unit's whole forward again, collectives included, as
  // the schedule lists them (Megatron-LM's full recomputation); its output is dropped.
  if (unit == 0) {
    if (split()) {
      embed(mb, params[0]);  // the embedding keeps nothing, so only its collective repeats
    }
    return;
  }
  Saved& s = saved(unit, mb);
  FSDP_CHECK(!s.x.empty()) << "recompute of unit " << unit << " microbatch " << mb
                           << " without its forward";
  compute_intermediates(unit, mb, params, s);
  if (split() && llama() && !is_head(unit)) {
    llama_output(params, s);
  }
}

DeviceArray DecoderDriver::embed(std::int32_t mb, const float* table) {
  const std::int64_t h = config_.hidden;
  DeviceArray out = floats(tokens_ * h);
  const auto* tokens = inputs_[idx(mb)].as<std::int32_t>();
  if (!split()) {
    kernels_->embedding_forward(tokens, tokens_, h, table, out.as<float>());
    return out;
  }
  // Vocabulary-parallel: this rank's rows give their tokens' embeddings, the others 0; the sum
  // over the group is the lookup.
  kernels_->embedding_slice_forward(tokens, tokens_, h, vocab_first_, config_.vocab, table,
                                    out.as<float>());
  all_reduce("embedding.out", out, tokens_ * h);
  return out;
}

DeviceArray DecoderDriver::llama_output(std::span<const float* const> params, const Saved& s) {
  const std::int64_t h = config_.hidden;
  const auto w = [&](int i) { return params[static_cast<std::size_t>(i)]; };
  const float* bias = lp_.down_bias < 0 ? nullptr : w(lp_.down_bias);
  DeviceArray out = floats(tokens_ * h);
  if (moe()) {
    // y = mid + the routing-weighted sum of the token's expert outputs.
    kernels_->copy(out.as<float>(), s.mid.as<float>(), tokens_ * h);
    const Routing r = route(s.router);
    kernels_->moe_combine(tokens_, config_.top_k, h, r.slot.as<std::int32_t>(),
                          r.weight.as<float>(), s.comb.as<float>(), out.as<float>());
    return out;
  }
  if (!split()) {
    // y = mid + down_proj(act): the residual stream enters as beta = 1.
    kernels_->copy(out.as<float>(), s.mid.as<float>(), tokens_ * h);
    project(config_.ffn, h, s.act.as<float>(), w(lp_.down), bias, 1.0F, out.as<float>());
    return out;
  }
  // Row-parallel down_proj: the partial products summed over the group, then the residual and
  // the (whole) bias once.
  project(config_.ffn, h, s.act.as<float>(), w(lp_.down), nullptr, 0.0F, out.as<float>());
  all_reduce("mlp.out", out, tokens_ * h);
  kernels_->add(out.as<float>(), s.mid.as<float>(), tokens_ * h);
  if (bias != nullptr) {
    kernels_->add_bias(tokens_, h, bias, out.as<float>());
  }
  return out;
}

void DecoderDriver::backward(std::int32_t unit, std::int32_t mb,
                             std::span<const float* const> params, std::span<float* const> grads) {
  check_call("backward", unit, mb, params.size());
  FSDP_CHECK(grads.size() == params.size())
      << "backward of unit " << unit << ": " << grads.size() << " gradient buffers for "
      << params.size() << " parameters";
  if (!ok()) {
    return;
  }
  const std::int64_t h = config_.hidden;
  DeviceArray& dh = grad_[idx(mb)];
  if (unit == 0) {
    FSDP_CHECK(dh.bytes() == tokens_ * h * kF32)
        << "backward of the embedding, microbatch " << mb << ", before layers.0's";
    const auto* tokens = inputs_[idx(mb)].as<std::int32_t>();
    if (split()) {
      kernels_->embedding_slice_backward(tokens, tokens_, h, vocab_first_, config_.vocab,
                                         dh.as<float>(), grads[0]);
    } else {
      kernels_->embedding_backward(tokens, tokens_, config_.vocab, h, dh.as<float>(), grads[0]);
    }
    dh.reset();
    return;
  }
  Saved& s = saved(unit, mb);
  FSDP_CHECK(!s.x.empty()) << "backward of unit " << unit << " microbatch " << mb
                           << " without its forward";
  if (!s.has_intermediates()) {
    compute_intermediates(unit, mb, params, s);
  }
  if (is_head(unit)) {
    backward_head(mb, params, grads, s);
  } else {
    FSDP_CHECK(dh.bytes() == tokens_ * h * kF32)
        << "backward of unit " << unit << " microbatch " << mb << " before the next unit's";
    if (llama()) {
      backward_llama_layer(mb, params, grads, s);
    } else {
      backward_layer(mb, params, grads, s);
    }
  }
  s = Saved{};
}

void DecoderDriver::backward_head(std::int32_t mb, std::span<const float* const> params,
                                  std::span<float* const> grads, Saved& s) {
  const std::int64_t h = config_.hidden;
  const std::int64_t v = config_.vocab;
  DeviceArray dnormed = floats(tokens_ * h);
  DeviceArray dlogits = floats(tokens_ * v);
  const auto* targets = targets_[idx(mb)].as<std::int32_t>();
  if (split()) {
    kernels_->vocab_parallel_backward(tokens_, v, vocab_valid_, vocab_first_, targets,
                                      s.probs.as<float>(), dlogits.as<float>());
  } else {
    kernels_->softmax_cross_entropy_backward(tokens_, v, targets, s.probs.as<float>(),
                                             dlogits.as<float>());
  }
  // dW_out = dlogits^T n; dn = dlogits W_out (under tp the slice's share, summed over the group).
  kernels_->gemm(true, false, v, h, tokens_, dlogits.as<float>(), s.normed.as<float>(), 0.0F,
                 grads[1]);
  kernels_->gemm(false, false, tokens_, h, v, dlogits.as<float>(), params[1], 0.0F,
                 dnormed.as<float>());
  if (split()) {
    all_reduce("head.in_grad", dnormed, tokens_ * h);
  }
  grad_[idx(mb)] =
      norm_backward(s.x, params[0], llama() ? nullptr : s.inv_rms.as<float>(), dnormed, grads[0]);
}

void DecoderDriver::backward_layer(std::int32_t mb, std::span<const float* const> params,
                                   std::span<float* const> grads, Saved& s) {
  const std::int64_t h = config_.hidden;
  const std::int64_t f = config_.ffn;
  DeviceArray& dy = grad_[idx(mb)];  // the gradient at the layer's output
  DeviceArray dnormed = floats(tokens_ * h);
  DeviceArray da = floats(tokens_ * f);
  DeviceArray du = floats(tokens_ * f);
  // y = x + W2 gelu(W1 n): dW2 = dy^T a, da = dy W2, du = da gelu'(u), dW1 = du^T n,
  // dn = du W1, dx = dy + rmsnorm'(dn).
  kernels_->gemm(true, false, h, f, tokens_, dy.as<float>(), s.a.as<float>(), 0.0F, grads[2]);
  kernels_->gemm(false, false, tokens_, f, h, dy.as<float>(), params[2], 0.0F, da.as<float>());
  kernels_->gelu_backward(tokens_ * f, s.u.as<float>(), da.as<float>(), du.as<float>());
  kernels_->gemm(true, false, f, h, tokens_, du.as<float>(), s.normed.as<float>(), 0.0F, grads[1]);
  kernels_->gemm(false, false, tokens_, h, f, du.as<float>(), params[1], 0.0F, dnormed.as<float>());
  const DeviceArray dx = norm_backward(s.x, params[0], s.inv_rms.as<float>(), dnormed, grads[0]);
  kernels_->add(dy.as<float>(), dx.as<float>(), tokens_ * h);  // dy becomes dx of the input
}

DeviceArray DecoderDriver::norm_backward(const DeviceArray& x, const float* weight,
                                         const float* inv_rms, const DeviceArray& dnormed,
                                         float* dweight) {
  const std::int64_t h = config_.hidden;
  DeviceArray recomputed;
  if (inv_rms == nullptr) {
    recomputed = inv_rms_of(x, weight);
    inv_rms = recomputed.as<float>();
  }
  DeviceArray dx = floats(tokens_ * h);
  kernels_->rmsnorm_backward(tokens_, h, x.as<float>(), weight, inv_rms, dnormed.as<float>(),
                             dx.as<float>(), dweight);
  return dx;
}

DeviceArray DecoderDriver::inv_rms_of(const DeviceArray& x, const float* weight) {
  DeviceArray inv_rms = floats(tokens_);
  const DeviceArray scratch = floats(tokens_ * config_.hidden);
  kernels_->rmsnorm_forward(tokens_, config_.hidden, x.as<float>(), weight, eps(),
                            inv_rms.as<float>(), scratch.as<float>());
  return inv_rms;
}

DeviceArray DecoderDriver::rmsnorm_of(const DeviceArray& x, const float* weight) {
  const DeviceArray inv_rms = floats(tokens_);  // not kept: backward recomputes it
  DeviceArray out = floats(tokens_ * config_.hidden);
  kernels_->rmsnorm_forward(tokens_, config_.hidden, x.as<float>(), weight, eps(),
                            inv_rms.as<float>(), out.as<float>());
  return out;
}

DecoderDriver::LlamaDims DecoderDriver::llama_dims() const {
  const std::int64_t hd = config_.head_dim;
  return {config_.hidden, config_.ffn, hd, config_.heads * hd, config_.kv_heads * hd};
}

void DecoderDriver::project(std::int64_t in, std::int64_t out, const float* x, const float* w,
                            const float* bias, float beta, float* y) {
  kernels_->gemm(/*trans_a=*/false, /*trans_b=*/true, tokens_, out, in, x, w, beta, y);
  if (bias != nullptr) {
    kernels_->add_bias(tokens_, out, bias, y);
  }
}

void DecoderDriver::compute_llama_layer(std::span<const float* const> params, Saved& s) {
  const LlamaParams& p = lp_;
  const auto [h, f, hd, qd, kvd] = llama_dims();
  const auto w = [&](int i) { return params[static_cast<std::size_t>(i)]; };
  const auto bias = [&](int i) { return i < 0 ? nullptr : w(i); };
  s.normed = rmsnorm_of(s.x, w(p.input_norm));
  s.q = floats(tokens_ * qd);
  s.k = floats(tokens_ * kvd);
  s.v = floats(tokens_ * kvd);
  project(h, qd, s.normed.as<float>(), w(p.q), bias(p.q_bias), 0.0F, s.q.as<float>());
  project(h, kvd, s.normed.as<float>(), w(p.k), bias(p.k_bias), 0.0F, s.k.as<float>());
  project(h, kvd, s.normed.as<float>(), w(p.v), bias(p.v_bias), 0.0F, s.v.as<float>());
  kernels_->rope_forward(tokens_, config_.seq_len, config_.heads, hd, config_.rope_theta,
                         s.q.as<float>());
  kernels_->rope_forward(tokens_, config_.seq_len, config_.kv_heads, hd, config_.rope_theta,
                         s.k.as<float>());
  s.attn = floats(tokens_ * qd);
  s.lse = floats(tokens_ * config_.heads);
  kernels_->attention_forward(config_.micro_batch_size, config_.seq_len, config_.heads,
                              config_.kv_heads, hd, s.q.as<float>(), s.k.as<float>(),
                              s.v.as<float>(), s.attn.as<float>(), s.lse.as<float>());
  s.mid = floats(tokens_ * h);
  if (split()) {
    // Row-parallel o_proj: partial products summed over the group, then the residual and the
    // (whole) bias once.
    project(qd, h, s.attn.as<float>(), w(p.o), nullptr, 0.0F, s.mid.as<float>());
    all_reduce("attention.out", s.mid, tokens_ * h);
    kernels_->add(s.mid.as<float>(), s.x.as<float>(), tokens_ * h);
    if (p.o_bias >= 0) {
      kernels_->add_bias(tokens_, h, w(p.o_bias), s.mid.as<float>());
    }
  } else {
    // mid = x + o_proj(attn): the residual enters as beta = 1.
    kernels_->copy(s.mid.as<float>(), s.x.as<float>(), tokens_ * h);
    project(qd, h, s.attn.as<float>(), w(p.o), bias(p.o_bias), 1.0F, s.mid.as<float>());
  }
  s.normed2 = rmsnorm_of(s.mid, w(p.post_norm));
  if (moe()) {
    compute_moe(params, s);
    return;
  }
  s.gate = floats(tokens_ * f);
  s.up = floats(tokens_ * f);
  project(h, f, s.normed2.as<float>(), w(p.gate), bias(p.gate_bias), 0.0F, s.gate.as<float>());
  project(h, f, s.normed2.as<float>(), w(p.up), bias(p.up_bias), 0.0F, s.up.as<float>());
  s.act = floats(tokens_ * f);
  kernels_->swiglu_forward(tokens_ * f, s.gate.as<float>(), s.up.as<float>(), s.act.as<float>());
}

void DecoderDriver::backward_llama_layer(std::int32_t mb, std::span<const float* const> params,
                                         std::span<float* const> grads, Saved& s) {
  const LlamaParams& p = lp_;
  const auto [h, f, hd, qd, kvd] = llama_dims();
  const auto at = [](auto span, int i) { return span[static_cast<std::size_t>(i)]; };
  // A weight stored [out, in] applied as y = x W^T: dW = dy^T x (out x in), dx (+)= dy W.
  const auto weight_grads = [&](std::int64_t in, std::int64_t out, const DeviceArray& x,
                                const DeviceArray& dy, int w, int b) {
    kernels_->gemm(true, false, out, in, tokens_, dy.as<float>(), x.as<float>(), 0.0F,
                   at(grads, w));
    if (b >= 0) {
      kernels_->bias_backward(tokens_, out, dy.as<float>(), at(grads, b));
    }
  };
  const auto input_grad = [&](std::int64_t in, std::int64_t out, const DeviceArray& dy, int w,
                              float beta, DeviceArray& dx) {
    kernels_->gemm(false, false, tokens_, in, out, dy.as<float>(), at(params, w), beta,
                   dx.as<float>());
  };
  DeviceArray& dy = grad_[idx(mb)];  // the gradient at the layer's output, then at mid, then x
  if (moe()) {
    const DeviceArray dnormed2 = backward_moe(params, grads, s, dy);
    const DeviceArray dmid =
        norm_backward(s.mid, at(params, p.post_norm), nullptr, dnormed2, at(grads, p.post_norm));
    kernels_->add(dy.as<float>(), dmid.as<float>(), tokens_ * h);  // dy is now d mid
  } else {
    // MLP: y = mid + down(act), act = silu(gate) * up, gate/up = proj(normed2),
    // normed2 = norm(mid).
    DeviceArray dact = floats(tokens_ * f);
    weight_grads(f, h, s.act, dy, p.down, p.down_bias);
    input_grad(f, h, dy, p.down, 0.0F, dact);
    DeviceArray dgate = floats(tokens_ * f);
    DeviceArray dup = floats(tokens_ * f);
    kernels_->swiglu_backward(tokens_ * f, s.gate.as<float>(), s.up.as<float>(), dact.as<float>(),
                              dgate.as<float>(), dup.as<float>());
    weight_grads(h, f, s.normed2, dgate, p.gate, p.gate_bias);
    weight_grads(h, f, s.normed2, dup, p.up, p.up_bias);
    DeviceArray dnormed2 = floats(tokens_ * h);
    input_grad(h, f, dgate, p.gate, 0.0F, dnormed2);
    input_grad(h, f, dup, p.up, 1.0F, dnormed2);
    if (split()) {
      all_reduce("mlp.in_grad", dnormed2, tokens_ * h);
    }
    const DeviceArray dmid =
        norm_backward(s.mid, at(params, p.post_norm), nullptr, dnormed2, at(grads, p.post_norm));
    kernels_->add(dy.as<float>(), dmid.as<float>(), tokens_ * h);  // dy is now d mid
  }
  // Attention: mid = x + o(attn), attn = attention(rope(q), rope(k), v), q/k/v = proj(normed).
  DeviceArray dattn = floats(tokens_ * qd);
  weight_grads(qd, h, s.attn, dy, p.o, p.o_bias);
  input_grad(qd, h, dy, p.o, 0.0F, dattn);
  DeviceArray dq = floats(tokens_ * qd);
  DeviceArray dk = floats(tokens_ * kvd);
  DeviceArray dv = floats(tokens_ * kvd);
  kernels_->attention_backward(config_.micro_batch_size, config_.seq_len, config_.heads,
                               config_.kv_heads, hd, s.q.as<float>(), s.k.as<float>(),
                               s.v.as<float>(), s.attn.as<float>(), s.lse.as<float>(),
                               dattn.as<float>(), dq.as<float>(), dk.as<float>(), dv.as<float>());
  kernels_->rope_backward(tokens_, config_.seq_len, config_.heads, hd, config_.rope_theta,
                          dq.as<float>());
  kernels_->rope_backward(tokens_, config_.seq_len, config_.kv_heads, hd, config_.rope_theta,
                          dk.as<float>());
  weight_grads(h, qd, s.normed, dq, p.q, p.q_bias);
  weight_grads(h, kvd, s.normed, dk, p.k, p.k_bias);
  weight_grads(h, kvd, s.normed, dv, p.v, p.v_bias);
  DeviceArray dnormed = floats(tokens_ * h);
  input_grad(h, qd, dq, p.q, 0.0F, dnormed);
  input_grad(h, kvd, dk, p.k, 1.0F, dnormed);
  input_grad(h, kvd, dv, p.v, 1.0F, dnormed);
  if (split()) {
    all_reduce("attention.in_grad", dnormed, tokens_ * h);
  }
  const DeviceArray dx =
      norm_backward(s.x, at(params, p.input_norm), nullptr, dnormed, at(grads, p.input_norm));
  kernels_->add(dy.as<float>(), dx.as<float>(), tokens_ * h);  // dy is now dx
}

DecoderDriver::Routing DecoderDriver::route(const DeviceArray& router_probs) {
  const std::int64_t k = config_.top_k;
  Routing r{kernels_->array<std::int32_t>(tokens_ * k), floats(tokens_ * k),
            kernels_->array<std::int32_t>(tokens_ * k),
            kernels_->array<std::int32_t>(config_.experts * capacity_)};
  kernels_->moe_route(tokens_, config_.experts, k, capacity_, router_probs.as<float>(),
                      r.expert.as<std::int32_t>(), r.weight.as<float>(), r.slot.as<std::int32_t>(),
                      r.slot_token.as<std::int32_t>());
  return r;
}

// Mixtral's sparse MoE block with capacity slots (docs/design/parallelism.md, "Experts for
// real"). The slots of all experts, [expert][slot], are ep blocks of local_experts x capacity
// rows, block q for the experts of ep rank q: the dispatch all-to-all hands each rank the rows
// of its experts from every member ([source][local expert][slot]), and the combine sends the
// expert outputs back the same way.
void DecoderDriver::compute_moe(std::span<const float* const> params, Saved& s) {
  const std::int64_t h = config_.hidden;
  const std::int64_t f = config_.ffn;
  const std::int64_t e_all = config_.experts;
  const std::int64_t slots = e_all * capacity_;  // on every rank: ep x local experts x C
  const auto w = [&](std::int64_t i) { return params[idx(i)]; };
  DeviceArray logits = floats(tokens_ * e_all);
  project(h, e_all, s.normed2.as<float>(), w(lp_.router), nullptr, 0.0F, logits.as<float>());
  s.router = floats(tokens_ * e_all);
  kernels_->softmax_rows(tokens_, e_all, logits.as<float>(), s.router.as<float>());
  const Routing r = route(s.router);
  DeviceArray send = floats(slots * h);
  kernels_->moe_dispatch(slots, h, r.slot_token.as<std::int32_t>(), s.normed2.as<float>(),
                         send.as<float>());
  if (expert_split()) {
    s.xin = floats(slots * h);
    all_to_all("moe.dispatch", send, local_experts_ * capacity_ * h, s.xin);
  } else {
    s.xin = std::move(send);
  }
  // Each block of C rows goes through its expert: gate = x w1^T, up = x w3^T, act = silu(gate)
  // * up, y = act w2^T.
  s.gate = floats(slots * f);
  s.up = floats(slots * f);
  s.act = floats(slots * f);
  DeviceArray y = floats(slots * h);
  const std::int64_t blocks = slots / capacity_;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t e0 = lp_.expert0 + 3 * (b % local_experts_);
    const std::int64_t row = b * capacity_;
    kernels_->gemm(false, true, capacity_, f, h, s.xin.as<float>() + row * h, w(e0), 0.0F,
                   s.gate.as<float>() + row * f);
    kernels_->gemm(false, true, capacity_, f, h, s.xin.as<float>() + row * h, w(e0 + 2), 0.0F,
                   s.up.as<float>() + row * f);
  }
  kernels_->swiglu_forward(slots * f, s.gate.as<float>(), s.up.as<float>(), s.act.as<float>());
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t e0 = lp_.expert0 + 3 * (b % local_experts_);
    const std::int64_t row = b * capacity_;
    kernels_->gemm(false, true, capacity_, h, f, s.act.as<float>() + row * f, w(e0 + 1), 0.0F,
                   y.as<float>() + row * h);
  }
  if (expert_split()) {
    s.comb = floats(slots * h);
    all_to_all("moe.combine", y, local_experts_ * capacity_ * h, s.comb);
  } else {
    s.comb = std::move(y);
  }
}

DeviceArray DecoderDriver::backward_moe(std::span<const float* const> params,
                                        std::span<float* const> grads, const Saved& s,
                                        const DeviceArray& dy) {
  const std::int64_t h = config_.hidden;
  const std::int64_t f = config_.ffn;
  const std::int64_t k = config_.top_k;
  const std::int64_t e_all = config_.experts;
  const std::int64_t slots = e_all * capacity_;
  const std::int64_t blocks = slots / capacity_;
  const auto w = [&](std::int64_t i) { return params[idx(i)]; };
  const auto g = [&](std::int64_t i) { return grads[idx(i)]; };
  const Routing r = route(s.router);
  // The combine: d(expert output) at each slot and d(routing weight) of each copy.
  DeviceArray dweight = floats(tokens_ * k);
  DeviceArray dcomb = floats(slots * h);
  kernels_->moe_combine_backward(tokens_, k, h, slots, r.slot.as<std::int32_t>(),
                                 r.weight.as<float>(), s.comb.as<float>(), dy.as<float>(),
                                 dweight.as<float>(), dcomb.as<float>());
  DeviceArray dout;  // at the rank's experts' outputs
  if (expert_split()) {
    dout = floats(slots * h);
    all_to_all("moe.combine_grad", dcomb, local_experts_ * capacity_ * h, dout);
  } else {
    dout = std::move(dcomb);
  }
  // The experts, block by block; an expert's weight gradients sum its blocks in order (the
  // first block overwrites).
  DeviceArray dact = floats(slots * f);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t e0 = lp_.expert0 + 3 * (b % local_experts_);
    const std::int64_t row = b * capacity_;
    const float beta = b < local_experts_ ? 0.0F : 1.0F;
    kernels_->gemm(true, false, h, f, capacity_, dout.as<float>() + row * h,
                   s.act.as<float>() + row * f, beta, g(e0 + 1));
    kernels_->gemm(false, false, capacity_, f, h, dout.as<float>() + row * h, w(e0 + 1), 0.0F,
                   dact.as<float>() + row * f);
  }
  DeviceArray dgate = floats(slots * f);
  DeviceArray dup = floats(slots * f);
  kernels_->swiglu_backward(slots * f, s.gate.as<float>(), s.up.as<float>(), dact.as<float>(),
                            dgate.as<float>(), dup.as<float>());
  DeviceArray dxin = floats(slots * h);
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t e0 = lp_.expert0 + 3 * (b % local_experts_);
    const std::int64_t row = b * capacity_;
    const float beta = b < local_experts_ ? 0.0F : 1.0F;
    const float* x = s.xin.as<float>() + row * h;
    kernels_->gemm(true, false, f, h, capacity_, dgate.as<float>() + row * f, x, beta, g(e0));
    kernels_->gemm(true, false, f, h, capacity_, dup.as<float>() + row * f, x, beta, g(e0 + 2));
    kernels_->gemm(false, false, capacity_, h, f, dgate.as<float>() + row * f, w(e0), 0.0F,
                   dxin.as<float>() + row * h);
    kernels_->gemm(false, false, capacity_, h, f, dup.as<float>() + row * f, w(e0 + 2), 1.0F,
                   dxin.as<float>() + row * h);
  }
  DeviceArray dsend;  // at the dispatched slots, back at their tokens' rank
  if (expert_split()) {
    dsend = floats(slots * h);
    all_to_all("moe.dispatch_grad", dxin, local_experts_ * capacity_ * h, dsend);
  } else {
    dsend = std::move(dxin);
  }
  DeviceArray dnormed2 = floats(tokens_ * h);
  kernels_->moe_dispatch_backward(tokens_, k, h, r.slot.as<std::int32_t>(), dsend.as<float>(),
                                  dnormed2.as<float>());
  // The router: logits = normed2 W_r^T.
  DeviceArray dlogits = floats(tokens_ * e_all);
  kernels_->moe_router_backward(tokens_, e_all, k, s.router.as<float>(),
                                r.expert.as<std::int32_t>(), r.weight.as<float>(),
                                dweight.as<float>(), dlogits.as<float>());
  kernels_->gemm(true, false, e_all, h, tokens_, dlogits.as<float>(), s.normed2.as<float>(), 0.0F,
                 g(lp_.router));
  kernels_->gemm(false, false, tokens_, h, e_all, dlogits.as<float>(), w(lp_.router), 1.0F,
                 dnormed2.as<float>());
  return dnormed2;
}

double DecoderDriver::step_loss() const {
  constexpr double kFailed = std::numeric_limits<double>::quiet_NaN();
  if (!ok()) {
    return kFailed;  // a failed call may have left the head's forward undone
  }
  std::vector<double> rows(idx(tokens_));
  double sum = 0.0;
  for (std::int64_t mb = 0; mb < num_mb_; ++mb) {
    FSDP_CHECK(has_loss_[idx(mb)]) << "step_loss before the head's forward of microbatch " << mb;
    kernels_->download(rows.data(), row_loss_[idx(mb)].as<void>(),
                       static_cast<std::int64_t>(rows.size() * sizeof(double)));
    if (!ok()) {
      return kFailed;
    }
    double total = 0.0;  // the local loss of mb: the mean of its rows, summed in order
    for (const double r : rows) {
      total += r;
    }
    sum += total / static_cast<double>(rows.size());
  }
  return sum / static_cast<double>(num_mb_);
}

void DecoderDriver::set_recompute(std::int32_t unit, bool on) {
  FSDP_CHECK(unit >= 0 && unit < num_units_) << "set_recompute of unit " << unit;
  recompute_[idx(unit)] = on;
}

std::int64_t DecoderDriver::activation_bytes() const {
  std::int64_t bytes = 0;
  for (const Saved& s : saved_) {
    bytes += s.bytes();
  }
  return bytes;
}

DecoderDriver::Saved& DecoderDriver::saved(std::int32_t unit, std::int32_t mb) {
  return saved_[idx(unit) * idx(num_mb_) + idx(mb)];
}

void DecoderDriver::check_call(const char* what, std::int32_t unit, std::int32_t mb,
                               std::size_t num_params) const {
  FSDP_CHECK(unit >= 0 && unit < num_units_ && mb >= 0 && mb < num_mb_)
      << what << " of unit " << unit << " microbatch " << mb << " (units: " << num_units_
      << ", microbatches: " << num_mb_ << ")";
  const std::size_t layer_params = llama() ? static_cast<std::size_t>(lp_.count) : 3;
  const std::size_t expected = unit == 0 ? 1 : (is_head(unit) ? 2 : layer_params);
  FSDP_CHECK(num_params == expected)
      << what << " of unit " << unit << ": " << num_params << " parameters, expected " << expected;
}

void DecoderDriver::compute_intermediates(std::int32_t unit, std::int32_t mb,
                                          std::span<const float* const> params, Saved& s) {
  s.computed = true;
  if (llama() && !is_head(unit)) {
    compute_llama_layer(params, s);
    return;
  }
  const std::int64_t h = config_.hidden;
  s.inv_rms = floats(tokens_);
  s.normed = floats(tokens_ * h);
  kernels_->rmsnorm_forward(tokens_, h, s.x.as<float>(), params[0], eps(), s.inv_rms.as<float>(),
                            s.normed.as<float>());
  if (llama()) {
    s.inv_rms.reset();  // the importer's head keeps the norm's input and output only
  }
  if (is_head(unit)) {
    const std::int64_t v = config_.vocab;
    DeviceArray logits = floats(tokens_ * v);
    kernels_->gemm(false, true, tokens_, v, h, s.normed.as<float>(), params[1], 0.0F,
                   logits.as<float>());
    s.probs = floats(tokens_ * v);
    row_loss_[idx(mb)] = kernels_->array<double>(tokens_);
    const auto* targets = targets_[idx(mb)].as<std::int32_t>();
    if (!split()) {
      kernels_->softmax_cross_entropy(tokens_, v, targets, logits.as<float>(), s.probs.as<float>(),
                                      row_loss_[idx(mb)].as<double>());
      return;
    }
    // Vocabulary-parallel cross entropy: each member's (max, sum of exponentials, target
    // logit) per token, gathered, give every member the whole softmax's normaliser.
    constexpr std::int64_t kStats = 3;
    DeviceArray stats = floats(tokens_ * kStats);
    DeviceArray all_stats = floats(tokens_ * kStats * data_config_.tp);
    kernels_->vocab_parallel_stats(tokens_, v, vocab_valid_, vocab_first_, targets,
                                   logits.as<float>(), stats.as<float>());
    all_gather("head.loss_stats", stats, tokens_ * kStats, all_stats);
    kernels_->vocab_parallel_softmax(tokens_, v, vocab_valid_, data_config_.tp,
                                     all_stats.as<float>(), logits.as<float>(), s.probs.as<float>(),
                                     row_loss_[idx(mb)].as<double>());
    return;
  }
  const std::int64_t f = config_.ffn;
  s.u = floats(tokens_ * f);
  s.a = floats(tokens_ * f);
  kernels_->gemm(false, true, tokens_, f, h, s.normed.as<float>(), params[1], 0.0F,
                 s.u.as<float>());
  kernels_->gelu_forward(tokens_ * f, s.u.as<float>(), s.a.as<float>());
}

}  // namespace fsdp::backend

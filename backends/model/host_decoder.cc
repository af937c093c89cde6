// SPDX-License-Identifier: Apache-2.0
// HostDecoder on host memory: per (unit, microbatch) it keeps what the unit's backward needs and
// hands hidden states forward and their gradients backward through per-microbatch slots, so the
// executor only ever passes parameters and gradient buffers. Equations: docs/design/backends.md.
#include "backends/model/decoder.h"

#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/model/kernels.h"
#include "core/base/check.h"
#include "core/base/strings.h"

namespace fsdp::backend {
namespace {

std::size_t idx(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

// What one unit keeps for one microbatch between forward and backward.
struct Saved {
  std::vector<float> x;        // the unit's input (tokens x hidden)
  std::vector<float> inv_rms;  // tokens
  std::vector<float> normed;   // tokens x hidden
  std::vector<float> u;        // layers: W1 n (tokens x ffn)
  std::vector<float> a;        // layers: gelu(u)
  std::vector<float> probs;    // head: softmax (tokens x vocab)

  bool has_intermediates() const { return !inv_rms.empty(); }
  void drop_intermediates() {
    inv_rms = {};
    normed = {};
    u = {};
    a = {};
    probs = {};
  }
  std::int64_t bytes() const {
    const std::size_t floats =
        x.size() + inv_rms.size() + normed.size() + u.size() + a.size() + probs.size();
    return static_cast<std::int64_t>(floats * sizeof(float));
  }
};

class HostDecoderImpl final : public HostDecoder {
 public:
  HostDecoderImpl(const DecoderConfig& config, std::int64_t num_microbatches,
                  std::int64_t data_rank, std::int64_t data_world)
      : config_(config),
        num_mb_(num_microbatches),
        rank_(data_rank),
        world_(data_world),
        tokens_(config.micro_batch_size * config.seq_len),
        num_units_(static_cast<std::int32_t>(config.layers + 2)),
        inputs_(idx(num_microbatches)),
        targets_(idx(num_microbatches)),
        hidden_(idx(num_microbatches)),
        grad_(idx(num_microbatches)),
        losses_(idx(num_microbatches), 0.0),
        has_loss_(idx(num_microbatches), false),
        saved_(idx(num_units_) * idx(num_microbatches)),
        recompute_(idx(num_units_), false) {}

  void begin_step(std::int64_t step) override {
    FSDP_CHECK(step >= 0) << "begin_step(" << step << ")";
    const auto seq = idx(config_.seq_len);
    for (std::int64_t mb = 0; mb < num_mb_; ++mb) {
      auto& in = inputs_[idx(mb)];
      auto& tg = targets_[idx(mb)];
      in.assign(idx(tokens_), 0);
      tg.assign(idx(tokens_), 0);
      for (std::int64_t i = 0; i < config_.micro_batch_size; ++i) {
        const std::vector<std::int32_t> sample = sample_tokens(
            config_, global_sample_index(config_, num_mb_, world_, step, mb, rank_, i));
        for (std::size_t j = 0; j < seq; ++j) {
          in[idx(i) * seq + j] = sample[j];
          tg[idx(i) * seq + j] = sample[j + 1];
        }
      }
      hidden_[idx(mb)] = {};
      grad_[idx(mb)] = {};
      losses_[idx(mb)] = 0.0;
      has_loss_[idx(mb)] = false;
    }
    for (Saved& s : saved_) {
      s = Saved{};
    }
  }

  void forward(std::int32_t unit, std::int32_t mb, std::span<const float* const> params) override {
    check_call("forward", unit, mb, params.size());
    std::vector<float>& h = hidden_[idx(mb)];
    if (unit == 0) {
      h.assign(idx(tokens_ * config_.hidden), 0.0F);
      embedding_forward(inputs_[idx(mb)], config_.hidden, params[0], h.data());
      return;
    }
    FSDP_CHECK(h.size() == idx(tokens_ * config_.hidden))
        << "forward of unit " << unit << " microbatch " << mb << " before its input";
    Saved& s = saved(unit, mb);
    s.x = std::move(h);
    h = {};
    compute_intermediates(unit, mb, params, s);
    if (unit == num_units_ - 1) {
      has_loss_[idx(mb)] = true;
    } else {
      // x + W2 a: the residual stream enters as beta = 1.
      h = s.x;
      matmul(/*trans_a=*/false, /*trans_b=*/true, tokens_, config_.hidden, config_.ffn, s.a.data(),
             params[2], /*beta=*/1.0F, h.data());
    }
    if (recompute_[idx(unit)]) {
      s.drop_intermediates();
    }
  }

  void recompute(std::int32_t unit, std::int32_t mb,
                 std::span<const float* const> params) override {
    check_call("recompute", unit, mb, params.size());
    if (unit == 0) {
      return;  // nothing kept, nothing to rebuild
    }
    Saved& s = saved(unit, mb);
    FSDP_CHECK(!s.x.empty()) << "recompute of unit " << unit << " microbatch " << mb
                             << " without its forward";
    compute_intermediates(unit, mb, params, s);
  }

  void backward(std::int32_t unit, std::int32_t mb, std::span<const float* const> params,
                std::span<float* const> grads) override {
    check_call("backward", unit, mb, params.size());
    FSDP_CHECK(grads.size() == params.size())
        << "backward of unit " << unit << ": " << grads.size() << " gradient buffers for "
        << params.size() << " parameters";
    const std::int64_t h = config_.hidden;
    std::vector<float>& dh = grad_[idx(mb)];
    if (unit == 0) {
      FSDP_CHECK(dh.size() == idx(tokens_ * h))
          << "backward of the embedding, microbatch " << mb << ", before layers.0's";
      embedding_backward(inputs_[idx(mb)], config_.vocab, h, dh.data(), grads[0]);
      dh = {};
      return;
    }
    Saved& s = saved(unit, mb);
    FSDP_CHECK(!s.x.empty()) << "backward of unit " << unit << " microbatch " << mb
                             << " without its forward";
    if (!s.has_intermediates()) {
      compute_intermediates(unit, mb, params, s);
    }
    std::vector<float> dnormed(idx(tokens_ * h));
    std::vector<float> dx(idx(tokens_ * h));
    if (unit == num_units_ - 1) {
      const std::int64_t v = config_.vocab;
      std::vector<float> dlogits(idx(tokens_ * v));
      softmax_cross_entropy_backward(v, targets_[idx(mb)], s.probs.data(), dlogits.data());
      // dW_out = dlogits^T n; dn = dlogits W_out.
      matmul(true, false, v, h, tokens_, dlogits.data(), s.normed.data(), 0.0F, grads[1]);
      matmul(false, false, tokens_, h, v, dlogits.data(), params[1], 0.0F, dnormed.data());
      rmsnorm_backward(tokens_, h, s.x.data(), params[0], s.inv_rms.data(), dnormed.data(),
                       dx.data(), grads[0]);
      dh = std::move(dx);
    } else {
      FSDP_CHECK(dh.size() == idx(tokens_ * h))
          << "backward of unit " << unit << " microbatch " << mb << " before the next unit's";
      const std::int64_t f = config_.ffn;
      std::vector<float> da(idx(tokens_ * f));
      std::vector<float> du(idx(tokens_ * f));
      // y = x + W2 gelu(W1 n): dW2 = dy^T a, da = dy W2, du = da gelu'(u), dW1 = du^T n,
      // dn = du W1, dx = dy + rmsnorm'(dn).
      matmul(true, false, h, f, tokens_, dh.data(), s.a.data(), 0.0F, grads[2]);
      matmul(false, false, tokens_, f, h, dh.data(), params[2], 0.0F, da.data());
      gelu_backward(tokens_ * f, s.u.data(), da.data(), du.data());
      matmul(true, false, f, h, tokens_, du.data(), s.normed.data(), 0.0F, grads[1]);
      matmul(false, false, tokens_, h, f, du.data(), params[1], 0.0F, dnormed.data());
      rmsnorm_backward(tokens_, h, s.x.data(), params[0], s.inv_rms.data(), dnormed.data(),
                       dx.data(), grads[0]);
      for (std::size_t i = 0; i < dh.size(); ++i) {
        dh[i] += dx[i];
      }
    }
    s = Saved{};
  }

  double step_loss() const override {
    double sum = 0.0;
    for (std::int64_t mb = 0; mb < num_mb_; ++mb) {
      FSDP_CHECK(has_loss_[idx(mb)]) << "step_loss before the head's forward of microbatch " << mb;
      sum += losses_[idx(mb)];
    }
    return sum / static_cast<double>(num_mb_);
  }

  void set_recompute(std::int32_t unit, bool on) override {
    FSDP_CHECK(unit >= 0 && unit < num_units_) << "set_recompute of unit " << unit;
    recompute_[idx(unit)] = on;
  }

  std::int64_t activation_bytes() const override {
    std::int64_t bytes = 0;
    for (const Saved& s : saved_) {
      bytes += s.bytes();
    }
    return bytes;
  }

 private:
  Saved& saved(std::int32_t unit, std::int32_t mb) {
    return saved_[idx(unit) * idx(num_mb_) + idx(mb)];
  }

  void check_call(const char* what, std::int32_t unit, std::int32_t mb,
                  std::size_t num_params) const {
    FSDP_CHECK(unit >= 0 && unit < num_units_ && mb >= 0 && mb < num_mb_)
        << what << " of unit " << unit << " microbatch " << mb << " (units: " << num_units_
        << ", microbatches: " << num_mb_ << ")";
    const std::size_t expected = unit == 0 ? 1 : (unit == num_units_ - 1 ? 2 : 3);
    FSDP_CHECK(num_params == expected) << what << " of unit " << unit << ": " << num_params
                                       << " parameters, expected " << expected;
  }

  // Everything a layer or the head derives from its kept input s.x; forward and recompute share
  // it, so recomputation is bit-identical. The head also records the microbatch's loss.
  void compute_intermediates(std::int32_t unit, std::int32_t mb,
                             std::span<const float* const> params, Saved& s) {
    const std::int64_t h = config_.hidden;
    s.inv_rms.assign(idx(tokens_), 0.0F);
    s.normed.assign(idx(tokens_ * h), 0.0F);
    rmsnorm_forward(tokens_, h, s.x.data(), params[0], s.inv_rms.data(), s.normed.data());
    if (unit == num_units_ - 1) {
      const std::int64_t v = config_.vocab;
      std::vector<float> logits(idx(tokens_ * v));
      matmul(false, true, tokens_, v, h, s.normed.data(), params[1], 0.0F, logits.data());
      s.probs.assign(idx(tokens_ * v), 0.0F);
      losses_[idx(mb)] = softmax_cross_entropy(v, targets_[idx(mb)], logits.data(), s.probs.data());
      return;
    }
    const std::int64_t f = config_.ffn;
    s.u.assign(idx(tokens_ * f), 0.0F);
    s.a.assign(idx(tokens_ * f), 0.0F);
    matmul(false, true, tokens_, f, h, s.normed.data(), params[1], 0.0F, s.u.data());
    gelu_forward(tokens_ * f, s.u.data(), s.a.data());
  }

  DecoderConfig config_;
  std::int64_t num_mb_;
  std::int64_t rank_;
  std::int64_t world_;
  std::int64_t tokens_;  // per microbatch
  std::int32_t num_units_;
  std::vector<std::vector<std::int32_t>> inputs_;   // [mb] tokens
  std::vector<std::vector<std::int32_t>> targets_;  // [mb] tokens
  std::vector<std::vector<float>> hidden_;          // [mb] output of the last unit run forward
  std::vector<std::vector<float>> grad_;            // [mb] d loss / d that unit's input
  std::vector<double> losses_;
  std::vector<bool> has_loss_;
  std::vector<Saved> saved_;  // [unit * num_mb + mb]
  std::vector<bool> recompute_;
};

}  // namespace

Expected<std::unique_ptr<HostDecoder>> HostDecoder::make(const DecoderConfig& config,
                                                         std::int64_t num_microbatches,
                                                         std::int64_t data_rank,
                                                         std::int64_t data_world) {
  FSDP_RETURN_IF_ERROR(validate(config));
  if (num_microbatches < 1 || num_microbatches > std::numeric_limits<std::int32_t>::max()) {
    return Error(
        ErrorCode::kInvalidArgument,
        str_cat("host decoder: num_microbatches must be in [1, 2^31), got ", num_microbatches));
  }
  if (data_world < 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("host decoder: data_world must be >= 1, got ", data_world));
  }
  if (data_rank < 0 || data_rank >= data_world) {
    return Error(ErrorCode::kInvalidArgument, str_cat("host decoder: data_rank must be in [0, ",
                                                      data_world, "), got ", data_rank));
  }
  use_single_threaded_blas();
  return std::unique_ptr<HostDecoder>(
      new HostDecoderImpl(config, num_microbatches, data_rank, data_world));
}

}  // namespace fsdp::backend

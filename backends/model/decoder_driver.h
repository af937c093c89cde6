// SPDX-License-Identifier: Apache-2.0
// DecoderDriver: the decoder's training model, written once over the kernel seam
// (decoder_kernels.h). Per (unit, microbatch) it runs forward, recompute and backward, keeps what
// each unit's backward needs, hands hidden states forward and their gradients backward through
// per-microbatch slots (so the executor only passes parameter and gradient buffers), and records
// the loss. HostDecoder::make drives the host kernel set with it; backends/cuda's CudaDecoder the
// CUDA set. Equations: docs/design/backends.md, "The training model". Not thread-safe: one
// compute stream calls it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "backends/model/decoder.h"
#include "backends/model/decoder_kernels.h"
#include "backends/model/split_comm.h"
#include "core/base/expected.h"

namespace fsdp::backend {

// The decoder factories' argument checks (kInvalidArgument; `who` starts the message, e.g.
// "host decoder: num_microbatches must be in [1, 2^31), got 0"), after validate(config).
Status validate_decoder_args(std::string_view who, const DecoderConfig& config,
                             std::int64_t num_microbatches, std::int64_t data_rank,
                             std::int64_t data_world);

class DecoderDriver : public HostDecoder {
 public:
  // The arguments must have passed validate_decoder_args; `kernels` is not null.
  DecoderDriver(const DecoderConfig& config, std::int64_t num_microbatches, std::int64_t data_rank,
                std::int64_t data_world, std::unique_ptr<DecoderKernels> kernels);
  ~DecoderDriver() override;

  void begin_step(std::int64_t step) override;
  void forward(std::int32_t unit, std::int32_t mb, std::span<const float* const> params) override;
  void recompute(std::int32_t unit, std::int32_t mb, std::span<const float* const> params) override;
  void backward(std::int32_t unit, std::int32_t mb, std::span<const float* const> params,
                std::span<float* const> grads) override;
  // NaN once the kernel set has failed.
  double step_loss() const override;
  void set_recompute(std::int32_t unit, bool on) override;
  std::int64_t activation_bytes() const override;
  // The kernel set's or the split communicator's first failure: after one, every call is a
  // no-op.
  Status status() const override;
  // Under tp > 1 the forward, recompute and backward issue their group's collectives here
  // (docs/design/parallelism.md, "Training it for real"); not owned, outlives the driver.
  void set_split_comm(SplitComm* comm) override { split_ = comm; }

 private:
  // What one unit keeps for one microbatch between forward and backward. kLlama keeps exactly
  // what the hub importer counts as the unit's activations (core/model/hub_config.cc): no 1/rms
  // (backward recomputes it from the norm's input).
  struct Saved {
    DeviceArray x;        // the unit's input (tokens x hidden)
    DeviceArray inv_rms;  // kMlp: tokens
    DeviceArray normed;   // tokens x hidden (kLlama layers: the attention norm's output)
    DeviceArray u;        // kMlp layers: W1 n (tokens x ffn)
    DeviceArray a;        // kMlp layers: gelu(u)
    DeviceArray probs;    // head: softmax (tokens x vocab)
    // kLlama layers
    DeviceArray q;          // rope(q_proj n) (tokens x heads * head_dim)
    DeviceArray k;          // rope(k_proj n) (tokens x kv_heads * head_dim)
    DeviceArray v;          // v_proj n
    DeviceArray attn;       // attention output, o_proj's input (tokens x heads * head_dim)
    DeviceArray lse;        // attention log-sum-exp (tokens x heads)
    DeviceArray mid;        // x + o_proj(attn): the MLP's residual input (tokens x hidden)
    DeviceArray normed2;    // rmsnorm(mid)
    DeviceArray gate;       // gate_proj normed2 (tokens x ffn)
    DeviceArray up;         // up_proj normed2
    DeviceArray act;        // silu(gate) * up: down_proj's input
    // kLlama MoE layers (gate, up and act then hold the slots' rows: experts x capacity rows,
    // in the order this rank's experts receive them: [source ep rank][local expert][slot]).
    DeviceArray router;     // the router's softmax (tokens x experts)
    DeviceArray xin;        // the routed copies the rank's experts take (slots x hidden)
    DeviceArray comb;       // the expert outputs back at their tokens' rank ([expert][slot])
    bool computed = false;  // the intermediates (everything but x) are there

    bool has_intermediates() const { return computed; }
    void drop_intermediates();
    std::int64_t bytes() const;
  };
  // Indices of a kLlama layer's parameters in the unit (the importer's order); -1 = absent bias.
  struct LlamaParams {
    int q = 0, q_bias = -1, k = 0, k_bias = -1, v = 0, v_bias = -1, o = 0, o_bias = -1;
    int gate = 0, gate_bias = -1, up = 0, up_bias = -1, down = 0, down_bias = -1;
    int input_norm = 0, post_norm = 0;
    // MoE layers: the router, and local expert j's w1 (gate), w2 (down), w3 (up) at
    // expert0 + 3j + 0, 1, 2 (no dense gate, up, down then).
    int router = -1, expert0 = -1;
    int count = 0;
  };
  static LlamaParams llama_params(const DecoderConfig& config);
  // The shapes one tp rank computes with: heads, kv heads and ffn / tp, vocabulary rows
  // ceil(vocab / tp) (the whole config when tp = 1).
  static DecoderConfig local_config(const DecoderConfig& whole);

  bool split() const { return data_config_.tp > 1; }
  bool moe() const { return config_.experts > 0; }
  bool expert_split() const { return data_config_.ep > 1; }
  // The router's choices of a microbatch (decoder_kernels.h, moe_route), recomputed from the
  // kept softmax wherever needed.
  struct Routing {
    DeviceArray expert, weight, slot, slot_token;
  };
  Routing route(const DeviceArray& router_probs);
  // The MoE block: from s.normed2 to s.comb (forward), and from the gradient dy at the layer's
  // output to the gradient at normed2 (backward), with the expert-parallel all-to-alls.
  void compute_moe(std::span<const float* const> params, Saved& s);
  DeviceArray backward_moe(std::span<const float* const> params, std::span<float* const> grads,
                           const Saved& s, const DeviceArray& dy);
  void all_to_all(std::string_view site, const DeviceArray& send, std::int64_t n,
                  DeviceArray& recv);
  bool ok() const;
  // False after a failure, or (then failing) without a split communicator for `site`.
  bool can_communicate(std::string_view site);
  // The split's collectives on the group (a failure is kept as status()).
  void all_reduce(std::string_view site, DeviceArray& buf, std::int64_t n);
  void all_gather(std::string_view site, const DeviceArray& send, std::int64_t n,
                  DeviceArray& recv);
  // The embedding's output for microbatch mb (vocabulary-parallel under tp: all-reduced).
  DeviceArray embed(std::int32_t mb, const float* table);
  // A kLlama layer's output mid + down_proj(act) from its intermediates (under tp: the
  // row-parallel product all-reduced first).
  DeviceArray llama_output(std::span<const float* const> params, const Saved& s);

  Saved& saved(std::int32_t unit, std::int32_t mb);
  bool is_head(std::int32_t unit) const { return unit == num_units_ - 1; }
  void check_call(const char* what, std::int32_t unit, std::int32_t mb,
                  std::size_t num_params) const;
  // Everything a layer or the head derives from its kept input s.x; forward and recompute share
  // it, so recomputation is bit-identical. The head also writes the microbatch's row losses.
  void compute_intermediates(std::int32_t unit, std::int32_t mb,
                             std::span<const float* const> params, Saved& s);
  void backward_head(std::int32_t mb, std::span<const float* const> params,
                     std::span<float* const> grads, Saved& s);
  void backward_layer(std::int32_t mb, std::span<const float* const> params,
                      std::span<float* const> grads, Saved& s);
  // kLlama layers: the intermediates from s.x, and the backward (dy in grad_[mb] becomes dx).
  void compute_llama_layer(std::span<const float* const> params, Saved& s);
  void backward_llama_layer(std::int32_t mb, std::span<const float* const> params,
                            std::span<float* const> grads, Saved& s);
  // y += x W^T (+ bias): a projection of `rows` rows from `in` to `out` features.
  void project(std::int64_t in, std::int64_t out, const float* x, const float* w, const float* bias,
               float beta, float* y);
  // The gradient at the input `x` of an rmsnorm (weight) given the gradient at its output;
  // overwrites dweight. 1/rms comes from `inv_rms` (kMlp keeps it) or is recomputed when null.
  DeviceArray norm_backward(const DeviceArray& x, const float* weight, const float* inv_rms,
                            const DeviceArray& dnormed, float* dweight);
  // rmsnorm(x) with `weight` (kLlama: 1/rms is not kept).
  DeviceArray rmsnorm_of(const DeviceArray& x, const float* weight);
  // hidden, ffn, head size, q width (heads x head size), k/v width (kv heads x head size).
  struct LlamaDims {
    std::int64_t hidden, ffn, head_dim, q_width, kv_width;
  };
  LlamaDims llama_dims() const;
  // 1/rms of each row of x under the norm with `weight` (a recomputation: its output is dropped).
  DeviceArray inv_rms_of(const DeviceArray& x, const float* weight);
  float eps() const { return static_cast<float>(eps_); }
  bool llama() const { return config_.family == DecoderFamily::kLlama; }
  DeviceArray floats(std::int64_t n) { return kernels_->array<float>(n); }

  // Declared first, destroyed last: every DeviceArray below returns its memory to it.
  std::unique_ptr<DecoderKernels> kernels_;
  DecoderConfig data_config_;  // the whole model's config: the data and the split
  DecoderConfig config_;       // the shapes this rank computes with (local_config)
  SplitComm* split_ = nullptr;
  Status comm_status_;
  std::int64_t vocab_first_ = 0;  // the first vocabulary row of this rank's slice
  std::int64_t vocab_valid_ = 0;  // the slice's rows that are not padding
  std::int64_t local_experts_ = 0;  // experts / ep
  std::int64_t capacity_ = 0;       // slots per expert of a microbatch (expert_capacity)
  std::int64_t num_mb_;
  std::int64_t rank_;
  std::int64_t world_;
  std::int64_t tokens_;  // per microbatch
  std::int32_t num_units_;
  double eps_;                         // the rmsnorm epsilon
  LlamaParams lp_;                     // kLlama layer parameter indices
  std::vector<DeviceArray> inputs_;    // [mb] int32 token ids
  std::vector<DeviceArray> targets_;   // [mb] int32 token ids
  std::vector<DeviceArray> hidden_;    // [mb] output of the last unit run forward
  std::vector<DeviceArray> grad_;      // [mb] d loss / d that unit's input
  std::vector<DeviceArray> row_loss_;  // [mb] per-token losses (double), written by the head
  std::vector<bool> has_loss_;
  std::vector<Saved> saved_;  // [unit * num_mb + mb]
  std::vector<bool> recompute_;
};

}  // namespace fsdp::backend

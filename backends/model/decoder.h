// SPDX-License-Identifier: Apache-2.0
// The small decoder model the real backends train (docs/design/backends.md): an embedding, `layers` blocks of
// x + W2 · gelu(W1 · rmsnorm(x)) (per token), a final rmsnorm and a linear head with
// cross-entropy on synthetic tokens. Everything is fp32 and deterministic from a seed.
//
// Contract shared by the executor (backends/exec) and the kernels:
// * decoder_model() describes it as an fsdp::Model whose units are root-level siblings in forward
//   order: "embedding", "layers.0" .. "layers.{L-1}", "head"; every parameter fp32, trainable.
//   The schedule IR is built from that Model, so the executor finds a unit's parameters in the
//   unit's layout in Model order.
// * A rank with data_rank r of data_world W trains, in microbatch mb of step s, on the samples
//   global_sample_index(config, s, mb, r, i) for i in [0, micro_batch_size).
// * Parameters (row-major, docs/design/backends.md "The training model"): "embedding" has
//   embedding.weight [vocab, hidden]; "layers.i" has layers.i.norm.weight [hidden],
//   layers.i.w1.weight [ffn, hidden], layers.i.w2.weight [hidden, ffn]; "head" has
//   head.norm.weight [hidden], head.out.weight [vocab, hidden].
// * The local loss of (rank, microbatch) is the mean token cross-entropy of that microbatch.
//   Backward writes d(local loss)/d(param) (no other scaling). FSDP then sums microbatches,
//   averages ranks and multiplies by grad_scale: g = grad_scale / W · Σ_r Σ_mb ∇L(r, mb).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/base/expected.h"
#include "core/model/hub_arch.h"
#include "core/model/model.h"
#include "core/policy/optimizer_policy.h"

namespace fsdp::backend {

class SplitComm;

// The two architectures the backends train. kMlp: the small decoder above. kLlama: the hub
// llama / mistral / qwen2 families (docs/design/backends.md, "The Llama model"): blocks of
// h = x + o_proj(attention(rope(q_proj n1), rope(k_proj n1), v_proj n1)), n1 = rmsnorm(x);
// y = h + down_proj(silu(gate_proj n2) * up_proj n2), n2 = rmsnorm(h); causal grouped-query
// attention; optional q/k/v, o and MLP biases; untied head. Its Model is the hub importer's
// (hub_arch_to_model) for the same architecture in fp32: the same tensors, names, shapes, order,
// FLOPs and activation bytes as `fsdpsim model` shows for that config.
enum class DecoderFamily : std::uint8_t { kMlp, kLlama };

struct DecoderConfig {
  std::int64_t vocab = 64;
  std::int64_t hidden = 32;
  std::int64_t ffn = 64;
  std::int64_t layers = 2;
  std::int64_t seq_len = 16;          // tokens per sample (targets are the next tokens)
  std::int64_t micro_batch_size = 2;  // samples per microbatch per rank
  std::uint64_t seed = 1;
  DecoderFamily family = DecoderFamily::kMlp;
  // kLlama only (decoder_config_of_arch fills them from a hub config).
  std::string name = "decoder";  // the Model's name
  std::string model_type;        // llama | mistral | qwen2
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
  bool qkv_bias = false;
  bool o_bias = false;
  bool mlp_bias = false;
  // Tensor parallelism (kLlama only; docs/design/parallelism.md, "Training it for real"): the
  // model is the rank-local one of a tp-way Megatron split (hub_arch_to_model with a ModelSplit),
  // and this rank holds slice tp_rank of every split tensor (split_parameters below). The fields
  // above describe the whole model.
  std::int64_t tp = 1;
  std::int64_t tp_rank = 0;
  // Mixture of experts (kLlama with model_type mixtral; docs/design/parallelism.md, "Experts for
  // real"): every layer's MLP is `experts` SwiGLU experts of width ffn behind a router that
  // sends each token to its top_k experts, weighted by the softmax of the router logits
  // renormalised over the chosen. Each expert takes at most C = top_k x capacity_factor x tokens
  // / experts of a microbatch's routed copies (the first in token order; the rest are dropped),
  // the IR's balanced share. Under expert parallelism this rank holds experts / ep of them (ep
  // rank ep_rank: global expert ep_rank x experts / ep + j is its local expert j) and the
  // tokens reach them by all-to-all over the ep group.
  std::int64_t experts = 0;  // 0: dense MLPs
  std::int64_t top_k = 0;
  double capacity_factor = 1.0;
  std::int64_t ep = 1;
  std::int64_t ep_rank = 0;
};

// The kLlama config of a hub architecture (core/model/hub_arch.h) with seq_len, micro_batch_size
// and seed. Errors name the config field: a family other than llama, mistral, qwen2, mixtral;
// tied embeddings (the head would use another unit's weight); a rope_scaling; an odd head size;
// a sliding window shorter than seq_len (it would change causal attention).
Expected<DecoderConfig> decoder_config_of_arch(const HubArch& arch, std::string name,
                                               std::int64_t seq_len, std::int64_t micro_batch_size,
                                               std::uint64_t seed);

// Errors (kInvalidArgument, one line naming the field, expected and actual): any size < 1,
// sizes whose products overflow int64; tp < 1, tp_rank outside [0, tp); tp > 1 with the small
// decoder (kMlp), or with heads, kv_heads or ffn that tp does not divide, or a vocabulary so
// small that the last rank's slice would hold only padding; experts without model_type mixtral,
// top_k outside [1, experts], a capacity factor outside [1, 64] or whose slots per expert C are
// not a whole number >= 1; ep < 1, ep_rank outside [0, ep), ep that does not divide the experts,
// ep > 1 without experts or together with tp > 1.
Status validate(const DecoderConfig& config);

// Slots per expert of one microbatch: top_k x capacity_factor x tokens / experts (validate
// checked it is whole); 0 without experts.
std::int64_t expert_capacity(const DecoderConfig& config);

// The Model the schedule IR is built from (see the contract above): under tp > 1 the rank-local
// model, with the activation collectives of the split (core/model/unit_work.h).
Expected<Model> decoder_model(const DecoderConfig& config);

// Initial parameter values, deterministic from config.seed: [unit][param] -> numel values, in
// decoder_model()'s order; the whole model's (tp and tp_rank are ignored).
using ParamValues = std::vector<std::vector<std::vector<float>>>;
ParamValues initial_parameters(const DecoderConfig& config);

// How tensor parallelism cuts the whole model's parameters (Megatron-LM, docs/design/
// parallelism.md): column-parallel q, k, v, gate and up (and their biases) by output rows,
// row-parallel o and down by input columns, the embedding and the output layer by vocabulary
// rows (padded up to a multiple of tp with zero rows), the rest whole. split_parameters gives
// slice config.tp_rank of `whole` (values in initial_parameters' layout, tp ignored), shaped
// as decoder_model(config); join_parameters puts the tp slices (slices[r] of rank r, each
// shaped as decoder_model of that rank) back together, padding dropped. Under expert parallelism
// (ep > 1) slice config.ep_rank holds that rank's experts (its local expert j is global expert
// ep_rank x experts / ep + j) and the rest whole, and join takes ep slices. Without a split both
// copy.
ParamValues split_parameters(const DecoderConfig& config, const ParamValues& whole);
ParamValues join_parameters(const DecoderConfig& config, const std::vector<ParamValues>& slices);

// Global index of sample i of microbatch mb of step `step` on data rank r of W.
std::int64_t global_sample_index(const DecoderConfig& config, std::int64_t num_microbatches,
                                 std::int64_t data_world, std::int64_t step, std::int64_t mb,
                                 std::int64_t data_rank, std::int64_t i);

// seq_len + 1 token ids in [0, vocab) of one sample (inputs are [0, seq_len), targets [1, ...]).
std::vector<std::int32_t> sample_tokens(const DecoderConfig& config, std::int64_t global_sample);

// The per-rank decoder the executor calls unit by unit. Keeps the activations each unit's
// backward needs, per microbatch, between forward and backward. The one implementation is
// DecoderDriver (decoder_driver.h) over a kernel set (decoder_kernels.h): make() gives it the host
// kernel set (host memory, BLAS matmuls); backends/cuda's CudaDecoder the CUDA set (device
// memory). Not thread-safe: one compute stream calls it.
class HostDecoder {
 public:
  static Expected<std::unique_ptr<HostDecoder>> make(const DecoderConfig& config,
                                                     std::int64_t num_microbatches,
                                                     std::int64_t data_rank,
                                                     std::int64_t data_world);
  virtual ~HostDecoder() = default;

  // Selects the samples of `step` and clears the step's losses.
  virtual void begin_step(std::int64_t step) = 0;
  // params[p]: the unit's parameter p (Model order), numel contiguous fp32 values.
  virtual void forward(std::int32_t unit, std::int32_t mb,
                       std::span<const float* const> params) = 0;
  // Recomputation inside backward (activation checkpointing): same result as forward.
  virtual void recompute(std::int32_t unit, std::int32_t mb,
                         std::span<const float* const> params) = 0;
  // grads[p] is overwritten with d(local loss of mb)/d(param p). Releases mb's activations of
  // the unit.
  virtual void backward(std::int32_t unit, std::int32_t mb, std::span<const float* const> params,
                        std::span<float* const> grads) = 0;
  // Mean over this step's microbatches of the local loss (valid once the head ran forward on
  // every microbatch of the step).
  virtual double step_loss() const = 0;

  // Added by the kernels (h4). Activation checkpointing of `unit`: when on, forward keeps only the
  // unit's input and backward recomputes the rest unless recompute() already did. The results
  // are bit-identical either way. Default off; this base class ignores it.
  virtual void set_recompute(std::int32_t /*unit*/, bool /*on*/) {}
  // Bytes of activations kept right now for later backward passes (all units and microbatches;
  // the step's token ids are not counted). Per token of a microbatch this is what
  // decoder_model() reports as the units' activations. This base class keeps none.
  virtual std::int64_t activation_bytes() const { return 0; }
  // The first error of any call so far (a device decoder's vendor failures; the interface's calls
  // return void). The host decoder has none.
  virtual Status status() const { return ok_status(); }
  // Under tp > 1 the decoder issues its tensor-parallel group's collectives through `comm`
  // (backends/model/split_comm.h; not owned). This base class ignores it.
  virtual void set_split_comm(SplitComm* /*comm*/) {}
};

// Optimizer hyper-parameters (elementwise optimizers, so a shard updates exactly like the
// corresponding slice of the unsharded tensor).
struct OptimizerHyper {
  double lr = 1e-2;
  double momentum = 0.9;  // SGD with momentum
  double beta1 = 0.9;     // Adam
  double beta2 = 0.999;
  double eps = 1e-8;
};

// One update of `weights` by `grads` (both n values). `state` holds num_states() x n values
// (Adam: exp_avg then exp_avg_sq; SGD momentum: the momentum buffer), zero before the first
// step; `step` is 1-based (Adam's bias correction).
void optimizer_update(OptimizerKind kind, const OptimizerHyper& hyper, std::int64_t step,
                      std::span<float> weights, std::span<const float> grads,
                      std::span<float> state);
// State values per weight of `kind` (fp32 state): 0 (SGD), 1 (SGD momentum), 2 (Adam).
std::int64_t optimizer_num_states(OptimizerKind kind);

// Unsharded reference: one process holding every parameter trains `steps` steps on the samples
// of all data_world ranks with the FSDP gradient rule above.
struct TrainResult {
  std::vector<double> losses;  // per step: mean over ranks and microbatches of the local loss
  ParamValues final_params;
};
Expected<TrainResult> train_unsharded(const DecoderConfig& config, OptimizerKind optimizer,
                                      const OptimizerHyper& hyper, std::int64_t steps,
                                      std::int64_t num_microbatches, std::int64_t data_world,
                                      double grad_scale);

}  // namespace fsdp::backend

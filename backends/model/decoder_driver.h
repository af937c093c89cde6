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
  // The kernel set's first failure: after one, every call is a no-op.
  Status status() const override;

 private:
  // What one unit keeps for one microbatch between forward and backward.
  struct Saved {
    DeviceArray x;        // the unit's input (tokens x hidden)
    DeviceArray inv_rms;  // tokens
    DeviceArray normed;   // tokens x hidden
    DeviceArray u;        // layers: W1 n (tokens x ffn)
    DeviceArray a;        // layers: gelu(u)
    DeviceArray probs;    // head: softmax (tokens x vocab)

    bool has_intermediates() const { return !inv_rms.empty(); }
    void drop_intermediates();
    std::int64_t bytes() const;
  };

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
  // The gradient at the unit's input x through its rmsnorm (weight, s.inv_rms), given the
  // gradient at the norm's output; overwrites dweight.
  DeviceArray norm_backward(const Saved& s, const float* weight, const DeviceArray& dnormed,
                            float* dweight);
  DeviceArray floats(std::int64_t n) { return kernels_->array<float>(n); }

  // Declared first, destroyed last: every DeviceArray below returns its memory to it.
  std::unique_ptr<DecoderKernels> kernels_;
  DecoderConfig config_;
  std::int64_t num_mb_;
  std::int64_t rank_;
  std::int64_t world_;
  std::int64_t tokens_;  // per microbatch
  std::int32_t num_units_;
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

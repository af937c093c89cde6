// SPDX-License-Identifier: Apache-2.0
// Unit: one FSDP unit (a module wrapped by fully_shard): its parameter tensors, the work of its
// forward pass per token and the activation bytes per token it keeps for backward. Backward costs
// twice the forward FLOPs (docs/models.md). A value type built by Unit::make; the parent index is
// checked against the other units by Model::make.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/base/expected.h"
#include "core/model/param.h"
#include "core/model/unit_work.h"

namespace fsdp {

// Forward FLOPs per token: 2 x multiply-accumulates. Attention (scores QK^T and context PV) grows
// with the sequence length s, so it is kept as the coefficient of s.
struct UnitFlops {
  std::int64_t matmul = 0;             // every weight matmul the token passes through
  std::int64_t attention_per_seq = 0;  // attention FLOPs per token = attention_per_seq * s
  friend bool operator==(const UnitFlops&, const UnitFlops&) = default;
};

// What one selective activation-checkpointing mode does to a unit, per token (docs/models.md,
// "Activation checkpointing modes").
struct CheckpointFigures {
  std::int64_t kept = 0;       // activation bytes kept from the forward until backward
  std::int64_t transient = 0;  // bytes the recompute re-materialises, live until backward
  UnitFlops flops{};           // the recompute's FLOPs (zero: nothing is recomputed)
  // Of `kept`, the bytes of saved tensors that neither backward nor the recompute reads (a
  // selective-op block's MLP output before the residual add). Eager checkpointing keeps them
  // (its policy caches every saved op's output); torch.compile's partitioner saves only what the
  // backward graph uses, so a compiled block keeps `kept - unread` (docs/models.md).
  std::int64_t unread = 0;
  friend bool operator==(const CheckpointFigures&, const CheckpointFigures&) = default;
};

// Activation bytes per token kept from the forward pass until backward.
struct UnitActivations {
  std::int64_t stored = 0;     // without recomputation
  std::int64_t recompute = 0;  // with the unit fully recomputed (its checkpointed input)
  // torchtitan's op-level policy and Megatron-LM's core-attention recomputation. Absent: the
  // unit's structure is unknown and it can only be recomputed whole (the full figures).
  std::optional<CheckpointFigures> selective_op{};
  std::optional<CheckpointFigures> core_attention{};
  // A transformer block: the unit torchtitan wraps in a checkpoint (its embedding and output
  // head are not); selective-layer:K counts these.
  bool block = true;
  // Logits per token of the loss this unit computes (the head: the vocabulary size), 0 for the
  // other units. The schedule builder adds the loss's buffers (docs/design/simulator.md,
  // "The loss"); their bytes beyond `stored` are not in these figures.
  std::int64_t loss_logits = 0;
  friend bool operator==(const UnitActivations&, const UnitActivations&) = default;
};

class Unit {
 public:
  static constexpr std::int32_t kNoParent = -1;

  // Errors (kInvalidArgument unless noted): bad name; parent < -1; two parameters with one name;
  // a negative FLOP or activation figure; parameter count or bytes beyond int64 (kOutOfRange).
  // `work` (optional: empty = cost from the FLOPs) is checked by validate_unit_work.
  static Expected<Unit> make(std::string name, std::int32_t parent, std::vector<Param> params,
                             UnitFlops flops, UnitActivations activations, UnitWork work = {});

  const std::string& name() const { return name_; }
  // Index of the enclosing unit in Model::units(), or kNoParent for a root-level unit.
  std::int32_t parent() const { return parent_; }
  const std::vector<Param>& params() const { return params_; }
  const UnitFlops& flops() const { return flops_; }
  const UnitActivations& activations() const { return activations_; }
  // The kernels of its forward pass, for the per-op compute model; empty when not known.
  const UnitWork& work() const { return work_; }

  std::int64_t num_parameters() const { return num_parameters_; }
  std::int64_t param_bytes() const { return param_bytes_; }

  // matmul + attention_per_seq * seq_len; kOutOfRange on overflow, kInvalidArgument for
  // seq_len < 0.
  Expected<std::int64_t> forward_flops_per_token(std::int64_t seq_len) const;
  // Twice the forward FLOPs (gradients with respect to inputs and to weights).
  Expected<std::int64_t> backward_flops_per_token(std::int64_t seq_len) const;

  friend bool operator==(const Unit&, const Unit&) = default;

 private:
  Unit() = default;
  std::string name_;
  std::int32_t parent_ = kNoParent;
  std::vector<Param> params_;
  UnitFlops flops_;
  UnitActivations activations_;
  UnitWork work_;
  std::int64_t num_parameters_ = 0;
  std::int64_t param_bytes_ = 0;
};

// attention_per_seq * seq_len + matmul, checked; shared by Unit and Model.
Expected<std::int64_t> forward_flops_per_token(const UnitFlops& flops, std::int64_t seq_len);

}  // namespace fsdp

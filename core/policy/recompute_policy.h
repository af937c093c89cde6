// SPDX-License-Identifier: Apache-2.0
// RecomputePolicy: which activations a run recomputes in backward instead of keeping them from
// the forward (activation checkpointing), and what that means for one unit: the bytes it keeps,
// the bytes the recompute re-materialises and the FLOPs it spends (docs/models.md,
// "Activation checkpointing modes"). Modes:
//   none               every unit keeps what its backward reads (UnitActivations::stored);
//   full               every transformer block is recomputed whole from its checkpointed
//                      input, the units outside the blocks (embedding, head) keep theirs:
//                      torchtitan's activation_checkpoint.mode = "full" and Megatron-LM's
//                      --recompute-granularity full (the figures of selective-layer:1);
//   full-all-units     every unit is recomputed whole, embedding and head included;
//   selective-op       torchtitan's op-level policy inside every transformer block;
//   selective-layer:K  whole-block recomputation of every K-th transformer block (torchtitan's
//                      ac_freq: the k-th block, counted from 1, when k % K == 0);
//   core-attention     Megatron-LM's selective recomputation of the attention core.
// Immutable; built by make or parse.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/expected.h"
#include "core/model/model.h"
#include "core/model/unit.h"

namespace fsdp {

enum class RecomputeMode : std::uint8_t {
  kNone,
  kFull,          // every transformer block (UnitActivations::block)
  kFullAllUnits,  // every unit
  kSelectiveOp,
  kSelectiveLayer,
  kCoreAttention,
};

class RecomputePolicy {
 public:
  RecomputePolicy() = default;  // none

  // Error (kInvalidArgument): a layer frequency < 1 for selective-layer, or one other than 0
  // for the other modes.
  static Expected<RecomputePolicy> make(RecomputeMode mode, std::int64_t layer_frequency = 0);
  static RecomputePolicy full();            // the transformer blocks
  static RecomputePolicy full_all_units();  // every unit
  // "none", "full", "full-all-units", "selective-op", "selective-layer:K" (K >= 1),
  // "core-attention". Error (kInvalidArgument, one line): "--recompute is 'x'; expected none,
  // full, full-all-units, selective-op, selective-layer:K or core-attention" (K >= 1 named for a
  // bad K).
  static Expected<RecomputePolicy> parse(std::string_view text);

  RecomputeMode mode() const { return mode_; }
  // K of selective-layer:K; 0 for the other modes.
  std::int64_t layer_frequency() const { return layer_frequency_; }
  bool is_none() const { return mode_ == RecomputeMode::kNone; }
  bool is_full() const { return mode_ == RecomputeMode::kFull; }
  bool is_full_all_units() const { return mode_ == RecomputeMode::kFullAllUnits; }
  // Whether a recomputed unit runs its whole forward again (full, full-all-units,
  // selective-layer:K), collectives included, rather than part of it.
  bool recomputes_whole_units() const {
    return mode_ == RecomputeMode::kFull || mode_ == RecomputeMode::kFullAllUnits ||
           mode_ == RecomputeMode::kSelectiveLayer;
  }

  friend bool operator==(const RecomputePolicy&, const RecomputePolicy&) = default;

 private:
  RecomputeMode mode_ = RecomputeMode::kNone;
  std::int64_t layer_frequency_ = 0;
};

// What the policy does to one unit, per token.
struct UnitCheckpoint {
  bool recomputed = false;     // a kRecompute op runs before the unit's backward
  std::int64_t kept = 0;       // activation bytes kept from the forward until backward
  std::int64_t transient = 0;  // bytes the recompute re-materialises, live until backward
  UnitFlops flops{};           // the recompute's FLOPs
  friend bool operator==(const UnitCheckpoint&, const UnitCheckpoint&) = default;
};

// The checkpoint of `unit` under `policy`; `block_index` is the unit's position (0-based) among
// the model's transformer blocks (UnitActivations::block), -1 for a unit that is none.
// `compiled`: the blocks run under torch.compile, whose partitioner saves only what the backward
// graph reads, so a selective mode keeps its figures' `kept - unread` (CheckpointFigures).
UnitCheckpoint checkpoint_of(const RecomputePolicy& policy, const Unit& unit,
                             std::int64_t block_index, bool compiled = false);

// checkpoint_of every unit of `model`, in unit order, its blocks counted in that order.
std::vector<UnitCheckpoint> checkpoints_of(const RecomputePolicy& policy, const Model& model,
                                           bool compiled);

// The form parse reads: "none", "full", "full-all-units", "selective-op", "selective-layer:2",
// "core-attention".
std::string to_string(const RecomputePolicy& policy);
std::ostream& operator<<(std::ostream& os, const RecomputePolicy& policy);

}  // namespace fsdp

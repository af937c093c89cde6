// SPDX-License-Identifier: Apache-2.0
// UnitWork: the kernels one FSDP unit's forward pass runs, per token, for the simulator's per-op
// compute model (docs/design/simulator.md, "Per-op compute"): its weight matmuls as GEMM shapes,
// its attention core, and the HBM bytes its elementwise kernels move (eager, and fused as
// torch.compile fuses them). The hub importer derives it from the architecture (docs/models.md);
// a unit without it (hand-written model files, the CPU decoder's MLP network) is costed from its
// FLOPs alone. A plain value checked by validate_unit_work.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/expected.h"

namespace fsdp {

// `count` GEMMs y[rows, n] = x[rows, k] W[n, k]^T, rows = tokens * rows_num / rows_den (a routed
// expert sees top_k / experts of the tokens: rows_num = top_k, rows_den = experts).
// `input_group`: GEMMs of one unit with the same non-zero group (all `count` copies of each) read
// one tensor, a norm's output: a Llama layer's q/k/v projections, its MLP's gate and up.
// Transformer Engine runs such a group as one GEMM with the norm fused into its input cast
// (Megatron-Core's linear_qkv and linear_fc1 are LayerNormLinear modules; docs/design/
// simulator.md, "Per-op compute"). 0: the GEMM reads its own input.
// `output_head`: the language-model head's projection, which float8 training keeps in the
// compute dtype (torchtitan's float8 converter skips "output"; Megatron-Core's output layer is
// not a Transformer Engine module).
struct GemmShape {
  std::int64_t n = 1;
  std::int64_t k = 1;
  std::int64_t count = 1;
  std::int64_t rows_num = 1;
  std::int64_t rows_den = 1;
  std::int64_t input_group = 0;
  bool output_head = false;
  friend bool operator==(const GemmShape&, const GemmShape&) = default;
};

// The attention core (scores, softmax, context) as flash attention runs it: `heads` query heads
// of qk_head_dim over the sequence, values of v_head_dim; causal masks skip half the blocks.
struct AttentionShape {
  std::int64_t heads = 0;  // 0: the unit has no attention core
  std::int64_t qk_head_dim = 0;
  std::int64_t v_head_dim = 0;
  bool causal = true;
  friend bool operator==(const AttentionShape&, const AttentionShape&) = default;
};

// The parallel axis an activation collective runs over: the tensor-parallel group ("tp") or the
// expert-parallel group ("ep") of the mesh (docs/design/parallelism.md).
enum class ParallelAxis : std::uint8_t { kTensor, kExpert };
// What an activation collective does (the schedule issues it as the matching collective op).
enum class ActivationCollectiveKind : std::uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll
};
// Whether it runs in the unit's forward (and again in a full recompute) or in its backward.
enum class CollectivePass : std::uint8_t { kForward, kBackward };

// One collective a unit's computation issues on its activations when the model is split over a
// tensor- or expert-parallel group (Megatron-LM's layers; docs/design/parallelism.md gives each
// site and its size): e.g. the all-reduce of the attention block's row-parallel output. Its
// elements are per token of the microbatch: op elements = tokens x elements_per_token /
// token_divisor (token_divisor = tp for a sequence-parallel tensor, which each rank holds for
// 1/tp of the tokens).
struct ActivationCollective {
  CollectivePass pass = CollectivePass::kForward;
  ActivationCollectiveKind kind = ActivationCollectiveKind::kAllReduce;
  ParallelAxis axis = ParallelAxis::kTensor;
  std::string site;  // what it moves: "attention.out", "mlp.in_grad", "moe.dispatch", ...
  std::int64_t elements_per_token = 0;
  std::int64_t token_divisor = 1;
  friend bool operator==(const ActivationCollective&, const ActivationCollective&) = default;
};

std::string_view to_string(ParallelAxis axis);              // "tp", "ep"
std::string_view to_string(ActivationCollectiveKind kind);  // "all-reduce", ..., "all-to-all"
std::string_view to_string(CollectivePass pass);            // "forward", "backward"

struct UnitWork {
  std::vector<GemmShape> gemms;
  AttentionShape attention;
  // HBM bytes per token read and written by the forward's non-matmul kernels: one kernel per op
  // as eager PyTorch runs them, with elementwise chains fused (torch.compile), and as
  // Megatron-Core's Transformer Engine layer runs them (fused, with its own layout's copies).
  std::int64_t elementwise_bytes = 0;
  std::int64_t fused_elementwise_bytes = 0;
  std::int64_t te_elementwise_bytes = 0;
  // The activation collectives of a tensor- or expert-parallel split, in the order the forward
  // (then the backward) issues them; empty for an unsplit model. Not kernels: empty() ignores
  // them.
  std::vector<ActivationCollective> collectives;

  // No GEMM, no attention, no elementwise bytes: the unit is costed from its FLOPs.
  bool empty() const {
    return gemms.empty() && attention.heads == 0 && elementwise_bytes == 0 &&
           fused_elementwise_bytes == 0 && te_elementwise_bytes == 0;
  }
  friend bool operator==(const UnitWork&, const UnitWork&) = default;
};

// Errors (kInvalidArgument), naming `what` and the field: a GEMM dimension, count or row ratio
// < 1; an input_group < 0; a GEMM of an input group whose k or row ratio differs from the
// group's first; heads < 0, or heads > 0 with a head dimension < 1; negative bytes; fused bytes
// above the eager bytes; an activation collective with elements_per_token or token_divisor < 1 or
// an empty site.
Status validate_unit_work(const UnitWork& work, std::string_view what);

}  // namespace fsdp

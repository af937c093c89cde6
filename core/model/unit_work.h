// SPDX-License-Identifier: Apache-2.0
// UnitWork: the kernels one FSDP unit's forward pass runs, per token, for the simulator's per-op
// compute model (docs/design/simulator.md, "Per-op compute"): its weight matmuls as GEMM shapes,
// its attention core, and the HBM bytes its elementwise kernels move (eager, and fused as
// torch.compile fuses them). The hub importer derives it from the architecture (docs/models.md);
// a unit without it (hand-written model files, the CPU decoder's MLP network) is costed from its
// FLOPs alone. A plain value checked by validate_unit_work.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/base/expected.h"

namespace fsdp {

// `count` GEMMs y[rows, n] = x[rows, k] W[n, k]^T, rows = tokens * rows_num / rows_den (a routed
// expert sees top_k / experts of the tokens: rows_num = top_k, rows_den = experts).
struct GemmShape {
  std::int64_t n = 1;
  std::int64_t k = 1;
  std::int64_t count = 1;
  std::int64_t rows_num = 1;
  std::int64_t rows_den = 1;
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

struct UnitWork {
  std::vector<GemmShape> gemms;
  AttentionShape attention;
  // HBM bytes per token read and written by the forward's non-matmul kernels: one kernel per op
  // as eager PyTorch runs them, and with elementwise chains fused (torch.compile).
  std::int64_t elementwise_bytes = 0;
  std::int64_t fused_elementwise_bytes = 0;

  // No GEMM, no attention, no elementwise bytes: the unit is costed from its FLOPs.
  bool empty() const {
    return gemms.empty() && attention.heads == 0 && elementwise_bytes == 0 &&
           fused_elementwise_bytes == 0;
  }
  friend bool operator==(const UnitWork&, const UnitWork&) = default;
};

// Errors (kInvalidArgument), naming `what` and the field: a GEMM dimension, count or row ratio
// < 1; heads < 0, or heads > 0 with a head dimension < 1; negative bytes; fused bytes above the
// eager bytes.
Status validate_unit_work(const UnitWork& work, std::string_view what);

}  // namespace fsdp

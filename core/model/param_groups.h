// SPDX-License-Identifier: Apache-2.0
// Parameter groups of one FSDP unit, as fully_shard forms them (fsdp-behaviour.md §4.1 step 2e):
// the unit's parameters keyed by (dtype, requires_grad, expert) in first-seen order, one DBuffer
// group each, with the group's GlobalLayout from core/layout (fsdp-behaviour.md §3.3: RowAtomic, or
// BlockAtomic(32) for MXFP8 groups).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/base/expected.h"
#include "core/layout/global_layout.h"
#include "core/layout/shard_layout.h"
#include "core/model/param.h"
#include "core/model/unit.h"

namespace fsdp {

// Megatron-FSDP lays MXFP8 parameter groups out with BlockAtomic(32).
inline constexpr std::int64_t kMxfp8BlockSize = 32;

// The members of one group, before any layout is built.
struct ParamGrouping {
  DType dtype = DType::kBf16;
  bool requires_grad = true;
  std::vector<std::int64_t> param_indices;  // into the unit's params, in parameter order
  // Routed experts of an expert-parallel split: sharded over the expert-data-parallel axes.
  bool expert = false;
  friend bool operator==(const ParamGrouping&, const ParamGrouping&) = default;
};

// A group with its layout; tensor i of `layout` is params[param_indices[i]].
struct ParamGroup {
  DType dtype;
  bool requires_grad;
  std::vector<std::int64_t> param_indices;
  std::int64_t block_size;  // the row block the layout keeps whole (kMxfp8BlockSize for fp8)
  GlobalLayout layout;
  friend bool operator==(const ParamGroup&, const ParamGroup&) = default;
};

// Groups by (dtype, requires_grad, expert), groups in order of their first parameter. Never fails;
// an empty span gives no groups (a parameterless unit).
std::vector<ParamGrouping> group_params(std::span<const Param> params);

// group_params, then build_row_atomic_layout(shapes, dp_size, block, shard_layout) per group,
// where block = block_size for bf16/fp16/fp32 groups and kMxfp8BlockSize for fp8 groups. Layout
// errors (dp_size < 1, a 0-D parameter, rows not divisible by the block, overflow) come back with
// the unit and group named.
Expected<std::vector<ParamGroup>> build_param_groups(const Unit& unit, std::int64_t dp_size,
                                                     std::int64_t block_size,
                                                     ShardLayout shard_layout);

}  // namespace fsdp

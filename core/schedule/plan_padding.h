// SPDX-License-Identifier: Apache-2.0
// PlanPadding: what the groups' layouts waste on padding and alignment gaps (the §2 padded
// layouts round every shard up to whole rows per rank). Every unsharded buffer and every
// all-gather / reduce-scatter carries these elements, so they cost bandwidth and memory.
#pragma once

#include <cstdint>

#include "core/base/expected.h"
#include "core/schedule/group_geometry.h"

namespace fsdp {

struct PlanPadding {
  std::int64_t flat_elements = 0;     // Σ over groups of the layout size
  std::int64_t data_elements = 0;     // Σ over groups of the parameters' numel
  std::int64_t padding_elements = 0;  // flat - data: gaps and tail padding
  // Padding bytes in one gather of every group (compute dtype): what one full forward pass
  // moves and holds for nothing.
  std::int64_t gathered_padding_bytes = 0;
  // padding / flat, 0 for an empty plan.
  double fraction() const {
    return flat_elements == 0 ? 0.0
                              : static_cast<double>(padding_elements) /
                                    static_cast<double>(flat_elements);
  }
  friend bool operator==(const PlanPadding&, const PlanPadding&) = default;
};

// Errors (kOutOfRange): totals beyond int64.
Expected<PlanPadding> plan_padding(const ShardGeometry& geometry);

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
#include "core/schedule/plan_padding.h"

#include "core/base/checked_math.h"
#include "core/base/strings.h"

namespace fsdp {

Expected<PlanPadding> plan_padding(const ShardGeometry& geometry) {
  PlanPadding p;
  for (const GroupGeometry& g : geometry.groups) {
    const std::int64_t size = g.layout.size();
    const std::int64_t pad = size - g.numel;
    std::int64_t bytes = 0;
    if (!checked_add(p.flat_elements, size, &p.flat_elements) ||
        !checked_add(p.data_elements, g.numel, &p.data_elements) ||
        !checked_add(p.padding_elements, pad, &p.padding_elements) ||
        !checked_mul(pad, dtype_bytes(g.compute_dtype), &bytes) ||
        !checked_add(p.gathered_padding_bytes, bytes, &p.gathered_padding_bytes)) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("padding of unit ", g.unit, " group ", g.group,
                           ": totals exceed int64"));
    }
  }
  return p;
}

}  // namespace fsdp

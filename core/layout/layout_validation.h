// SPDX-License-Identifier: Apache-2.0
// The three layout validators of the reference (fsdp-behaviour.md §1.3, §1.4, §2.3). Each returns the first
// violation as a one-line error naming the tensor (index and shape) or rank, the expected and the
// actual value; checks run in the reference's order.
#pragma once

#include <cstdint>

#include "core/base/expected.h"
#include "core/layout/global_layout.h"

namespace fsdp {

// §1.3: block_size > 0; equal segments; each tensor has row size > 0, dim 0 % block == 0 and
// offset % (block * row_size) == 0; every rank offset a multiple of chunk = lcm(block * row_size)
// (an lcm beyond int64 is a kOutOfRange error).
Status validate_for_row_atomic(const GlobalLayout& layout, std::int64_t block_size = 1);

// §2.3 relaxed rule for UNPADDED layouts: block_size > 0; each tensor has row size > 0 and
// dim 0 % block == 0; no gaps (tensors packed, size == sum of numels); every rank boundary strictly
// inside tensor i satisfies (b - offset_i) % (block * row_size_i) == 0.
Status validate_for_row_atomic_unpadded(const GlobalLayout& layout, std::int64_t block_size = 1);

// §1.4: no tensor with numel > 0 crosses the end of the segment that holds its start.
Status validate_for_tensor_atomic(const GlobalLayout& layout);

}  // namespace fsdp

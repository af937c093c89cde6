// SPDX-License-Identifier: Apache-2.0
// Shared checks of the row-atomic builders and validators (fsdp-behaviour.md §1.3, §2.2): naming a tensor in
// messages, the per-tensor shape checks in the reference's order, and the overflow-checked chunk.
#pragma once

#include "core/base/checked_math.h"
#include "core/base/expected.h"
#include "core/layout/shape.h"

#include <cstdint>
#include <span>
#include <string>

namespace fsdp::internal {

// "tensor 3 shape (4, 4)": how every layout message names a tensor.
std::string tensor_name(std::int64_t index, const Shape& shape);

// The row/block alignment block_size * row_size of tensor `index` after the reference's per-tensor
// checks, in order: at least one dim, row size > 0, dim 0 % block_size == 0 (kInvalidArgument);
// the product beyond int64 is kOutOfRange. Requires block_size > 0.
Expected<std::int64_t> checked_row_alignment(std::int64_t index, const Shape& shape,
                                             std::int64_t block_size);

// checked_row_alignment's alignment for a 1- or 2-D shape that passes its checks, inline and
// without an Expected (the per-tensor loops over a million shapes); 0 for any other shape, for
// which the caller falls back to checked_row_alignment. Requires block_size > 0.
inline std::int64_t simple_row_alignment(const Shape& shape, std::int64_t block_size) {
  const int ndim = shape.ndim();
  if (ndim != 1 && ndim != 2) {
    return 0;
  }
  const std::int64_t row = ndim == 1 ? 1 : shape.dim(1);
  std::int64_t alignment = 0;
  if (row <= 0 || (block_size != 1 && shape.dim(0) % block_size != 0) ||
      !checked_mul(block_size, row, &alignment)) {
    return 0;
  }
  return alignment;
}

// lcm of all alignments (1 when empty); kOutOfRange naming the tensor at which it leaves int64.
Expected<std::int64_t> checked_chunk(std::span<const Shape> shapes,
                                     std::span<const std::int64_t> alignments);

// checked_chunk one tensor at a time, without a vector of alignments: add every (index, shape,
// alignment) in index order, then result() is checked_chunk's result. The first overflow is kept
// (later adds are ignored), so callers can finish their per-tensor checks first.
class ChunkAccumulator {
 public:
  void add(std::int64_t index, const Shape& shape, std::int64_t alignment) {
    if (bad_index_ < 0 && chunk_ % alignment != 0) {
      grow(index, shape, alignment);  // the gcd only when the chunk changes
    }
  }
  Expected<std::int64_t> result() const;

 private:
  void grow(std::int64_t index, const Shape& shape, std::int64_t alignment);

  std::int64_t chunk_ = 1;
  std::int64_t bad_index_ = -1;  // tensor at which the lcm overflowed, or -1
  const Shape* bad_shape_ = nullptr;
  std::int64_t bad_alignment_ = 0;
};

}  // namespace fsdp::internal

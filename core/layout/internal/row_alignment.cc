// SPDX-License-Identifier: Apache-2.0
#include "core/layout/internal/row_alignment.h"

#include "core/base/checked_math.h"
#include "core/base/strings.h"

#include <limits>

namespace fsdp::internal {

std::string tensor_name(std::int64_t index, const Shape& shape) {
  return str_cat("tensor ", index, " shape ", to_string(shape));
}

Expected<std::int64_t> checked_row_alignment(std::int64_t index, const Shape& shape,
                                             std::int64_t block_size) {
  if (shape.ndim() == 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(tensor_name(index, shape),
                         " has 0 dims; expected at least 1 dim for a row-atomic layout"));
  }
  const std::int64_t row = shape.row_size();
  if (row <= 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(tensor_name(index, shape), " is incompatible with block size ", block_size,
                         ": row size is ", row,
                         " (zero-sized non-leading dims); expected a positive row size"));
  }
  if (shape.rows() % block_size != 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(tensor_name(index, shape), " is incompatible with block size ", block_size,
                         ": dim 0 is ", shape.rows(), "; expected a multiple of ", block_size));
  }
  std::int64_t alignment = 0;
  if (!checked_mul(block_size, row, &alignment)) {
    return Error(
        ErrorCode::kOutOfRange,
        str_cat(tensor_name(index, shape), " alignment overflows int64: block size ", block_size,
                " times row size ", row, " exceeds ", std::numeric_limits<std::int64_t>::max()));
  }
  return alignment;
}

void ChunkAccumulator::grow(std::int64_t index, const Shape& shape, std::int64_t alignment) {
  std::int64_t next = 0;
  if (!checked_lcm(chunk_, alignment, &next)) {
    bad_index_ = index;
    bad_shape_ = &shape;
    bad_alignment_ = alignment;
    return;
  }
  chunk_ = next;
}

Expected<std::int64_t> ChunkAccumulator::result() const {
  if (bad_index_ >= 0) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("chunk size overflows int64 at ", tensor_name(bad_index_, *bad_shape_),
                         ": lcm(", chunk_, ", alignment ", bad_alignment_, ") exceeds ",
                         std::numeric_limits<std::int64_t>::max()));
  }
  return chunk_;
}

Expected<std::int64_t> checked_chunk(std::span<const Shape> shapes,
                                     std::span<const std::int64_t> alignments) {
  ChunkAccumulator acc;
  for (std::size_t i = 0; i < alignments.size(); ++i) {
    acc.add(static_cast<std::int64_t>(i), shapes[i], alignments[i]);
  }
  return acc.result();
}

}  // namespace fsdp::internal

// SPDX-License-Identifier: Apache-2.0
// Layout builders with the reference's names (Megatron-FSDP v2 layout_builder.py; fsdp-behaviour.md §2).
// PADDED offsets are identical to the reference algorithm on every input, in O(n log n).
// All arithmetic is int64 with overflow detection: an lcm or size beyond int64 is an error.
// Each builder takes a span (the layout copies the shapes) or an rvalue std::vector<Shape> (the
// layout takes the vector over); both give the same layout and the same errors.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/base/expected.h"
#include "core/layout/global_layout.h"
#include "core/layout/shape.h"
#include "core/layout/shard_layout.h"

namespace fsdp {

namespace internal {
// The builders' implementations for a vector the caller hands over; call them through the
// overloads below.
Expected<GlobalLayout> build_row_atomic_layout_owned(std::vector<Shape> shapes,
                                                     std::int64_t dp_size, std::int64_t block_size,
                                                     ShardLayout shard_layout);
Expected<GlobalLayout> build_for_row_atomic_owned(std::vector<Shape> shapes, std::int64_t dp_size,
                                                  std::int64_t block_size);
Expected<GlobalLayout> build_for_row_atomic_unpadding_owned(std::vector<Shape> shapes,
                                                            std::int64_t dp_size,
                                                            std::int64_t block_size);
Expected<GlobalLayout> build_for_tensor_atomic_owned(std::vector<Shape> shapes,
                                                     std::int64_t dp_size,
                                                     std::span<const std::int64_t> tensor_owners);
}  // namespace internal

// An rvalue std::vector<Shape>, which a builder may move into the layout. The moving overloads
// below are templates on it so that lvalue vectors and braced lists (`{}`) still take the span
// overloads, without ambiguity.
template <typename T>
concept ShapeVectorRvalue = std::same_as<T, std::vector<Shape>>;

// Dispatch on shard_layout: kPadded -> build_for_row_atomic, kUnpadded ->
// build_for_row_atomic_unpadding.
Expected<GlobalLayout> build_row_atomic_layout(std::span<const Shape> shapes, std::int64_t dp_size,
                                               std::int64_t block_size, ShardLayout shard_layout);

template <ShapeVectorRvalue V>
Expected<GlobalLayout> build_row_atomic_layout(V&& shapes, std::int64_t dp_size,
                                               std::int64_t block_size, ShardLayout shard_layout) {
  return internal::build_row_atomic_layout_owned(std::move(shapes), dp_size, block_size,
                                                 shard_layout);
}

// §2.2: fragments/regulars, conjugate pairing, gap filling, tail, final padding to chunk * dp.
Expected<GlobalLayout> build_for_row_atomic(std::span<const Shape> shapes, std::int64_t dp_size,
                                            std::int64_t block_size = 1);
template <ShapeVectorRvalue V>
Expected<GlobalLayout> build_for_row_atomic(V&& shapes, std::int64_t dp_size,
                                            std::int64_t block_size = 1) {
  return internal::build_for_row_atomic_owned(std::move(shapes), dp_size, block_size);
}

// §2.3: tensors packed in id order; boundary k is the row/block boundary nearest k*size/dp (ties to
// the lower one).
Expected<GlobalLayout> build_for_row_atomic_unpadding(std::span<const Shape> shapes,
                                                      std::int64_t dp_size,
                                                      std::int64_t block_size = 1);
template <ShapeVectorRvalue V>
Expected<GlobalLayout> build_for_row_atomic_unpadding(V&& shapes, std::int64_t dp_size,
                                                      std::int64_t block_size = 1) {
  return internal::build_for_row_atomic_unpadding_owned(std::move(shapes), dp_size, block_size);
}

// §2.4: each tensor wholly on its owner; ranks packed in owner order, id order within a rank.
Expected<GlobalLayout> build_for_tensor_atomic(std::span<const Shape> shapes, std::int64_t dp_size,
                                               std::span<const std::int64_t> tensor_owners);
template <ShapeVectorRvalue V>
Expected<GlobalLayout> build_for_tensor_atomic(V&& shapes, std::int64_t dp_size,
                                               std::span<const std::int64_t> tensor_owners) {
  return internal::build_for_tensor_atomic_owned(std::move(shapes), dp_size, tensor_owners);
}

// The row/block alignment of each tensor: block_size * row_size (reference
// _row_atomic_alignments). Errors for 0-D shapes and on overflow.
Expected<std::vector<std::int64_t>> row_atomic_alignments(std::span<const Shape> shapes,
                                                          std::int64_t block_size);

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// GlobalLayout: where each tensor of a DBuffer group lives in the flat global buffer and where each
// of the dp rank segments starts (Megatron-FSDP v2 layout.py, fsdp-behaviour.md §1.2). Immutable; built
// only through GlobalLayout::make, which enforces the construction invariants.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/base/expected.h"
#include "core/layout/shape.h"

namespace fsdp {

class GlobalLayout;

namespace internal {
// The builders' fast path to GlobalLayout::make, with the same checks and result. start_order is a
// hint: the ids of the non-empty tensors by start. When it describes the layout exactly, the
// overlap check is one pass over it instead of a sort; otherwise make's general check runs.
Expected<GlobalLayout> make_layout_with_start_order(std::vector<Shape> tensor_shapes,
                                                    std::vector<std::int64_t> tensor_to_offset,
                                                    std::int64_t size,
                                                    std::vector<std::int64_t> rank_to_offset,
                                                    std::span<const std::uint32_t> start_order);
}  // namespace internal

// A half-open element range [start, start + numel).
struct Range {
  std::int64_t start = 0;
  std::int64_t numel = 0;
  std::int64_t end() const { return start + numel; }
  friend bool operator==(const Range&, const Range&) = default;
};

class GlobalLayout {
 public:
  // Enforces the §1.2 invariants: size >= 0; one offset per shape; rank_to_offset non-empty, starts
  // at 0, non-decreasing, last <= size; every tensor inside [0, size); tensor ranges (sorted by
  // start) do not overlap (zero-numel ranges overlap nothing). Violations are kInvalidArgument
  // errors naming the tensor or rank (the reference raises AssertionError).
  static Expected<GlobalLayout> make(std::vector<Shape> tensor_shapes,
                                     std::vector<std::int64_t> tensor_to_offset, std::int64_t size,
                                     std::vector<std::int64_t> rank_to_offset);

  const std::vector<Shape>& tensor_shapes() const { return tensor_shapes_; }
  const std::vector<std::int64_t>& tensor_to_offset() const { return tensor_to_offset_; }
  std::int64_t size() const { return size_; }
  const std::vector<std::int64_t>& rank_to_offset() const { return rank_to_offset_; }

  std::int64_t num_tensors() const { return static_cast<std::int64_t>(tensor_shapes_.size()); }
  std::int64_t dp_size() const { return static_cast<std::int64_t>(rank_to_offset_.size()); }
  // Length of segment k: ro[k+1] (or size for the last) - ro[k]. FSDP_CHECKs 0 <= k < dp_size.
  std::int64_t rank_size(std::int64_t k) const;
  // Every segment has the same size (true for dp 1).
  bool has_equal_shard_sizes() const;
  // (offset_i, numel_i). FSDP_CHECKs 0 <= i < num_tensors.
  Range get_tensor_range(std::int64_t i) const;

  friend bool operator==(const GlobalLayout&, const GlobalLayout&) = default;

 private:
  friend Expected<GlobalLayout> internal::make_layout_with_start_order(
      std::vector<Shape>, std::vector<std::int64_t>, std::int64_t, std::vector<std::int64_t>,
      std::span<const std::uint32_t>);
  // make's checks; start_order may be null (the general check).
  static Expected<GlobalLayout> make_impl(std::vector<Shape> tensor_shapes,
                                          std::vector<std::int64_t> tensor_to_offset,
                                          std::int64_t size,
                                          std::vector<std::int64_t> rank_to_offset,
                                          const std::span<const std::uint32_t>* start_order);
  static GlobalLayout assemble(std::vector<Shape> tensor_shapes,
                               std::vector<std::int64_t> tensor_to_offset, std::int64_t size,
                               std::vector<std::int64_t> rank_to_offset);

  GlobalLayout() = default;
  std::vector<Shape> tensor_shapes_;
  std::vector<std::int64_t> tensor_to_offset_;
  std::int64_t size_ = 0;
  std::vector<std::int64_t> rank_to_offset_;
};

}  // namespace fsdp

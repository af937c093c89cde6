// SPDX-License-Identifier: Apache-2.0
#include "core/layout/global_layout.h"

#include "core/base/check.h"
#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/layout/internal/huge_page_allocator.h"
#include "core/layout/internal/radix_sort.h"
#include "core/layout/internal/row_alignment.h"

#include <limits>

namespace fsdp {

namespace {

using internal::tensor_name;

Error invalid(std::string message) {
  return Error(ErrorCode::kInvalidArgument, std::move(message));
}

Error overlap_error(const std::vector<Shape>& shapes, const std::vector<std::int64_t>& offsets,
                    std::size_t prev, std::size_t next, std::int64_t prev_end) {
  return invalid(str_cat(tensor_name(static_cast<std::int64_t>(next), shapes[next]), " range [",
                         offsets[next], ", ", offsets[next] + shapes[next].numel(), ") overlaps ",
                         tensor_name(static_cast<std::int64_t>(prev), shapes[prev]), " range [",
                         offsets[prev], ", ", prev_end, "); expected a start >= ", prev_end));
}

}  // namespace

Expected<GlobalLayout> GlobalLayout::make(std::vector<Shape> tensor_shapes,
                                          std::vector<std::int64_t> tensor_to_offset,
                                          std::int64_t size,
                                          std::vector<std::int64_t> rank_to_offset) {
  return make_impl(std::move(tensor_shapes), std::move(tensor_to_offset), size,
                   std::move(rank_to_offset), nullptr);
}

Expected<GlobalLayout> internal::make_layout_with_start_order(
    std::vector<Shape> tensor_shapes, std::vector<std::int64_t> tensor_to_offset, std::int64_t size,
    std::vector<std::int64_t> rank_to_offset, std::span<const std::uint32_t> start_order) {
  return GlobalLayout::make_impl(std::move(tensor_shapes), std::move(tensor_to_offset), size,
                                 std::move(rank_to_offset), &start_order);
}

Expected<GlobalLayout> GlobalLayout::make_impl(std::vector<Shape> tensor_shapes,
                                               std::vector<std::int64_t> tensor_to_offset,
                                               std::int64_t size,
                                               std::vector<std::int64_t> rank_to_offset,
                                               const std::span<const std::uint32_t>* start_order) {
  // Invariant 1: size and one offset per shape.
  if (size < 0) {
    return invalid(str_cat("layout size must be non-negative, got ", size));
  }
  if (tensor_shapes.size() != tensor_to_offset.size()) {
    return invalid(str_cat("layout has ", tensor_shapes.size(), " tensor shapes but ",
                           tensor_to_offset.size(), " tensor offsets; expected one per shape"));
  }
  // Invariant 2: rank offsets.
  if (rank_to_offset.empty()) {
    return invalid("layout rank_to_offset is empty; expected one offset per rank (at least 1)");
  }
  if (rank_to_offset[0] != 0) {
    return invalid(str_cat("rank 0 offset is ", rank_to_offset[0], "; expected 0"));
  }
  for (std::size_t k = 1; k < rank_to_offset.size(); ++k) {
    if (rank_to_offset[k] < rank_to_offset[k - 1]) {
      return invalid(str_cat("rank ", k, " offset ", rank_to_offset[k], " is below rank ", k - 1,
                             " offset ", rank_to_offset[k - 1],
                             "; expected non-decreasing rank offsets"));
    }
  }
  if (rank_to_offset.back() > size) {
    return invalid(str_cat("rank ", rank_to_offset.size() - 1, " offset ", rank_to_offset.back(),
                           " exceeds layout size ", size, "; expected at most ", size));
  }
  // Invariant 3: every tensor inside [0, size).
  const std::size_t n = tensor_shapes.size();
  // An empty order (the builders pass one when ids do not fit 32 bits) gives nothing to check.
  const bool hint_ok = start_order != nullptr && !start_order->empty();
  // For the order check below: each tensor's start and numel side by side, written in this
  // sequential pass, so that a tensor visited in start order costs one random read instead of two
  // (the offsets and the shapes by id), which at a million tensors are cache misses.
  struct Extent {
    std::int64_t start = 0;
    std::int64_t numel = 0;
  };
  internal::HugePageVector<Extent> extent_of;
  if (hint_ok) {
    extent_of.reserve(n);
  }
  std::size_t non_empty = 0;
  for (std::size_t i = 0; i < tensor_shapes.size(); ++i) {
    const std::int64_t numel = tensor_shapes[i].numel();
    non_empty += numel > 0 ? 1 : 0;
    if (hint_ok) {
      extent_of.push_back({tensor_to_offset[i], numel});
    }
    const auto index = static_cast<std::int64_t>(i);
    const std::int64_t start = tensor_to_offset[i];
    if (start < 0) {
      return invalid(str_cat(tensor_name(index, tensor_shapes[i]), " offset is ", start,
                             "; expected a non-negative offset"));
    }
    std::int64_t end = 0;
    if (!checked_add(start, tensor_shapes[i].numel(), &end) || end > size) {
      return invalid(str_cat(tensor_name(index, tensor_shapes[i]), " range [", start, ", ", start,
                             " + ", tensor_shapes[i].numel(), ") exceeds layout size ", size));
    }
  }
  // Invariant 4: non-empty ranges sorted by start are disjoint. Non-empty disjoint ranges have
  // distinct starts, so an order in which each start reaches the previous end is the sorted order,
  // and the check passes exactly when such an order exists. Fast paths first, without sorting:
  // the builder's order (verified to list each non-empty tensor once), then id order.
  if (hint_ok && start_order->size() == non_empty) {
    std::vector<std::uint64_t> seen((n + 63) / 64, 0);
    std::int64_t prev_end = std::numeric_limits<std::int64_t>::min();
    bool fine = true;
    // The reads below are random but independent: prefetch them a few entries ahead, so a large
    // layout costs memory bandwidth rather than one round trip per tensor.
    constexpr std::size_t kAhead = 16;
    const std::span<const std::uint32_t> order = *start_order;
    for (std::size_t j = 0; j < order.size(); ++j) {
      if (j + kAhead < order.size() && order[j + kAhead] < n) {
        __builtin_prefetch(&extent_of[order[j + kAhead]]);
      }
      const std::size_t i = order[j];
      if (i >= n) {
        fine = false;
        break;
      }
      const Extent e = extent_of[i];
      if (e.numel <= 0 || (seen[i / 64] >> (i % 64) & 1U) != 0 || e.start < prev_end) {
        fine = false;
        break;
      }
      seen[i / 64] |= std::uint64_t{1} << (i % 64);
      prev_end = e.start + e.numel;
    }
    if (fine) {
      return assemble(std::move(tensor_shapes), std::move(tensor_to_offset), size,
                      std::move(rank_to_offset));
    }
  }
  {
    // Id order: when the non-empty starts do not decrease with the id, the stable sort below
    // keeps id order, so its adjacent pairs (and its first overlap) are these.
    bool id_sorted = true;
    std::int64_t last_start = std::numeric_limits<std::int64_t>::min();
    for (std::size_t i = 0; i < n; ++i) {
      if (tensor_shapes[i].numel() > 0) {
        if (tensor_to_offset[i] < last_start) {
          id_sorted = false;
          break;
        }
        last_start = tensor_to_offset[i];
      }
    }
    if (id_sorted) {
      std::size_t prev = n;
      for (std::size_t next = 0; next < n; ++next) {
        if (tensor_shapes[next].numel() <= 0) {
          continue;
        }
        if (prev != n) {
          const std::int64_t prev_end = tensor_to_offset[prev] + tensor_shapes[prev].numel();
          if (tensor_to_offset[next] < prev_end) {
            return overlap_error(tensor_shapes, tensor_to_offset, prev, next, prev_end);
          }
        }
        prev = next;
      }
      return assemble(std::move(tensor_shapes), std::move(tensor_to_offset), size,
                      std::move(rank_to_offset));
    }
  }
  std::vector<internal::KeyIndex> starts;
  starts.reserve(tensor_shapes.size());
  std::vector<std::int64_t> numel_of(tensor_shapes.size());  // compact for the random reads below
  bool sorted = true;
  for (std::size_t i = 0; i < tensor_shapes.size(); ++i) {
    numel_of[i] = tensor_shapes[i].numel();
    if (numel_of[i] > 0) {
      const auto key = static_cast<std::uint64_t>(tensor_to_offset[i]);
      sorted = sorted && (starts.empty() || starts.back().key <= key);
      starts.push_back({key, i});
    }
  }
  if (!sorted) {
    internal::stable_radix_sort(starts);
  }
  for (std::size_t j = 1; j < starts.size(); ++j) {
    const auto prev = static_cast<std::size_t>(starts[j - 1].index);
    const auto next = static_cast<std::size_t>(starts[j].index);
    const std::int64_t prev_end = tensor_to_offset[prev] + numel_of[prev];
    if (static_cast<std::int64_t>(starts[j].key) < prev_end) {
      return overlap_error(tensor_shapes, tensor_to_offset, prev, next, prev_end);
    }
  }
  return assemble(std::move(tensor_shapes), std::move(tensor_to_offset), size,
                  std::move(rank_to_offset));
}

GlobalLayout GlobalLayout::assemble(std::vector<Shape> tensor_shapes,
                                    std::vector<std::int64_t> tensor_to_offset, std::int64_t size,
                                    std::vector<std::int64_t> rank_to_offset) {
  GlobalLayout layout;
  layout.tensor_shapes_ = std::move(tensor_shapes);
  layout.tensor_to_offset_ = std::move(tensor_to_offset);
  layout.size_ = size;
  layout.rank_to_offset_ = std::move(rank_to_offset);
  return layout;
}

std::int64_t GlobalLayout::rank_size(std::int64_t k) const {
  FSDP_CHECK(k >= 0 && k < dp_size()) << "rank " << k << " outside [0, " << dp_size() << ")";
  const auto uk = static_cast<std::size_t>(k);
  const std::int64_t end = uk + 1 < rank_to_offset_.size() ? rank_to_offset_[uk + 1] : size_;
  return end - rank_to_offset_[uk];
}

bool GlobalLayout::has_equal_shard_sizes() const {
  const std::int64_t first = rank_size(0);
  for (std::int64_t k = 1; k < dp_size(); ++k) {
    if (rank_size(k) != first) {
      return false;
    }
  }
  return true;
}

Range GlobalLayout::get_tensor_range(std::int64_t i) const {
  FSDP_CHECK(i >= 0 && i < num_tensors())
      << "tensor " << i << " outside [0, " << num_tensors() << ")";
  const auto ui = static_cast<std::size_t>(i);
  return Range{tensor_to_offset_[ui], tensor_shapes_[ui].numel()};
}

}  // namespace fsdp

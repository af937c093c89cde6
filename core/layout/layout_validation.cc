// SPDX-License-Identifier: Apache-2.0
#include "core/layout/layout_validation.h"

#include "core/base/strings.h"
#include "core/layout/internal/row_alignment.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace fsdp {

namespace {

using internal::tensor_name;

Status check_block_size(std::int64_t block_size) {
  if (block_size <= 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("block size must be positive, got ", block_size));
  }
  return ok_status();
}

// Per-tensor shape checks (§1.3 step 3 without the offset rule). Afterwards every alignment is
// block_size * row_size without overflow, so none is stored.
Status check_shapes(const GlobalLayout& layout, std::int64_t block_size) {
  for (std::int64_t i = 0; i < layout.num_tensors(); ++i) {
    const Shape& shape = layout.tensor_shapes()[static_cast<std::size_t>(i)];
    if (internal::simple_row_alignment(shape, block_size) == 0) {
      FSDP_TRY(const std::int64_t a, internal::checked_row_alignment(i, shape, block_size));
      static_cast<void>(a);
    }
  }
  return ok_status();
}

}  // namespace

Status validate_for_row_atomic(const GlobalLayout& layout, std::int64_t block_size) {
  // 1. block size.
  FSDP_RETURN_IF_ERROR(check_block_size(block_size));
  // 2. equal segments.
  const std::int64_t first_size = layout.rank_size(0);
  for (std::int64_t k = 1; k < layout.dp_size(); ++k) {
    if (layout.rank_size(k) != first_size) {
      return Error(
          ErrorCode::kInvalidArgument,
          str_cat("unequal rank segment sizes are incompatible with RowAtomic/BlockAtomic: "
                  "rank ",
                  k, " has ", layout.rank_size(k), " elements; expected ", first_size,
                  " as rank 0"));
    }
  }
  // 3. per tensor: shape, then offset alignment.
  const auto& shapes = layout.tensor_shapes();
  internal::ChunkAccumulator chunk_of;
  for (std::int64_t i = 0; i < layout.num_tensors(); ++i) {
    const auto ui = static_cast<std::size_t>(i);
    std::int64_t a = internal::simple_row_alignment(shapes[ui], block_size);
    if (a == 0) {
      FSDP_TRY(a, internal::checked_row_alignment(i, shapes[ui], block_size));
    }
    const std::int64_t offset = layout.tensor_to_offset()[ui];
    if (offset % a != 0) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(tensor_name(i, shapes[ui]), " offset ", offset,
                           " is incompatible with alignment ", a, ": expected a multiple of ", a,
                           ", got remainder ", offset % a));
    }
    chunk_of.add(i, shapes[ui], a);
  }
  // 4. rank offsets on chunk multiples.
  FSDP_TRY(const std::int64_t chunk, chunk_of.result());
  for (std::int64_t k = 0; k < layout.dp_size(); ++k) {
    const std::int64_t ro = layout.rank_to_offset()[static_cast<std::size_t>(k)];
    if (ro % chunk != 0) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("rank ", k, " offset ", ro, " is incompatible with chunk size ", chunk,
                           ": expected a multiple of ", chunk, ", got remainder ", ro % chunk));
    }
  }
  return ok_status();
}

Status validate_for_row_atomic_unpadded(const GlobalLayout& layout, std::int64_t block_size) {
  FSDP_RETURN_IF_ERROR(check_block_size(block_size));
  FSDP_RETURN_IF_ERROR(check_shapes(layout, block_size));
  const auto& shapes = layout.tensor_shapes();
  // GlobalLayout::make guarantees disjoint non-empty ranges inside [0, size), so the numels sum to
  // at most size (no overflow) and reach it exactly when there are no gaps.
  std::int64_t data = 0;
  for (const Shape& s : layout.tensor_shapes()) {
    data += s.numel();
  }
  if (data != layout.size()) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("unpadded layout has gaps or padding: size is ", layout.size(),
                         "; expected the sum of tensor numels ", data));
  }
  // Boundaries (non-decreasing) against non-empty tensors sorted by start: one merge pass.
  // Non-empty ranges are disjoint, so their starts are distinct and the sorted order is unique;
  // the packed builder's offsets already increase with the id, so sort only when they do not.
  const auto& offsets = layout.tensor_to_offset();
  const std::size_t n = shapes.size();
  bool id_sorted = true;
  {
    std::int64_t last = std::numeric_limits<std::int64_t>::min();
    for (std::size_t i = 0; i < n && id_sorted; ++i) {
      if (shapes[i].numel() > 0) {
        id_sorted = offsets[i] >= last;
        last = offsets[i];
      }
    }
  }
  std::vector<std::size_t> order;
  if (!id_sorted) {
    order.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (shapes[i].numel() > 0) {
        order.push_back(i);
      }
    }
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return offsets[a] < offsets[b]; });
  }
  // Position t of the sorted order: order[t], or (id order) the t-th id, skipping empty tensors.
  std::size_t t = 0;
  const std::size_t end = id_sorted ? n : order.size();
  const auto id_at = [&](std::size_t pos) { return id_sorted ? pos : order[pos]; };
  const auto skip_empty = [&] {
    while (id_sorted && t < end && shapes[t].numel() <= 0) {
      ++t;
    }
  };
  skip_empty();
  for (std::int64_t k = 1; k < layout.dp_size(); ++k) {
    const std::int64_t b = layout.rank_to_offset()[static_cast<std::size_t>(k)];
    while (t < end && offsets[id_at(t)] + shapes[id_at(t)].numel() <= b) {
      ++t;
      skip_empty();
    }
    if (t == end) {
      break;
    }
    const std::size_t i = id_at(t);
    const std::int64_t start = offsets[i];
    const std::int64_t alignment = block_size * shapes[i].row_size();
    if (start < b && (b - start) % alignment != 0) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("rank ", k, " boundary ", b, " splits a row/block of ",
                           tensor_name(static_cast<std::int64_t>(i), shapes[i]), " at offset ",
                           start, ": expected (boundary - offset) to be a multiple of ",
                           alignment, ", got ", b - start));
    }
  }
  return ok_status();
}

Status validate_for_tensor_atomic(const GlobalLayout& layout) {
  const auto& ro = layout.rank_to_offset();
  for (std::int64_t i = 0; i < layout.num_tensors(); ++i) {
    const Range r = layout.get_tensor_range(i);
    if (r.numel == 0) {
      continue;
    }
    // Last rank whose offset is <= start (with repeated offsets, the last of the equal ranks).
    const auto it = std::upper_bound(ro.begin(), ro.end(), r.start);
    const auto k = static_cast<std::int64_t>(it - ro.begin()) - 1;
    const std::int64_t seg_end = ro[static_cast<std::size_t>(k)] + layout.rank_size(k);
    if (r.end() > seg_end) {
      return Error(
          ErrorCode::kInvalidArgument,
          str_cat(tensor_name(i, layout.tensor_shapes()[static_cast<std::size_t>(i)]), " range [",
                  r.start, ", ", r.end(),
                  ") crosses a rank segment boundary: expected it inside rank ", k, " segment [",
                  ro[static_cast<std::size_t>(k)], ", ", seg_end, "), got end ", r.end()));
    }
  }
  return ok_status();
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
#include "core/layout/layout_validation.h"

#include "core/base/strings.h"
#include "core/layout/internal/row_alignment.h"

#include <algorithm>
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

// Per-tensor shape checks (§1.3 step 3 without the offset rule); returns every alignment.
Expected<std::vector<std::int64_t>> shape_alignments(const GlobalLayout& layout,
                                                     std::int64_t block_size) {
  std::vector<std::int64_t> alignments;
  alignments.reserve(layout.tensor_shapes().size());
  for (std::int64_t i = 0; i < layout.num_tensors(); ++i) {
    FSDP_TRY(const std::int64_t a,
             internal::checked_row_alignment(i, layout.tensor_shapes()[static_cast<std::size_t>(i)],
                                             block_size));
    alignments.push_back(a);
  }
  return alignments;
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
  std::vector<std::int64_t> alignments;
  alignments.reserve(shapes.size());
  for (std::int64_t i = 0; i < layout.num_tensors(); ++i) {
    const auto ui = static_cast<std::size_t>(i);
    FSDP_TRY(const std::int64_t a, internal::checked_row_alignment(i, shapes[ui], block_size));
    const std::int64_t offset = layout.tensor_to_offset()[ui];
    if (offset % a != 0) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(tensor_name(i, shapes[ui]), " offset ", offset,
                           " is incompatible with alignment ", a, ": expected a multiple of ", a,
                           ", got remainder ", offset % a));
    }
    alignments.push_back(a);
  }
  // 4. rank offsets on chunk multiples.
  FSDP_TRY(const std::int64_t chunk, internal::checked_chunk(shapes, alignments));
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
  FSDP_TRY(const std::vector<std::int64_t> alignments, shape_alignments(layout, block_size));
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
  std::vector<std::size_t> order;
  order.reserve(layout.tensor_shapes().size());
  for (std::size_t i = 0; i < layout.tensor_shapes().size(); ++i) {
    if (layout.tensor_shapes()[i].numel() > 0) {
      order.push_back(i);
    }
  }
  const auto& offsets = layout.tensor_to_offset();
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return offsets[a] < offsets[b]; });
  std::size_t t = 0;
  for (std::int64_t k = 1; k < layout.dp_size(); ++k) {
    const std::int64_t b = layout.rank_to_offset()[static_cast<std::size_t>(k)];
    while (t < order.size() && offsets[order[t]] + layout.tensor_shapes()[order[t]].numel() <= b) {
      ++t;
    }
    if (t == order.size()) {
      break;
    }
    const std::size_t i = order[t];
    const std::int64_t start = offsets[i];
    if (start < b && (b - start) % alignments[i] != 0) {
      return Error(
          ErrorCode::kInvalidArgument,
          str_cat("rank ", k, " boundary ", b, " splits a row/block of ",
                  tensor_name(static_cast<std::int64_t>(i), layout.tensor_shapes()[i]),
                  " at offset ", start, ": expected (boundary - offset) to be a multiple of ",
                  alignments[i], ", got ", b - start));
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

// SPDX-License-Identifier: Apache-2.0
#include "core/layout/local_range.h"

#include "core/base/checked_math.h"
#include "core/base/strings.h"

namespace fsdp {

namespace {

Error invalid(std::string message) {
  return Error(ErrorCode::kInvalidArgument, std::move(message));
}

std::string_view placement_name(AxisPlacement p) {
  switch (p) {
    case AxisPlacement::kShard:
      return "shard";
    case AxisPlacement::kReplicate:
      return "replicate";
    case AxisPlacement::kPartial:
      return "partial";
  }
  return "unknown";
}

std::string placements_string(std::span<const AxisPlacement> placements) {
  std::string out = "[";
  for (std::size_t i = 0; i < placements.size(); ++i) {
    if (i > 0) {
      out += ", ";
    }
    out += placement_name(placements[i]);
  }
  out += "]";
  return out;
}

std::string range_string(const Range& r) {
  return str_cat("[", r.start, ", ", r.end(), ")");
}

}  // namespace

Expected<Range> get_local_range(const GlobalLayout& layout, const MeshCoordinate& coord,
                                std::span<const AxisPlacement> placements) {
  const std::size_t ndim = coord.axis_sizes.size();
  if (coord.local_ranks.size() != ndim) {
    return invalid(str_cat("mesh coordinate has ", coord.local_ranks.size(),
                           " local ranks; expected one per mesh axis (", ndim, ")"));
  }
  if (placements.size() != ndim) {
    return invalid(
        str_cat("expected ", ndim, " placements (one per mesh axis), got ", placements.size()));
  }
  for (std::size_t axis = 0; axis < ndim; ++axis) {
    const std::int64_t size = coord.axis_sizes[axis];
    if (size <= 0) {
      return invalid(str_cat("mesh axis ", axis, " size must be positive, got ", size));
    }
    const std::int64_t rank = coord.local_ranks[axis];
    if (rank < 0 || rank >= size) {
      return invalid(
          str_cat("local rank on mesh axis ", axis, " must be in [0, ", size, "), got ", rank));
    }
  }
  // Shard axes must be a suffix so that each local buffer is one contiguous global range.
  for (std::size_t axis = 1; axis < ndim; ++axis) {
    if (placements[axis - 1] == AxisPlacement::kShard &&
        placements[axis] != AxisPlacement::kShard) {
      return invalid(str_cat("shard placements must form a suffix of the mesh axes: axis ",
                             axis - 1, " is shard but axis ", axis, " is ",
                             placement_name(placements[axis]), " in ",
                             placements_string(placements)));
    }
  }
  // The innermost sharded axis is the most significant digit of the segment index.
  std::int64_t idx = 0;
  std::int64_t nshards = 1;
  for (std::size_t i = ndim; i-- > 0;) {
    if (placements[i] != AxisPlacement::kShard) {
      continue;
    }
    if (!checked_mul(nshards, coord.axis_sizes[i], &nshards)) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("number of shards of ", placements_string(placements),
                           " overflows int64 at mesh axis ", i));
    }
    idx = idx * coord.axis_sizes[i] + coord.local_ranks[i];  // < nshards, no overflow
  }
  const std::int64_t dp = layout.dp_size();
  if (dp % nshards != 0) {
    return invalid(str_cat("layout was built for ", dp,
                           " shards, which cannot be split evenly over ", nshards,
                           " mesh shards of ", placements_string(placements)));
  }
  const std::int64_t per = dp / nshards;
  const std::int64_t first = idx * per;
  const std::int64_t last = first + per - 1;
  const std::int64_t start = layout.rank_to_offset()[static_cast<std::size_t>(first)];
  const std::int64_t end =
      layout.rank_to_offset()[static_cast<std::size_t>(last)] + layout.rank_size(last);
  return Range{start, end - start};
}

Status check_view_contained(const GlobalLayout& layout, const MeshCoordinate& coord,
                            std::span<const AxisPlacement> from,
                            std::span<const AxisPlacement> to) {
  FSDP_TRY(const Range current, get_local_range(layout, coord, from));
  FSDP_TRY(const Range wanted, get_local_range(layout, coord, to));
  if (wanted.start < current.start || wanted.end() > current.end()) {
    return invalid(str_cat("view to ", placements_string(to),
                           " requires a range contained in its local buffer: expected a range "
                           "inside ",
                           range_string(current), " (", placements_string(from), "), got ",
                           range_string(wanted)));
  }
  return ok_status();
}

}  // namespace fsdp

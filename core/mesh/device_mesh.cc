// SPDX-License-Identifier: Apache-2.0
#include "core/mesh/device_mesh.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "core/base/check.h"
#include "core/base/checked_math.h"
#include "core/base/strings.h"

namespace fsdp {

namespace {

Error invalid(std::string message) {
  return Error(ErrorCode::kInvalidArgument, std::move(message));
}

bool is_identifier(std::string_view name) {
  if (name.empty()) {
    return false;
  }
  const auto is_alpha = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (!is_alpha(name.front())) {
    return false;
  }
  for (const char c : name) {
    if (!is_alpha(c) && !(c >= '0' && c <= '9')) {
      return false;
    }
  }
  return true;
}

}  // namespace

Expected<DeviceMesh> DeviceMesh::make(std::vector<MeshAxis> axes) {
  if (axes.empty()) {
    return invalid("device mesh must have at least one axis, got 0");
  }
  // Ranks are int32 indices: every rank of the mesh must be representable.
  constexpr std::int64_t kMaxRanks = std::numeric_limits<std::int32_t>::max();
  std::int64_t total = 1;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const MeshAxis& axis = axes[i];
    if (!is_identifier(axis.name)) {
      return invalid(str_cat("mesh axis ", i, " name '", axis.name,
                             "' is not an identifier; expected [A-Za-z_][A-Za-z0-9_]*"));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (axes[j].name == axis.name) {
        return invalid(str_cat("mesh axis name '", axis.name, "' must be unique; axes ", j,
                               " and ", i, " share it"));
      }
    }
    if (axis.size < 1) {
      return invalid(
          str_cat("mesh axis '", axis.name, "' size must be >= 1, got ", axis.size));
    }
    if (!checked_mul(total, axis.size, &total) || total > kMaxRanks) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("device mesh size overflows at axis '", axis.name,
                           "': expected at most ", kMaxRanks, " ranks"));
    }
  }
  DeviceMesh mesh;
  mesh.axes_ = std::move(axes);
  mesh.size_ = total;
  return mesh;
}

std::int64_t DeviceMesh::axis_size(std::int64_t axis) const {
  FSDP_CHECK(axis >= 0 && axis < ndim()) << "mesh axis " << axis << " of " << ndim();
  return axes_[static_cast<std::size_t>(axis)].size;
}

const std::string& DeviceMesh::axis_name(std::int64_t axis) const {
  FSDP_CHECK(axis >= 0 && axis < ndim()) << "mesh axis " << axis << " of " << ndim();
  return axes_[static_cast<std::size_t>(axis)].name;
}

std::optional<std::int64_t> DeviceMesh::axis_index(std::string_view name) const {
  for (std::size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == name) {
      return static_cast<std::int64_t>(i);
    }
  }
  return std::nullopt;
}

Expected<MeshCoordinate> DeviceMesh::coordinate(std::int64_t rank) const {
  if (rank < 0 || rank >= size_) {
    return Error(ErrorCode::kOutOfRange, str_cat("rank ", rank, " is outside mesh ",
                                                 to_string(*this), ": expected [0, ", size_,
                                                 ")"));
  }
  // Filled by push_back (then the local ranks reversed) rather than resize + index: GCC's -O2
  // -Wnull-dereference flags value-initializing the elements of a resized empty vector.
  MeshCoordinate coord;
  coord.axis_sizes.reserve(axes_.size());
  coord.local_ranks.reserve(axes_.size());
  std::int64_t rest = rank;
  for (std::size_t i = axes_.size(); i-- > 0;) {
    coord.local_ranks.push_back(rest % axes_[i].size);
    rest /= axes_[i].size;
  }
  std::reverse(coord.local_ranks.begin(), coord.local_ranks.end());
  for (const MeshAxis& axis : axes_) {
    coord.axis_sizes.push_back(axis.size);
  }
  return coord;
}

Expected<std::int64_t> DeviceMesh::rank_of(std::span<const std::int64_t> local_ranks) const {
  if (local_ranks.size() != axes_.size()) {
    return invalid(str_cat("expected ", axes_.size(), " local ranks (one per axis of mesh ",
                           to_string(*this), "), got ", local_ranks.size()));
  }
  std::int64_t rank = 0;
  for (std::size_t i = 0; i < axes_.size(); ++i) {
    if (local_ranks[i] < 0 || local_ranks[i] >= axes_[i].size) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("local rank on mesh axis '", axes_[i].name, "' must be in [0, ",
                           axes_[i].size, "), got ", local_ranks[i]));
    }
    rank = rank * axes_[i].size + local_ranks[i];  // < size_, which fits int32
  }
  return rank;
}

Expected<DeviceMesh> parse_device_mesh(std::string_view text) {
  std::vector<MeshAxis> axes;
  if (trim(text).empty()) {
    return invalid("device mesh '' is empty; expected name=size[,name=size...]");
  }
  std::string_view rest = text;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return invalid(str_cat("mesh axis '", item, "' in '", text, "' is not name=size"));
    }
    const std::string_view name = trim(item.substr(0, eq));
    const std::string_view size_text = trim(item.substr(eq + 1));
    std::int64_t size = 0;
    const char* end = size_text.data() + size_text.size();
    const auto [ptr, ec] = std::from_chars(size_text.data(), end, size);
    if (size_text.empty() || ec != std::errc() || ptr != end) {
      return invalid(str_cat("mesh axis '", item, "' in '", text,
                             "' has size '", size_text, "'; expected an integer"));
    }
    axes.push_back(MeshAxis{std::string(name), size});
    if (comma == std::string_view::npos) {
      break;
    }
    rest.remove_prefix(comma + 1);
  }
  return DeviceMesh::make(std::move(axes));
}

std::string to_string(const DeviceMesh& mesh) {
  std::string out;
  for (const MeshAxis& axis : mesh.axes()) {
    if (!out.empty()) {
      out += ',';
    }
    out += str_cat(axis.name, "=", axis.size);
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, const DeviceMesh& mesh) { return os << to_string(mesh); }

}  // namespace fsdp

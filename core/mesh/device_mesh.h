// SPDX-License-Identifier: Apache-2.0
// DeviceMesh: a device mesh with named axes (axis 0 outermost, e.g. "dp_outer=4,dp_inner=64" or
// "ep=8,edp=16"). Ranks are numbered row-major, the last axis fastest. Immutable; built only by
// DeviceMesh::make or parse_device_mesh, which guarantee >= 1 axis, unique identifier names,
// sizes >= 1 and a total size that fits an int32 rank index.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/expected.h"
#include "core/layout/local_range.h"

namespace fsdp {

struct MeshAxis {
  std::string name;
  std::int64_t size = 1;
  friend bool operator==(const MeshAxis&, const MeshAxis&) = default;
};

class DeviceMesh {
 public:
  // Errors (kInvalidArgument unless noted): no axes; a name that is empty or not an identifier
  // ([A-Za-z_][A-Za-z0-9_]*, so that names never look like axis indices and to_string parses
  // back); a repeated name; a size < 1; a total size beyond the largest int32 rank, 2^31 - 1
  // (kOutOfRange).
  static Expected<DeviceMesh> make(std::vector<MeshAxis> axes);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  std::int64_t ndim() const { return static_cast<std::int64_t>(axes_.size()); }
  // Number of ranks: the product of the axis sizes.
  std::int64_t size() const { return size_; }
  // FSDP_CHECK 0 <= axis < ndim().
  std::int64_t axis_size(std::int64_t axis) const;
  const std::string& axis_name(std::int64_t axis) const;
  // Index of the axis called `name`, or nullopt.
  std::optional<std::int64_t> axis_index(std::string_view name) const;

  // Row-major coordinate of `rank` (last axis fastest): axis_sizes = the mesh's sizes,
  // local_ranks = the rank's index on each axis. Error (kOutOfRange) for a rank outside [0, size).
  Expected<MeshCoordinate> coordinate(std::int64_t rank) const;
  // Inverse of coordinate(): one local rank per axis, each in [0, axis size) (kOutOfRange
  // otherwise; kInvalidArgument for a wrong count).
  Expected<std::int64_t> rank_of(std::span<const std::int64_t> local_ranks) const;

  friend bool operator==(const DeviceMesh&, const DeviceMesh&) = default;

 private:
  DeviceMesh() = default;
  std::vector<MeshAxis> axes_;
  std::int64_t size_ = 1;
};

// "name=size,name=size"; whitespace around names, sizes and commas is ignored. Errors name the
// offending item ("mesh axis 'dp_inner=x' ...") and then whatever DeviceMesh::make reports.
Expected<DeviceMesh> parse_device_mesh(std::string_view text);

// "dp_outer=4,dp_inner=64": the form parse_device_mesh reads.
std::string to_string(const DeviceMesh& mesh);
std::ostream& operator<<(std::ostream& os, const DeviceMesh& mesh);

}  // namespace fsdp

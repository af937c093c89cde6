// SPDX-License-Identifier: Apache-2.0
#include "core/mesh/placements.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/base/check.h"
#include "core/base/strings.h"
#include "core/mesh/redistribute.h"

namespace fsdp {

namespace {

Error invalid(std::string message) {
  return Error(ErrorCode::kInvalidArgument, std::move(message));
}

constexpr BufferRole kRoles[] = {BufferRole::kParameter, BufferRole::kGradient,
                                 BufferRole::kOptimizer};

std::string axes_string(const std::vector<DpAxisRef>& axes) {
  std::string out = "[";
  for (std::size_t i = 0; i < axes.size(); ++i) {
    out += (i > 0 ? ", " : "") + to_string(axes[i]);
  }
  return out + "]";
}

std::string indices_string(const std::vector<std::int64_t>& axes) {
  return str_cat("[", join(axes, ", "), "]");
}

// "dp axis 1 (dp_inner)"
std::string dp_axis_label(const DeviceMesh& mesh, const std::vector<std::int64_t>& dp_axes,
                          std::size_t i) {
  return str_cat("dp axis ", i, " (", mesh.axis_name(dp_axes[i]), ")");
}

// _validate_dp_axes: resolve, then distinct, then ascending, then exactly every mesh axis.
Expected<std::vector<std::int64_t>> resolve_dp_axes(const DeviceMesh& mesh,
                                                     const std::vector<DpAxisRef>& dp_axes) {
  if (dp_axes.empty()) {
    return invalid(str_cat("dp axes must name at least one axis of mesh ", to_string(mesh),
                           ", got none"));
  }
  const std::int64_t ndim = mesh.ndim();
  std::vector<std::int64_t> resolved;
  for (const DpAxisRef& ref : dp_axes) {
    if (const auto* index = std::get_if<std::int64_t>(&ref)) {
      if (*index < -ndim || *index >= ndim) {
        return Error(ErrorCode::kOutOfRange,
                     str_cat("dp axis ", *index, " is out of range for the ", ndim,
                             "-axis mesh ", to_string(mesh), ": expected a value in [", -ndim,
                             ", ", ndim, ")"));
      }
      resolved.push_back(*index < 0 ? *index + ndim : *index);
    } else {
      const std::string& name = std::get<std::string>(ref);
      const std::optional<std::int64_t> found = mesh.axis_index(name);
      if (!found) {
        std::vector<std::string> names;
        for (const MeshAxis& axis : mesh.axes()) {
          names.push_back(axis.name);
        }
        return invalid(str_cat("dp axis '", name, "' is not an axis of mesh ", to_string(mesh),
                               ": expected one of ", join(names, ", ")));
      }
      resolved.push_back(*found);
    }
  }
  for (std::size_t i = 0; i < resolved.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (resolved[i] == resolved[j]) {
        return invalid(str_cat("dp axes must be distinct: mesh axis ", resolved[i], " (",
                               mesh.axis_name(resolved[i]), ") appears at positions ", j,
                               " and ", i, " of ", axes_string(dp_axes)));
      }
    }
  }
  for (std::size_t i = 1; i < resolved.size(); ++i) {
    if (resolved[i] < resolved[i - 1]) {
      return invalid(str_cat("dp axes must follow mesh-axis order: expected ascending axis "
                             "indices, got ",
                             indices_string(resolved), " from ", axes_string(dp_axes)));
    }
  }
  // The axes left out of the DP mesh must be the tensor-parallel axis (its ranks hold different
  // slices of the model, not replicas) or the expert-parallel one (left out by the placements
  // of the routed experts, which it splits; the dense parameters' placements keep it, which
  // FsdpConfig checks). docs/design/parallelism.md.
  for (std::int64_t a = 0; a < ndim; ++a) {
    const bool in_dp = std::find(resolved.begin(), resolved.end(), a) != resolved.end();
    if (in_dp && mesh.axis_name(a) == kTensorParallelAxis) {
      return invalid(str_cat("dp axes ", axes_string(dp_axes), " on mesh ", to_string(mesh),
                             " include mesh axis ", a, " (", kTensorParallelAxis,
                             "), the tensor-parallel axis: expected its ranks to hold slices "
                             "of one replica, never a dp axis"));
    }
    if (!in_dp && mesh.axis_name(a) != kTensorParallelAxis &&
        mesh.axis_name(a) != kExpertParallelAxis) {
      return Error(ErrorCode::kFailedPrecondition,
                   str_cat("dp axes ", axes_string(dp_axes), " on mesh ", to_string(mesh),
                           " leave out mesh axis ", a, " (", mesh.axis_name(a),
                           "), which is not implemented: expected every mesh axis but '",
                           kTensorParallelAxis, "' and '", kExpertParallelAxis,
                           "' among the dp axes, got ", indices_string(resolved)));
    }
  }
  return resolved;
}

// §3.2 per-DBuffer validity plus the project's no-Partial rule for weights.
Status check_list(const DeviceMesh& mesh, const std::vector<std::int64_t>& dp_axes,
                  BufferRole role, const std::vector<Placement>& list) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (role != BufferRole::kGradient && list[i].is_partial()) {
      return invalid(str_cat(to_string(role), " placement on ",
                             dp_axis_label(mesh, dp_axes, i),
                             " must be Shard or Replicate, got ", to_string(list[i])));
    }
    if (i > 0 && list[i - 1].is_shard() && !list[i].is_shard()) {
      return invalid(str_cat(to_string(role), " placements ", to_string(list),
                             " must have their Shard axes as a suffix: ",
                             dp_axis_label(mesh, dp_axes, i - 1), " is ",
                             to_string(list[i - 1]), " but ", dp_axis_label(mesh, dp_axes, i),
                             " is ", to_string(list[i])));
    }
    if (list[i].kind() == PlacementKind::kTensorAtomic && list.size() > 1) {
      return Error(ErrorCode::kFailedPrecondition,
                   str_cat(to_string(role), " placement TensorAtomic() on a ", list.size(),
                           "-axis dp mesh is not implemented: expected a 1-D dp mesh"));
    }
  }
  return ok_status();
}

bool shard_kinds_compatible(const Placement& a, const Placement& b) {
  if (a == b) {
    return true;
  }
  const bool a_ta = a.kind() == PlacementKind::kTensorAtomic;
  const bool b_ta = b.kind() == PlacementKind::kTensorAtomic;
  if (a_ta || b_ta) {
    return false;
  }
  return a.kind() == PlacementKind::kShard || b.kind() == PlacementKind::kShard;
}

// The one Shard kind the lists agree on after check 4: the first non-Shard(0) kind, else
// Shard(0) (nullopt when nothing is sharded).
std::optional<Placement> dominant_shard(const Placements& p) {
  std::optional<Placement> found;
  for (const BufferRole role : kRoles) {
    for (const Placement& x : p.of(role)) {
      if (x.is_shard() && (!found || found->kind() == PlacementKind::kShard)) {
        found = x;
      }
    }
  }
  return found;
}

std::vector<Placement> canonical(const std::vector<Placement>& list,
                                 const std::optional<Placement>& shard) {
  std::vector<Placement> out = list;
  for (Placement& x : out) {
    if (shard && x.kind() == PlacementKind::kShard) {
      x = *shard;
    }
  }
  return out;
}

Status check_redistribute(std::string_view what, const std::vector<Placement>& from,
                          const std::vector<Placement>& to) {
  auto steps = plan_redistribute(from, to);
  if (!steps) {
    return Error(steps.error().code(), str_cat(what, ": ", steps.error().message()));
  }
  return ok_status();
}

}  // namespace

std::string to_string(const DpAxisRef& axis) {
  if (const auto* index = std::get_if<std::int64_t>(&axis)) {
    return str_cat(*index);
  }
  return std::get<std::string>(axis);
}

std::string_view to_string(BufferRole role) {
  switch (role) {
    case BufferRole::kParameter:
      return "parameter";
    case BufferRole::kGradient:
      return "gradient";
    case BufferRole::kOptimizer:
      return "optimizer";
  }
  return "unknown";
}

Expected<Placements> Placements::make(const DeviceMesh& mesh, std::vector<DpAxisRef> dp_axes,
                                      std::vector<Placement> parameter,
                                      std::vector<Placement> gradient,
                                      std::vector<Placement> optimizer) {
  // 1. Lengths, as Placements.__post_init__ does before any mesh is seen.
  const std::pair<BufferRole, const std::vector<Placement>*> lists[] = {
      {BufferRole::kParameter, &parameter},
      {BufferRole::kGradient, &gradient},
      {BufferRole::kOptimizer, &optimizer}};
  for (const auto& [role, list] : lists) {
    if (list->size() != dp_axes.size()) {
      return invalid(str_cat("expected ", dp_axes.size(), " ", to_string(role),
                             " placements (one per dp axis), got ", list->size(), ": ",
                             to_string(*list)));
    }
  }
  // 2. dp_axes.
  FSDP_TRY(std::vector<std::int64_t> resolved, resolve_dp_axes(mesh, dp_axes));
  // 3. Each list on its own.
  for (const auto& [role, list] : lists) {
    FSDP_RETURN_IF_ERROR(check_list(mesh, resolved, role, *list));
  }
  // 4. Shard kinds across the lists: every pair of Shard placements must be compatible.
  std::vector<std::pair<BufferRole, Placement>> shards;
  for (const auto& [role, list] : lists) {
    for (const Placement& x : *list) {
      if (!x.is_shard()) {
        continue;
      }
      for (const auto& [earlier_role, earlier] : shards) {
        if (!shard_kinds_compatible(earlier, x)) {
          return invalid(str_cat(to_string(earlier), " in the ", to_string(earlier_role),
                                 " placements cannot be mixed with ", to_string(x), " in the ",
                                 to_string(role),
                                 " placements: expected one Shard kind across parameter, "
                                 "gradient and optimizer"));
        }
      }
      shards.emplace_back(role, x);
    }
  }

  Placements out(mesh);
  out.dp_axes_ = std::move(resolved);
  for (const std::int64_t axis : out.dp_axes_) {
    out.dp_size_ *= mesh.axis_size(axis);  // <= mesh.size(), no overflow
  }
  out.parameter_ = std::move(parameter);
  out.gradient_ = std::move(gradient);
  out.optimizer_ = std::move(optimizer);

  // 5. Optimizer range inside the parameter range (the DBuffer.view() rule).
  for (std::size_t i = 0; i < out.dp_axes_.size(); ++i) {
    if (out.parameter_[i].is_shard() && !out.optimizer_[i].is_shard() &&
        mesh.axis_size(out.dp_axes_[i]) > 1) {
      return invalid(str_cat(
          "optimizer placements ", to_string(out.optimizer_), " need a local range contained in "
          "that of parameter placements ", to_string(out.parameter_),
          " (DBuffer.view() requires a range contained in its local buffer): expected ",
          dp_axis_label(mesh, out.dp_axes_, i), " sharded for the optimizer, got ",
          to_string(out.optimizer_[i])));
    }
  }

  // 6. Every redistribute the runtime performs must be a supported one.
  const std::optional<Placement> shard = dominant_shard(out);
  const std::vector<Placement> param = canonical(out.parameter_, shard);
  const std::vector<Placement> grad = canonical(out.gradient_, shard);
  const std::vector<Placement> opt = canonical(out.optimizer_, shard);
  const std::int64_t n = out.num_dp_axes();
  FSDP_RETURN_IF_ERROR(check_redistribute("gradient reduction (partial-grad buffer to gradient "
                                          "placements)",
                                          all_partial(n, ReduceOp::kAvg), grad));
  FSDP_RETURN_IF_ERROR(check_redistribute("gradient finalisation (gradient to optimizer "
                                          "placements)",
                                          grad, opt));
  FSDP_RETURN_IF_ERROR(check_redistribute("post-step weight sync (optimizer to parameter "
                                          "placements)",
                                          opt, param));
  FSDP_RETURN_IF_ERROR(check_redistribute("unshard (parameter placements to replicate)", param,
                                          all_replicate(n)));
  return out;
}

const std::vector<Placement>& Placements::of(BufferRole role) const {
  switch (role) {
    case BufferRole::kParameter:
      return parameter_;
    case BufferRole::kGradient:
      return gradient_;
    case BufferRole::kOptimizer:
      return optimizer_;
  }
  FSDP_CHECK(false) << "unknown buffer role";
  return parameter_;
}

std::vector<AxisPlacement> Placements::axis_placements(BufferRole role) const {
  std::vector<AxisPlacement> out;
  for (const Placement& p : of(role)) {
    out.push_back(p.axis_placement());
  }
  return out;
}

bool Placements::is_tensor_atomic() const {
  for (const BufferRole role : kRoles) {
    for (const Placement& p : of(role)) {
      if (p.kind() == PlacementKind::kTensorAtomic) {
        return true;
      }
    }
  }
  return false;
}

bool Placements::is_replicated(BufferRole role) const {
  for (const Placement& p : of(role)) {
    if (!p.is_replicate()) {
      return false;
    }
  }
  return true;
}

std::int64_t Placements::num_shards(BufferRole role) const {
  std::int64_t n = 1;
  const std::vector<Placement>& list = of(role);
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i].is_shard()) {
      n *= mesh_.axis_size(dp_axes_[i]);
    }
  }
  return n;
}

Expected<MeshCoordinate> Placements::dp_coordinate(std::int64_t rank) const {
  FSDP_TRY(const MeshCoordinate full, mesh_.coordinate(rank));
  MeshCoordinate out;
  for (const std::int64_t axis : dp_axes_) {
    out.axis_sizes.push_back(full.axis_sizes[static_cast<std::size_t>(axis)]);
    out.local_ranks.push_back(full.local_ranks[static_cast<std::size_t>(axis)]);
  }
  return out;
}

Expected<Range> Placements::local_range(BufferRole role, const GlobalLayout& layout,
                                        std::int64_t rank) const {
  FSDP_TRY(const MeshCoordinate coord, dp_coordinate(rank));
  const std::vector<AxisPlacement> axes = axis_placements(role);
  return get_local_range(layout, coord, axes);
}

Expected<Placements> Placements::without_dp_axis(std::int64_t mesh_axis) const {
  const auto it = std::find(dp_axes_.begin(), dp_axes_.end(), mesh_axis);
  if (it == dp_axes_.end() || dp_axes_.size() == 1) {
    return invalid(str_cat("placements ", to_string(*this), " cannot drop mesh axis ", mesh_axis,
                           ": expected one of several dp axes"));
  }
  const auto k = static_cast<std::size_t>(it - dp_axes_.begin());
  std::vector<DpAxisRef> axes;
  std::vector<Placement> lists[3];
  for (std::size_t i = 0; i < dp_axes_.size(); ++i) {
    if (i == k) {
      continue;
    }
    axes.emplace_back(dp_axes_[i]);
    lists[0].push_back(parameter_[i]);
    lists[1].push_back(gradient_[i]);
    lists[2].push_back(optimizer_[i]);
  }
  return make(mesh_, std::move(axes), std::move(lists[0]), std::move(lists[1]),
              std::move(lists[2]));
}

Expected<Placements> Placements::specialize(DType group_dtype) const {
  std::vector<DpAxisRef> axes(dp_axes_.begin(), dp_axes_.end());
  std::vector<Placement> lists[3] = {parameter_, gradient_, optimizer_};
  for (std::vector<Placement>& list : lists) {
    for (Placement& p : list) {
      p = specialize_placement(p, group_dtype);
    }
  }
  auto out = make(mesh_, std::move(axes), std::move(lists[0]), std::move(lists[1]),
                  std::move(lists[2]));
  if (!out) {
    return Error(out.error().code(), str_cat("placements for dtype ", to_string(group_dtype),
                                             ": ", out.error().message()));
  }
  return out;
}

Status Placements::check_layout(const GlobalLayout& layout, ShardLayout shard_layout) const {
  std::vector<Placement> seen;
  for (const BufferRole role : kRoles) {
    for (const Placement& p : of(role)) {
      if (!p.is_shard() || std::find(seen.begin(), seen.end(), p) != seen.end()) {
        continue;
      }
      seen.push_back(p);
      Status s = check_layout_for_placement(layout, p, shard_layout);
      if (!s) {
        return Error(s.error().code(), str_cat("layout for ", to_string(role), " placement ",
                                               to_string(p), ": ", s.error().message()));
      }
    }
  }
  return ok_status();
}

std::vector<Placement> all_partial(std::int64_t n, ReduceOp op) {
  return std::vector<Placement>(static_cast<std::size_t>(n), Placement::partial(op));
}

std::vector<Placement> all_replicate(std::int64_t n) {
  return std::vector<Placement>(static_cast<std::size_t>(n), Placement::replicate());
}

std::string to_string(const Placements& p) {
  std::vector<DpAxisRef> names;
  for (const std::int64_t axis : p.dp_axes()) {
    names.emplace_back(p.mesh().axis_name(axis));
  }
  return str_cat("dp_axes=", axes_string(names), " parameter=", to_string(p.parameter()),
                 " gradient=", to_string(p.gradient()), " optimizer=", to_string(p.optimizer()));
}

std::ostream& operator<<(std::ostream& os, const Placements& p) { return os << to_string(p); }

}  // namespace fsdp

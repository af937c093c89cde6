// SPDX-License-Identifier: Apache-2.0
#include "core/schedule/group_geometry.h"

#include "core/base/strings.h"
#include "core/layout/local_range.h"

namespace fsdp {
namespace {

std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

std::string where(const GroupGeometry& g) { return str_cat("unit ", g.unit, " group ", g.group); }

// The ranks of the members of `rank`'s group on `mesh_axis`, in axis order.
Expected<std::vector<std::int64_t>> member_ranks(const DeviceMesh& mesh, std::int32_t mesh_axis,
                                                 std::int64_t rank) {
  FSDP_TRY(MeshCoordinate coord, mesh.coordinate(rank));
  std::vector<std::int64_t> ranks;
  ranks.reserve(idx(mesh.axis_size(mesh_axis)));
  for (std::int64_t k = 0; k < mesh.axis_size(mesh_axis); ++k) {
    coord.local_ranks[idx(mesh_axis)] = k;
    FSDP_TRY(std::int64_t r, mesh.rank_of(coord.local_ranks));
    ranks.push_back(r);
  }
  return ranks;
}

// counts[k] = numel of member k's range under `ps`; the ranges must tile `whole` in order.
Status tile(const GroupGeometry& g, std::span<const Placement> ps,
            const std::vector<std::int64_t>& members, Range whole,
            std::vector<std::int64_t>* counts) {
  std::int64_t next = whole.start;
  for (std::int64_t m : members) {
    FSDP_TRY(Range r, group_local_range(g, ps, m));
    if (r.start != next) {
      return Error(ErrorCode::kFailedPrecondition,
                   str_cat(where(g), ": rank ", m, "'s range starts at ", r.start, "; expected ",
                           next, " (ranges must tile the collective's buffer in axis order)"));
    }
    counts->push_back(r.numel);
    next = r.end();
  }
  if (next != whole.end()) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat(where(g), ": members' ranges end at ", next, "; expected ", whole.end()));
  }
  return ok_status();
}

Expected<CollectiveGeometry> step_geometry(const GroupGeometry& g, OpKind kind,
                                           const std::vector<Placement>& before,
                                           const std::vector<Placement>& after,
                                           std::int32_t mesh_axis, const DeviceMesh& mesh,
                                           std::int64_t rank) {
  if (mesh_axis < 0 || mesh_axis >= mesh.ndim()) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat(where(g), ": mesh axis ", mesh_axis, " is outside the mesh ",
                         to_string(mesh)));
  }
  CollectiveGeometry cg;
  cg.kind = kind;
  cg.mesh_axis = mesh_axis;
  FSDP_TRY(MeshCoordinate coord, mesh.coordinate(rank));
  cg.axis_rank = coord.local_ranks[idx(mesh_axis)];
  FSDP_TRY(cg.in, group_local_range(g, before, rank));
  FSDP_TRY(cg.out, group_local_range(g, after, rank));
  switch (kind) {
    case OpKind::kAllGather: {
      FSDP_TRY(std::vector<std::int64_t> members, member_ranks(mesh, mesh_axis, rank));
      FSDP_RETURN_IF_ERROR(tile(g, before, members, cg.out, &cg.counts));
      break;
    }
    case OpKind::kReduceScatter: {
      FSDP_TRY(std::vector<std::int64_t> members, member_ranks(mesh, mesh_axis, rank));
      FSDP_RETURN_IF_ERROR(tile(g, after, members, cg.in, &cg.counts));
      break;
    }
    case OpKind::kAllReduce:
      cg.counts = {cg.in.numel};
      break;
    default:
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(where(g), ": ", to_string(kind), " is not a collective"));
  }
  return cg;
}

}  // namespace

OpKind collective_kind(RedistributeKind k) {
  switch (k) {
    case RedistributeKind::kAllGather:
      return OpKind::kAllGather;
    case RedistributeKind::kReduceScatter:
      return OpKind::kReduceScatter;
    case RedistributeKind::kAllReduce:
      return OpKind::kAllReduce;
    case RedistributeKind::kView:
    case RedistributeKind::kRelabel:
      break;
  }
  return OpKind::kRecord;  // no communication
}

std::vector<Placement> GroupGeometry::leg_source(CollectiveLeg l) const {
  switch (l) {
    case CollectiveLeg::kUnshard:
      return placements.parameter();
    case CollectiveLeg::kModelWeightSync:
      return placements.optimizer();
    case CollectiveLeg::kGradReduce:
      return all_partial(placements.num_dp_axes(), ReduceOp::kAvg);
    case CollectiveLeg::kGradFinalize:
      return placements.gradient();
  }
  return {};
}

std::vector<Placement> GroupGeometry::leg_target(CollectiveLeg l) const {
  switch (l) {
    case CollectiveLeg::kUnshard:
      return all_replicate(placements.num_dp_axes());
    case CollectiveLeg::kModelWeightSync:
      return placements.parameter();
    case CollectiveLeg::kGradReduce:
      return placements.gradient();
    case CollectiveLeg::kGradFinalize:
      return placements.optimizer();
  }
  return {};
}

Expected<Range> group_local_range(const GroupGeometry& group,
                                  std::span<const Placement> placements, std::int64_t rank) {
  FSDP_TRY(MeshCoordinate coord, group.placements.dp_coordinate(rank));
  std::vector<AxisPlacement> aps;
  aps.reserve(placements.size());
  for (const Placement& p : placements) {
    aps.push_back(p.axis_placement());
  }
  return get_local_range(group.layout, coord, aps);
}

Expected<Range> extent_range(const GroupGeometry& group, Extent extent, std::int64_t rank) {
  switch (extent) {
    case Extent::kFull:
      return Range{0, group.layout.size()};
    case Extent::kParameter:
      return group_local_range(group, group.placements.parameter(), rank);
    case Extent::kGradient:
      return group_local_range(group, group.placements.gradient(), rank);
    case Extent::kOptimizer:
      return group_local_range(group, group.placements.optimizer(), rank);
    case Extent::kNone:
      break;
  }
  return Error(ErrorCode::kInvalidArgument,
               str_cat(where(group), ": a buffer of extent ", to_string(extent),
                       " holds no layout range"));
}

std::vector<Placement> state_after_step(const RedistributeLeg& leg, std::size_t s,
                                        std::span<const Placement> target) {
  std::vector<Placement> after = leg.states[s];
  const auto axis = static_cast<std::size_t>(leg.steps[s].axis);
  after[axis] = target[axis];
  return after;
}

Expected<CollectiveGeometry> collective_geometry(const GroupGeometry& group, CollectiveLeg leg,
                                                 std::size_t step, const DeviceMesh& mesh,
                                                 std::int64_t rank) {
  const RedistributeLeg& l = group.leg(leg);
  if (step >= l.steps.size()) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat(where(group), ": ", to_string(leg), " has ", l.steps.size(),
                         " steps; asked for step ", step));
  }
  const std::vector<Placement> target = group.leg_target(leg);
  const RedistributeStep& s = l.steps[step];
  const auto mesh_axis = static_cast<std::int32_t>(group.placements.dp_axes()[idx(s.axis)]);
  return step_geometry(group, collective_kind(s.kind), l.states[step],
                       state_after_step(l, step, target), mesh_axis, mesh, rank);
}

Expected<std::vector<CollectiveGeometry>> parameter_gather_geometry(const GroupGeometry& group,
                                                                    const DeviceMesh& mesh,
                                                                    std::int64_t rank) {
  const std::vector<Placement> replicated = all_replicate(group.placements.num_dp_axes());
  FSDP_TRY(std::vector<RedistributeStep> steps,
           plan_redistribute(group.placements.optimizer(), replicated));
  std::vector<CollectiveGeometry> out;
  std::vector<Placement> cur = group.placements.optimizer();
  for (const RedistributeStep& s : steps) {
    if (s.kind != RedistributeKind::kAllGather) {
      continue;
    }
    std::vector<Placement> after = cur;
    after[idx(s.axis)] = replicated[idx(s.axis)];
    const auto mesh_axis = static_cast<std::int32_t>(group.placements.dp_axes()[idx(s.axis)]);
    FSDP_TRY(CollectiveGeometry cg,
             step_geometry(group, OpKind::kAllGather, cur, after, mesh_axis, mesh, rank));
    out.push_back(std::move(cg));
    cur = std::move(after);
  }
  return out;
}

}  // namespace fsdp

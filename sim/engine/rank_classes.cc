// SPDX-License-Identifier: Apache-2.0
// Color refinement (the 1-dimensional Weisfeiler-Leman procedure) on the hypergraph whose
// hyperedges are the mesh's axis groups: a rank's new color is its old color plus, per axis, the
// set of colors in its group. It stops when no class splits; docs/design/simulator.md, "Classes".
#include "sim/engine/rank_classes.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/base/strings.h"

namespace fsdp::sim {
namespace {

// The axis groups of `axis`: group g holds ranks base(g) + k * stride for k in [0, n).
struct AxisGroups {
  std::int64_t stride = 1;
  std::int64_t n = 1;
  std::vector<std::int64_t> bases;
};

AxisGroups axis_groups(const DeviceMesh& mesh, std::int64_t axis) {
  AxisGroups g;
  for (std::int64_t b = axis + 1; b < mesh.ndim(); ++b) {
    g.stride *= mesh.axis_size(b);
  }
  g.n = mesh.axis_size(axis);
  for (std::int64_t base = 0; base < mesh.size(); ++base) {
    if ((base / g.stride) % g.n == 0) {
      g.bases.push_back(base);
    }
  }
  return g;
}

}  // namespace

Expected<SimClasses> make_sim_classes(const DeviceMesh& mesh,
                                      std::span<const std::int32_t> rank_program,
                                      std::int32_t num_programs,
                                      std::span<const char> straggler) {
  const std::int64_t num_ranks = mesh.size();
  if (static_cast<std::int64_t>(rank_program.size()) != num_ranks) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("schedule maps ", rank_program.size(), " ranks to classes; the mesh has ",
                         num_ranks));
  }
  if (!straggler.empty() && static_cast<std::int64_t>(straggler.size()) != num_ranks) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("straggler flags cover ", straggler.size(), " ranks; the mesh has ",
                         num_ranks));
  }
  const std::size_t nr = static_cast<std::size_t>(num_ranks);
  // Initial colors: (program, straggler) in that order.
  std::vector<char> used(static_cast<std::size_t>(std::max(num_programs, 0)) * 2, 0);
  for (std::size_t r = 0; r < nr; ++r) {
    const std::int32_t p = rank_program[r];
    if (p < 0 || p >= num_programs) {
      return Error(ErrorCode::kOutOfRange, str_cat("rank ", r, " maps to class ", p,
                                                   " outside [0, ", num_programs, ")"));
    }
    used[static_cast<std::size_t>(p) * 2 + (straggler.empty() ? 0 : (straggler[r] != 0))] = 1;
  }
  std::vector<std::int32_t> initial_id(used.size(), -1);
  std::int32_t num_colors = 0;
  for (std::size_t k = 0; k < used.size(); ++k) {
    if (used[k] != 0) {
      initial_id[k] = num_colors++;
    }
  }
  std::vector<std::int32_t> color(nr);
  for (std::size_t r = 0; r < nr; ++r) {
    color[r] = initial_id[static_cast<std::size_t>(rank_program[r]) * 2 +
                          (straggler.empty() ? 0 : (straggler[r] != 0))];
  }

  const std::int64_t ndim = mesh.ndim();
  if (num_colors == 1) {
    // One class (the common case, e.g. 16,384 identical ranks): one group type per axis.
    SimClasses out;
    out.ndim = ndim;
    out.rank_class = std::move(color);
    out.program = {rank_program[0]};
    out.representative = {0};
    out.num_ranks = {num_ranks};
    out.straggler = {static_cast<char>(straggler.empty() ? 0 : straggler[0])};
    for (std::int64_t a = 0; a < ndim; ++a) {
      out.group_type.push_back(static_cast<std::int32_t>(a));
      out.types.push_back({0});
      out.type_axis.push_back(static_cast<std::int32_t>(a));
    }
    return out;
  }
  std::vector<AxisGroups> groups;
  groups.reserve(static_cast<std::size_t>(ndim));
  for (std::int64_t a = 0; a < ndim; ++a) {
    groups.push_back(axis_groups(mesh, a));
  }
  // set_of[a][r]: the id of the color set of rank r's group on axis a; sets[a]: those sets.
  std::vector<std::vector<std::int32_t>> set_of(static_cast<std::size_t>(ndim),
                                                std::vector<std::int32_t>(nr, 0));
  std::vector<std::vector<std::vector<std::int32_t>>> sets(static_cast<std::size_t>(ndim));
  std::vector<std::int32_t> members;
  while (true) {
    for (std::size_t a = 0; a < static_cast<std::size_t>(ndim); ++a) {
      const AxisGroups& ag = groups[a];
      std::map<std::vector<std::int32_t>, std::int32_t> ids;
      sets[a].clear();
      for (std::int64_t base : ag.bases) {
        members.clear();
        for (std::int64_t k = 0; k < ag.n; ++k) {
          members.push_back(color[static_cast<std::size_t>(base + k * ag.stride)]);
        }
        std::sort(members.begin(), members.end());
        members.erase(std::unique(members.begin(), members.end()), members.end());
        auto [it, inserted] = ids.emplace(members, static_cast<std::int32_t>(sets[a].size()));
        if (inserted) {
          sets[a].push_back(members);
        }
        for (std::int64_t k = 0; k < ag.n; ++k) {
          set_of[a][static_cast<std::size_t>(base + k * ag.stride)] = it->second;
        }
      }
    }
    // New color: (old color, set per axis), numbered by (old color, first rank).
    std::map<std::vector<std::int32_t>, std::int64_t> first_rank;
    std::vector<std::int32_t> sig(static_cast<std::size_t>(ndim) + 1);
    std::vector<std::vector<std::int32_t>> rank_sig(nr);
    for (std::size_t r = 0; r < nr; ++r) {
      sig[0] = color[r];
      for (std::size_t a = 0; a < static_cast<std::size_t>(ndim); ++a) {
        sig[a + 1] = set_of[a][r];
      }
      first_rank.emplace(sig, static_cast<std::int64_t>(r));
      rank_sig[r] = sig;
    }
    if (static_cast<std::int32_t>(first_rank.size()) == num_colors) {
      break;
    }
    std::vector<std::pair<std::pair<std::int32_t, std::int64_t>, const std::vector<std::int32_t>*>>
        order;
    order.reserve(first_rank.size());
    for (const auto& [key, rank] : first_rank) {
      order.push_back({{key[0], rank}, &key});
    }
    std::sort(order.begin(), order.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    std::map<std::vector<std::int32_t>, std::int32_t> new_id;
    for (std::size_t i = 0; i < order.size(); ++i) {
      new_id.emplace(*order[i].second, static_cast<std::int32_t>(i));
    }
    for (std::size_t r = 0; r < nr; ++r) {
      color[r] = new_id.at(rank_sig[r]);
    }
    num_colors = static_cast<std::int32_t>(order.size());
  }

  SimClasses out;
  out.ndim = ndim;
  out.rank_class = color;
  const std::size_t nc = static_cast<std::size_t>(num_colors);
  out.program.assign(nc, -1);
  out.representative.assign(nc, -1);
  out.num_ranks.assign(nc, 0);
  out.straggler.assign(nc, 0);
  out.group_type.assign(nc * static_cast<std::size_t>(ndim), -1);
  std::vector<std::int32_t> type_base(static_cast<std::size_t>(ndim), 0);
  for (std::size_t a = 0; a < static_cast<std::size_t>(ndim); ++a) {
    type_base[a] = static_cast<std::int32_t>(out.types.size());
    for (const auto& s : sets[a]) {
      out.types.push_back(s);
      out.type_axis.push_back(static_cast<std::int32_t>(a));
    }
  }
  for (std::size_t r = 0; r < nr; ++r) {
    const std::size_t c = static_cast<std::size_t>(color[r]);
    if (out.representative[c] < 0) {
      out.representative[c] = static_cast<std::int64_t>(r);
      out.program[c] = rank_program[r];
      out.straggler[c] = straggler.empty() ? 0 : straggler[r];
      for (std::size_t a = 0; a < static_cast<std::size_t>(ndim); ++a) {
        out.group_type[c * static_cast<std::size_t>(ndim) + a] = type_base[a] + set_of[a][r];
      }
    }
    ++out.num_ranks[c];
  }
  return out;
}

}  // namespace fsdp::sim

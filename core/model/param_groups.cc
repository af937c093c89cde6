// SPDX-License-Identifier: Apache-2.0
#include "core/model/param_groups.h"

#include "core/base/strings.h"
#include "core/layout/layout_builder.h"

#include <utility>

namespace fsdp {

std::vector<ParamGrouping> group_params(std::span<const Param> params) {
  std::vector<ParamGrouping> groups;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Param& p = params[i];
    ParamGrouping* group = nullptr;
    // A unit has at most a handful of groups, so a linear search keeps first-seen order simply.
    for (ParamGrouping& g : groups) {
      if (g.dtype == p.dtype() && g.requires_grad == p.requires_grad() && g.expert == p.expert()) {
        group = &g;
        break;
      }
    }
    if (group == nullptr) {
      group = &groups.emplace_back(ParamGrouping{p.dtype(), p.requires_grad(), {}, p.expert()});
    }
    group->param_indices.push_back(static_cast<std::int64_t>(i));
  }
  return groups;
}

Expected<std::vector<ParamGroup>> build_param_groups(const Unit& unit, std::int64_t dp_size,
                                                     std::int64_t block_size,
                                                     ShardLayout shard_layout) {
  std::vector<ParamGroup> out;
  for (ParamGrouping& g : group_params(unit.params())) {
    std::vector<Shape> shapes;
    shapes.reserve(g.param_indices.size());
    for (const std::int64_t i : g.param_indices) {
      shapes.push_back(unit.params()[static_cast<std::size_t>(i)].shape());
    }
    const std::int64_t block = g.dtype == DType::kFp8 ? kMxfp8BlockSize : block_size;
    auto layout = build_row_atomic_layout(std::move(shapes), dp_size, block, shard_layout);
    if (!layout) {
      return layout.error().with_context(
          str_cat("unit '", unit.name(), "' group (", to_string(g.dtype),
                  ", requires_grad=", g.requires_grad ? "true" : "false", ")"));
    }
    out.push_back(ParamGroup{g.dtype, g.requires_grad, std::move(g.param_indices), block,
                             std::move(layout).value()});
  }
  return out;
}

}  // namespace fsdp

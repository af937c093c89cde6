// SPDX-License-Identifier: Apache-2.0
#include "core/policy/config_options.h"

#include <utility>

#include "core/base/check.h"
#include "core/base/strings.h"

namespace fsdp {

DeviceMesh one_axis_mesh(std::int64_t ranks, std::string name) {
  auto mesh = DeviceMesh::make({MeshAxis{std::move(name), ranks}});
  FSDP_CHECK(mesh.has_value()) << "one_axis_mesh(" << ranks << "): " << mesh.error().message();
  return std::move(mesh).value();
}

Expected<FsdpConfig> assemble_config(const ConfigOptions& o) {
  FsdpOptions options{.shard_layout = o.shard_layout,
                      .block_size = o.block_size,
                      .num_microbatches = o.microbatches,
                      .grad_scale = o.grad_scale,
                      .recompute = o.recompute,
                      .mixed_precision = o.mixed_precision,
                      .optimizer = o.optimizer,
                      .schedule = o.schedule,
                      .framework = o.framework};
  if (o.placements.has_value()) {
    if (o.placements->mesh() != o.mesh) {
      return Error(
          ErrorCode::kInvalidArgument,
          str_cat("placements: expected placements validated against the mesh ", to_string(o.mesh),
                  ", got placements for the mesh ", to_string(o.placements->mesh())));
    }
    return FsdpConfig::make(*o.placements, std::move(options));
  }
  FSDP_TRY(Placements placements, make_strategy_placements(o.strategy, o.mesh, o.tensor_atomic));
  return FsdpConfig::make(std::move(placements), std::move(options));
}

ConfigOptions config_options_of(const FsdpConfig& c) {
  return ConfigOptions{.mesh = c.mesh(),
                       .placements = c.placements(),
                       .shard_layout = c.shard_layout(),
                       .block_size = c.block_size(),
                       .microbatches = c.num_microbatches(),
                       .grad_scale = c.grad_scale(),
                       .recompute = c.recompute(),
                       .mixed_precision = c.mixed_precision(),
                       .optimizer = c.optimizer(),
                       .schedule = c.schedule(),
                       .framework = c.framework()};
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
#include "core/policy/fsdp_config.h"

#include <algorithm>
#include <cmath>

#include "core/base/check.h"
#include "core/base/strings.h"
#include "core/policy/config_options.h"

namespace fsdp {

namespace {

Error invalid(std::string message) {
  return Error(ErrorCode::kInvalidArgument, std::move(message));
}

bool shards_anything(const Placements& p) {
  for (const BufferRole role : {BufferRole::kParameter, BufferRole::kGradient,
                                BufferRole::kOptimizer}) {
    if (p.num_shards(role) > 1) {
      return true;
    }
  }
  return false;
}

}  // namespace

Expected<FsdpConfig> FsdpConfig::make(Placements placements, FsdpOptions options) {
  if (options.block_size < 1) {
    return invalid(str_cat("block size must be >= 1, got ", options.block_size));
  }
  if (options.num_microbatches < 1) {
    return invalid(str_cat("microbatch count must be >= 1, got ", options.num_microbatches));
  }
  if (!std::isfinite(options.grad_scale) || options.grad_scale <= 0.0) {
    return invalid(str_cat("grad_scale must be finite and > 0, got ", options.grad_scale));
  }
  if (options.shard_layout == ShardLayout::kUnpadded && placements.num_dp_axes() > 1 &&
      shards_anything(placements)) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("shard layout unpadded on a ", placements.num_dp_axes(),
                         "-axis dp mesh (", to_string(placements.mesh()),
                         ") is not implemented: uneven collectives need a 1-D dp mesh"));
  }
  // The dense parameters shard over DP x EP (docs/design/parallelism.md): placements that
  // leave the expert-parallel axis out are the experts' own, derived by the schedule.
  if (const auto ep = placements.mesh().axis_index(kExpertParallelAxis);
      ep && std::find(placements.dp_axes().begin(), placements.dp_axes().end(), *ep) ==
                placements.dp_axes().end()) {
    return invalid(str_cat("placements ", to_string(placements), " leave out mesh axis ", *ep, " (",
                           kExpertParallelAxis,
                           "): expected the dense parameters' dp axes to include the "
                           "expert-parallel axis (the experts shard over the others)"));
  }
  return FsdpConfig(std::move(placements), std::move(options));
}

bool FsdpConfig::is_last_microbatch(std::int64_t mb) const {
  FSDP_CHECK(mb >= 0 && mb < options_.num_microbatches)
      << "microbatch " << mb << " of " << options_.num_microbatches;
  return mb == options_.num_microbatches - 1;
}

Expected<FsdpConfig> make_fsdp_config(Strategy strategy, const DeviceMesh& mesh,
                                      FsdpOptions options, bool tensor_atomic) {
  return assemble_config(ConfigOptions{.mesh = mesh,
                                       .strategy = strategy,
                                       .tensor_atomic = tensor_atomic,
                                       .shard_layout = options.shard_layout,
                                       .block_size = options.block_size,
                                       .microbatches = options.num_microbatches,
                                       .grad_scale = options.grad_scale,
                                       .recompute = options.recompute,
                                       .mixed_precision = std::move(options.mixed_precision),
                                       .optimizer = std::move(options.optimizer),
                                       .schedule = std::move(options.schedule),
                                       .framework = options.framework});
}

std::string to_string(const FsdpConfig& config) {
  return str_cat(
      "mesh=", to_string(config.mesh()), " ", to_string(config.placements()),
      " shard_layout=", to_string(config.shard_layout()), " block_size=", config.block_size(),
      " microbatches=", config.num_microbatches(), " grad_scale=", config.grad_scale(),
      " recompute=", to_string(config.recompute()), " ", to_string(config.mixed_precision()),
      " optimizer=", to_string(config.optimizer()), " ", to_string(config.schedule()),
      config.framework().is_default() ? std::string()
                                      : str_cat(" framework=", to_string(config.framework())));
}

std::ostream& operator<<(std::ostream& os, const FsdpConfig& config) {
  return os << to_string(config);
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// ConfigOptions and assemble_config: the one way from typed run options to an FsdpConfig. Every
// front end fills a ConfigOptions with values that are already typed (a DeviceMesh, a Strategy,
// validated policies) and calls assemble_config: the CLI's simulate, schedule and sweep (after
// parsing their text options once, at the option parser), the trainer (exec::prepare_training)
// and the C++ training API (fully_shard and FsdpContext::config). No configuration travels as
// text below the option parser.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/base/expected.h"
#include "core/layout/shard_layout.h"
#include "core/mesh/device_mesh.h"
#include "core/mesh/placements.h"
#include "core/mesh/strategy.h"
#include "core/policy/framework_profile.h"
#include "core/policy/fsdp_config.h"
#include "core/policy/mixed_precision_policy.h"
#include "core/policy/optimizer_policy.h"
#include "core/policy/recompute_policy.h"
#include "core/policy/schedule_policy.h"

namespace fsdp {

// The 1-axis mesh "<name>=<ranks>" (dp=8). FSDP_CHECKs what DeviceMesh::make would reject
// (ranks < 1 or beyond a RankId, a name that is not an identifier): for sizes already checked.
DeviceMesh one_axis_mesh(std::int64_t ranks, std::string name = "dp");

// Everything a run fixes besides the model, the workload and the hardware, as typed values.
// Defaults are the reference's (ZeRO-3 on a 1-rank dp mesh, padded, next(1) prefetch, Adam).
struct ConfigOptions {
  DeviceMesh mesh = one_axis_mesh(1);
  // Where the placements come from: the strategy's recipe on `mesh` (tensor_atomic: TensorAtomic
  // in place of Shard(0)), or, when `placements` is set, those placements as given (fully_shard's
  // explicit argument; strategy and tensor_atomic are then not read).
  Strategy strategy = Strategy::kZero3;
  bool tensor_atomic = false;
  std::optional<Placements> placements = std::nullopt;
  ShardLayout shard_layout = ShardLayout::kPadded;
  std::int64_t block_size = 1;    // rows kept together by RowAtomic groups
  std::int64_t microbatches = 1;  // backwards accumulated per optimizer step
  double grad_scale = 1.0;        // multiplier after DP averaging
  RecomputePolicy recompute{};    // activation checkpointing (none)
  // Initialised ({}) so that designated initialisers may leave them out without a warning.
  MixedPrecisionPolicy mixed_precision{};
  OptimizerPolicy optimizer{};
  SchedulePolicy schedule{};
  FrameworkProfile framework{};  // megatron-fsdp, reshard after forward: all
  friend bool operator==(const ConfigOptions&, const ConfigOptions&) = default;
};

// The FsdpConfig of `options`. Errors, in this order, each one line: explicit placements
// validated against another mesh ("placements: expected placements validated against the mesh
// dp=8, got placements for the mesh dp=4", kInvalidArgument); the strategy on the mesh
// (make_strategy_placements); the FsdpConfig::make checks (block size, microbatches,
// grad_scale, unpadded on a multi-axis dp mesh).
Expected<FsdpConfig> assemble_config(const ConfigOptions& options);

// The options that assemble `config` again (with its placements given explicitly):
// assemble_config(config_options_of(c)) == c.
ConfigOptions config_options_of(const FsdpConfig& config);

}  // namespace fsdp

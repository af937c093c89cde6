// SPDX-License-Identifier: Apache-2.0
// FsdpConfig: everything a run fixes besides the model and the hardware: the mesh and placements
// (or a strategy recipe), the shard layout and row block, the microbatch count, grad_scale,
// activation recomputation, mixed precision, the optimizer and the schedule policy (fully_shard's
// arguments, fsdp-behaviour.md §4.1, plus the step loop of §4.7). Immutable; built only by FsdpConfig::make,
// which checks every field; front ends go through assemble_config (core/policy/config_options.h).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>

#include "core/base/expected.h"
#include "core/layout/shard_layout.h"
#include "core/mesh/device_mesh.h"
#include "core/mesh/placements.h"
#include "core/mesh/strategy.h"
#include "core/policy/framework_profile.h"
#include "core/policy/mixed_precision_policy.h"
#include "core/policy/optimizer_policy.h"
#include "core/policy/recompute_policy.h"
#include "core/policy/schedule_policy.h"

namespace fsdp {

// The plain, unvalidated request; every default is the reference's default.
struct FsdpOptions {
  ShardLayout shard_layout = ShardLayout::kPadded;
  std::int64_t block_size = 1;        // rows kept together by RowAtomic groups (fp8 groups use 32)
  std::int64_t num_microbatches = 1;  // backwards accumulated per optimizer step
  double grad_scale = 1.0;            // multiplier after DP averaging (§4.7)
  RecomputePolicy recompute{};        // activation checkpointing (none)
  MixedPrecisionPolicy mixed_precision;
  OptimizerPolicy optimizer;
  SchedulePolicy schedule;
  FrameworkProfile framework;  // buffer lifetimes and copies of the framework
  friend bool operator==(const FsdpOptions&, const FsdpOptions&) = default;
};

class FsdpConfig {
 public:
  // Errors, each one line: block_size < 1, num_microbatches < 1, grad_scale not finite or <= 0
  // (kInvalidArgument); shard layout unpadded with a Shard placement on a dp mesh of more than
  // one axis (kFailedPrecondition: uneven collectives exist for 1-D meshes only, §3.2, §9.2);
  // placements whose dp axes leave out the mesh's "ep" axis (kInvalidArgument: those are the
  // experts' placements, which the schedule derives with Placements::without_dp_axis).
  static Expected<FsdpConfig> make(Placements placements, FsdpOptions options);

  const DeviceMesh& mesh() const { return placements_.mesh(); }
  const Placements& placements() const { return placements_; }
  ShardLayout shard_layout() const { return options_.shard_layout; }
  std::int64_t block_size() const { return options_.block_size; }
  std::int64_t num_microbatches() const { return options_.num_microbatches; }
  double grad_scale() const { return options_.grad_scale; }
  const RecomputePolicy& recompute() const { return options_.recompute; }
  const MixedPrecisionPolicy& mixed_precision() const { return options_.mixed_precision; }
  const OptimizerPolicy& optimizer() const { return options_.optimizer; }
  const SchedulePolicy& schedule() const { return options_.schedule; }
  const FrameworkProfile& framework() const { return options_.framework; }

  // §4.7: microbatch `mb` (0-based) runs under microbatch(is_last = mb == n - 1). Only the last
  // one finalises gradients to the optimizer placements; earlier ones accumulate. FSDP_CHECKs
  // 0 <= mb < num_microbatches().
  bool is_last_microbatch(std::int64_t mb) const;

  friend bool operator==(const FsdpConfig&, const FsdpConfig&) = default;

 private:
  FsdpConfig(Placements placements, FsdpOptions options)
      : placements_(std::move(placements)), options_(std::move(options)) {}
  Placements placements_;
  FsdpOptions options_;
};

// make_strategy_placements(strategy, mesh, tensor_atomic), then FsdpConfig::make: shorthand for
// assemble_config (core/policy/config_options.h) with those fields.
Expected<FsdpConfig> make_fsdp_config(Strategy strategy, const DeviceMesh& mesh,
                                      FsdpOptions options, bool tensor_atomic = false);

// One line: "mesh=dp=8 dp_axes=[dp] parameter=[...] ... shard_layout=padded block_size=1
// microbatches=4 grad_scale=1 recompute=none main_params=fp32 ... optimizer=adam(state=fp32)
// forward=next(1) ..." and, for a framework profile other than the default, " framework=fsdp2
// raf=all-but-last".
std::string to_string(const FsdpConfig& config);
std::ostream& operator<<(std::ostream& os, const FsdpConfig& config);

}  // namespace fsdp

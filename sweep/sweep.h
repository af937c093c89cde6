// SPDX-License-Identifier: Apache-2.0
// The sweep engine (behind `fsdpsim sweep`): the configurations a search space spans (meshes,
// strategies, shard layouts, microbatch counts, prefetch policies, stream modes) as typed points,
// each one assembled (assemble_config over a base ConfigOptions) and simulated on a thread pool,
// and the Pareto front of throughput vs peak memory. Outcomes are keyed by configuration index,
// so results do not depend on threads or MPI ranks. Text in and out (list parsing, tables, the
// report JSON) is the CLI's (cli/sweep_format.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/base/expected.h"
#include "core/hardware/hardware.h"
#include "core/layout/shard_layout.h"
#include "core/mesh/device_mesh.h"
#include "core/mesh/strategy.h"
#include "core/model/model.h"

#include <map>
#include <utility>
#include "core/policy/config_options.h"
#include "core/policy/recompute_policy.h"
#include "core/policy/schedule_policy.h"
#include "core/schedule/schedule_builder.h"
#include "sim/engine/simulator.h"
#include "sim/report/step_metrics.h"

#include <nlohmann/json.hpp>

namespace fsdp::sweep {

struct SweepSpace {
  std::int64_t ranks = 16;
  std::vector<Strategy> strategies;
  // Inner sizes of the 2-axis meshes of HSDP/HFSDP (dp_outer = ranks / inner); empty: every
  // divisor of ranks strictly between 1 and ranks. Sizes that do not divide ranks are skipped.
  std::vector<std::int64_t> inner_sizes;
  std::vector<ShardLayout> layouts;  // unpadded is used with 1-axis sharded strategies only
  std::vector<std::int64_t> microbatches;
  std::vector<PrefetchPolicy> prefetch;  // both directions
  std::vector<bool> unified_streams;     // false: separate all-gather and reduce-scatter streams
  std::vector<RecomputePolicy> recompute;  // empty: the base's policy only
  // Tensor- and expert-parallel sizes (docs/design/parallelism.md): a point with tp > 1 (ep > 1)
  // has a "tp" ("ep") axis of that size innermost and its DP axes over ranks / tp (ep). Sizes
  // that do not divide the ranks, and tp > 1 with ep > 1, are skipped.
  std::vector<std::int64_t> tp_sizes = {1};
  std::vector<std::int64_t> ep_sizes = {1};
};

// One configuration of the space; `index` is its position in enumeration order.
struct SweepPoint {
  std::int64_t index = 0;
  Strategy strategy = Strategy::kZero3;
  // dp=16, or dp_outer=2,dp_inner=8 for hsdp/hfsdp, with ",tp=T" or ",ep=E" when split.
  DeviceMesh mesh = one_axis_mesh(1);
  ShardLayout layout = ShardLayout::kPadded;
  std::int64_t microbatches = 1;
  PrefetchPolicy prefetch{};  // next(1)
  bool unified_streams = false;
  std::optional<RecomputePolicy> recompute{};  // nullopt: the base's
  friend bool operator==(const SweepPoint&, const SweepPoint&) = default;
};

// Every legal point, in the nested order strategy, (tp, ep), mesh, layout, microbatches,
// prefetch, streams, recompute (each dimension in the order given). Meshes: with d = ranks /
// (tp x ep), dp=d for 1-axis strategies, dp_outer=d/inner,dp_inner=inner for 2-axis ones, then
// tp=T or ep=E when above 1. Unpadded layouts are skipped for
// no-shard (the layout does not matter there) and for 2-axis meshes (uneven collectives exist on
// 1-axis meshes only). Error (kInvalidArgument): ranks outside [1, 2^30].
Expected<std::vector<SweepPoint>> enumerate_sweep(const SweepSpace& space);

// What one configuration gave; `error` is set (and the figures zero) when building or simulating
// it failed.
struct SweepOutcome {
  std::int64_t index = 0;
  std::string error;
  std::int64_t step_time_ps = 0;
  std::int64_t peak_bytes = 0;           // the largest allocated peak over rank classes
  std::int64_t peak_reserved_bytes = 0;  // the caching allocator's, largest over classes
  // The one fit verdict (sim/report/step_metrics.h): reservation plus runtime within the device.
  bool fits = false;
  std::int64_t headroom_bytes = 0;  // device memory less the worst class's reservation + runtime
  // The figures people compare (docs/metrics.md): the global batch of the point's mesh and
  // microbatches, tokens/s/GPU, model TFLOP/s/GPU (torchtitan's FLOP count) and MFU.
  std::int64_t tokens_per_step = 0;
  double tokens_per_second_per_gpu = 0;
  double tflops_per_gpu = 0;
  double mfu = 0;
  std::int64_t rank_classes = 0;
  std::int64_t exposed_communication_ps = 0;  // largest over classes
  double overlap_fraction = 0;                // smallest over classes
  std::int64_t events = 0;
  bool pareto = false;  // set by mark_pareto_front
  friend bool operator==(const SweepOutcome&, const SweepOutcome&) = default;
};

// Everything a point needs besides its own dimensions.
struct SweepBase {
  Model model;  // whole: the points without tp and ep axes
  Hardware hardware;
  // Optimizer, mixed precision, block size, grad_scale, the in-flight cap, recompute (unless the
  // point has its own), ...; the mesh, strategy, layout, microbatches, prefetch and streams come
  // from each point.
  ConfigOptions config;
  Workload workload;
  sim::SimOptions sim;
  // Model FLOPs per token of the whole model (docs/metrics.md), for TFLOP/s and MFU.
  sim::ModelFlops flops = {};
  // The rank-local models of the splits the space lists, keyed by (tp, ep).
  std::map<std::pair<std::int64_t, std::int64_t>, Model> split_models = {};
};

// The base's options with the point's dimensions: mesh, strategy (its recipe, tensor_atomic
// off), shard layout, microbatches, recompute policy (when the point has one), and a schedule
// policy of the point's prefetch (both directions) and streams with the base's in-flight cap.
ConfigOptions point_config(const ConfigOptions& base, const SweepPoint& point);

// Assembles, builds and simulates one point; never throws (failures land in
// SweepOutcome::error).
SweepOutcome run_sweep_point(const SweepBase& base, const SweepPoint& point);

// Runs run_sweep_point for points[i] for every i in `which` on `jobs` threads (>= 1) and returns
// the outcomes in the order of `which`. `progress(done, total)` is called from the calling
// thread now and then, and once at the end; it may be empty.
std::vector<SweepOutcome> run_sweep_points(
    const SweepBase& base, const std::vector<SweepPoint>& points,
    const std::vector<std::int64_t>& which, int jobs,
    const std::function<void(std::int64_t, std::int64_t)>& progress);

// a trains more tokens per second than b: tokens_per_step / step_time_ps compared exactly (the
// ranks of one sweep are the same, so this orders tokens/s/GPU). Both must have run.
bool higher_throughput(const SweepOutcome& a, const SweepOutcome& b);

// Sets `pareto` on the outcomes that fit, did not fail, and are not dominated by another such
// outcome: none has at least the throughput (higher_throughput) and at most the peak reserved
// memory, and is strictly better in one of them. Equal points are all on the front.
void mark_pareto_front(std::vector<SweepOutcome>& outcomes);

// Serialisation of outcomes (exact: integers and round-tripping doubles), for MPI gathers.
nlohmann::json outcome_to_json(const SweepOutcome& outcome);
Expected<SweepOutcome> outcome_from_json(const nlohmann::json& json);

}  // namespace fsdp::sweep

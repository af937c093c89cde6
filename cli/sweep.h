// SPDX-License-Identifier: Apache-2.0
// The engine of `fsdpsim sweep`: the configurations a search space spans (meshes, strategies,
// shard layouts, microbatch counts, prefetch policies, stream modes), simulating each one on a
// thread pool, the Pareto front of throughput vs peak memory, and the text and JSON renderings.
// Outcomes are keyed by configuration index, so results do not depend on threads or MPI ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cli/run_options.h"
#include "core/base/expected.h"
#include "core/hardware/hardware.h"
#include "core/layout/shard_layout.h"
#include "core/mesh/strategy.h"
#include "core/model/model.h"
#include "sim/engine/simulator.h"

#include <nlohmann/json.hpp>

namespace fsdp::cli {

struct SweepSpace {
  std::int64_t ranks = 16;
  std::vector<Strategy> strategies;
  // Inner sizes of the 2-axis meshes of HSDP/HFSDP (dp_outer = ranks / inner); empty: every
  // divisor of ranks strictly between 1 and ranks.
  std::vector<std::int64_t> inner_sizes;
  std::vector<ShardLayout> layouts;       // unpadded is used with 1-axis sharded strategies only
  std::vector<std::int64_t> microbatches;
  std::vector<std::string> prefetch;      // canonical PrefetchPolicy strings ("none", "next(1)")
  std::vector<bool> unified_streams;      // false: separate all-gather and reduce-scatter streams
};

// One configuration of the space; `index` is its position in enumeration order.
struct SweepPoint {
  std::int64_t index = 0;
  Strategy strategy = Strategy::kZero3;
  std::string mesh;  // parse_device_mesh form: "dp=16", "dp_outer=2,dp_inner=8"
  ShardLayout layout = ShardLayout::kPadded;
  std::int64_t microbatches = 1;
  std::string prefetch = "next(1)";
  bool unified_streams = false;
  friend bool operator==(const SweepPoint&, const SweepPoint&) = default;
};

// Every legal point, in the nested order strategy, mesh, layout, microbatches, prefetch, streams
// (each dimension in the order given). Unpadded layouts are skipped for no-shard (the layout
// does not matter there) and for 2-axis meshes (uneven collectives exist on 1-axis meshes only).
std::vector<SweepPoint> enumerate_sweep(const SweepSpace& space);

// A list item of --prefetch: a depth K (0 = none, K = next(K)) or a policy string
// (none | next(K) | budget(ELEMENTS)); returns the canonical policy string.
Expected<std::string> parse_sweep_prefetch(std::string_view text);

// What one configuration gave; `error` is set (and the figures zero) when building or simulating
// it failed.
struct SweepOutcome {
  std::int64_t index = 0;
  std::string error;
  std::int64_t step_time_ps = 0;
  std::int64_t peak_bytes = 0;           // the largest peak over rank classes
  std::int64_t peak_reserved_bytes = 0;  // the caching allocator's, largest over classes
  bool fits = false;
  std::int64_t rank_classes = 0;
  std::int64_t exposed_communication_ps = 0;  // largest over classes
  double overlap_fraction = 0;                // smallest over classes
  std::int64_t events = 0;
  bool pareto = false;  // set by mark_pareto_front
  friend bool operator==(const SweepOutcome&, const SweepOutcome&) = default;
};

// Everything a point needs besides its own dimensions.
struct SweepBase {
  Model model;
  Hardware hardware;
  RunOptions run;  // seq-len, micro-batch-size, recompute, optimizer, ...; mesh etc. overridden
  sim::SimOptions sim;
};

// Builds and simulates one point; never throws (failures land in SweepOutcome::error).
SweepOutcome run_sweep_point(const SweepBase& base, const SweepPoint& point);

// Runs run_sweep_point for points[i] for every i in `which` on `jobs` threads (>= 1) and returns
// the outcomes in the order of `which`. `progress(done, total)` is called from the calling
// thread now and then, and once at the end; it may be empty.
std::vector<SweepOutcome> run_sweep_points(
    const SweepBase& base, const std::vector<SweepPoint>& points,
    const std::vector<std::int64_t>& which, int jobs,
    const std::function<void(std::int64_t, std::int64_t)>& progress);

// The step time of one microbatch, step_time_ps / microbatches, compared exactly.
// a < b when a's point finishes one microbatch sooner than b's.
bool faster_per_microbatch(const SweepOutcome& a, const SweepPoint& pa, const SweepOutcome& b,
                           const SweepPoint& pb);

// Sets `pareto` on the outcomes (outcomes[i] belongs to points[i]) that fit, did not fail, and are
// not dominated by another such outcome: none is at least as fast per microbatch and at least
// as small in peak memory, and strictly better in one of them. Equal points are all on the front.
void mark_pareto_front(const std::vector<SweepPoint>& points, std::vector<SweepOutcome>& outcomes);

// Serialisation of outcomes (exact: integers and round-tripping doubles), for MPI gathers.
nlohmann::json outcome_to_json(const SweepOutcome& outcome);
Expected<SweepOutcome> outcome_from_json(const nlohmann::json& json);

struct SweepReport {
  std::string model;
  const Hardware* hardware = nullptr;
  std::int64_t ranks = 0;
  std::int64_t tokens_per_microbatch = 0;  // per rank: seq-len x micro-batch-size
  const std::vector<SweepPoint>* points = nullptr;
  const std::vector<SweepOutcome>* outcomes = nullptr;  // outcomes[i] belongs to points[i]
};

enum class SweepSort { kTime, kMemory, kConfig };

// A table sorted by `sort` (ties by index): Pareto mark, the point's dimensions, step time, time
// per microbatch, tokens/s, peak memory, fit; then a summary and the failed configurations.
// front_only lists the Pareto front only.
std::string render_sweep_text(const SweepReport& report, SweepSort sort, bool front_only);
// {"model", "hardware", "ranks", "configurations": [...in index order...], "pareto_front":
// [indices, fastest first], "summary": {...}}.
nlohmann::json sweep_to_json(const SweepReport& report);

}  // namespace fsdp::cli

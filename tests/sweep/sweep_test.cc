// SPDX-License-Identifier: Apache-2.0
// The sweep engine without the CLI: the enumeration of a space into typed points, a point's
// options over the base, one point against a direct simulation, the pool's independence of the
// thread count, the Pareto front and the outcome JSON.
#include "sweep/sweep.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/base/strings.h"
#include "core/hardware/hardware_presets.h"
#include "core/model/hub_config.h"
#include "core/model/model_loader.h"
#include "core/model/model_split.h"
#include "core/schedule/schedule_builder.h"
#include "tests/core/model/small_arch.h"

namespace fsdp::sweep {
namespace {

DeviceMesh mesh_of(const char* text) {
  return parse_device_mesh(text).value();
}

// Two layers of hidden size 256: every configuration simulates in milliseconds.
SweepBase tiny_base() {
  SweepBase base{load_model_file(FSDP_SOURCE_DIR "/tests/cli/testdata/tiny_llama.json").value(),
                 find_hardware_preset("h100").value(), ConfigOptions{}, Workload{256, 1},
                 sim::SimOptions{}};
  base.config.recompute = RecomputePolicy::full();
  base.config.optimizer = OptimizerPolicy::make(OptimizerKind::kSgdMomentum).value();
  base.config.schedule =
      SchedulePolicy::make(PrefetchPolicy::none(), PrefetchPolicy::none(), 2, false).value();
  return base;
}

SweepSpace small_space() {
  SweepSpace space;
  space.ranks = 4;
  space.strategies = {Strategy::kZero3, Strategy::kHsdp};
  space.layouts = {ShardLayout::kPadded, ShardLayout::kUnpadded};
  space.microbatches = {1, 2};
  space.prefetch = {PrefetchPolicy::none(), PrefetchPolicy::next_units(1).value()};
  space.unified_streams = {false, true};
  return space;
}

TEST(SweepTest, EnumeratesEveryLegalConfigurationOnce) {
  SweepSpace space;
  space.ranks = 16;
  space.strategies = {Strategy::kNoShard, Strategy::kZero3, Strategy::kHsdp};
  space.layouts = {ShardLayout::kPadded, ShardLayout::kUnpadded};
  space.microbatches = {1, 4};
  space.prefetch = {PrefetchPolicy::none(), PrefetchPolicy::next_units(1).value(),
                    PrefetchPolicy::next_units(2).value()};
  space.unified_streams = {false, true};
  const std::vector<SweepPoint> points = enumerate_sweep(space).value();
  // noshard: 1 layout; zero3: 2 layouts; hsdp: inner 2, 4, 8, padded only; 12 per layout.
  ASSERT_EQ(points.size(), (1u + 2u + 3u) * 12u);
  for (std::size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(points[i].index, static_cast<std::int64_t>(i));
    if (points[i].strategy != Strategy::kZero3) {
      EXPECT_EQ(points[i].layout, ShardLayout::kPadded) << points[i].mesh;
    }
    EXPECT_EQ(points[i].mesh.ndim(), strategy_mesh_ndim(points[i].strategy));
    EXPECT_EQ(points[i].mesh.size(), 16);
    for (std::size_t j = 0; j < i; ++j) {
      SweepPoint other = points[j];
      other.index = points[i].index;
      EXPECT_NE(other, points[i]) << "configuration " << i << " repeats " << j;
    }
  }
  EXPECT_EQ(points.front().mesh, mesh_of("dp=16"));
  EXPECT_EQ(points.back().mesh, mesh_of("dp_outer=2,dp_inner=8"));
  EXPECT_EQ(points.back().prefetch, PrefetchPolicy::next_units(2).value());
  space.inner_sizes = {8, 3};  // 3 does not divide 16: skipped
  space.strategies = {Strategy::kHfsdp};
  const std::vector<SweepPoint> restricted = enumerate_sweep(space).value();
  EXPECT_EQ(restricted.size(), 12u);
  EXPECT_EQ(restricted.front().mesh, mesh_of("dp_outer=2,dp_inner=8"));
}

TEST(SweepTest, RecomputePoliciesAreTheInnermostDimension) {
  SweepSpace space = small_space();
  space.strategies = {Strategy::kZero3};
  space.layouts = {ShardLayout::kPadded};
  space.microbatches = {1};
  space.prefetch = {PrefetchPolicy::none()};
  space.unified_streams = {false, true};
  const RecomputePolicy op = RecomputePolicy::parse("selective-op").value();
  space.recompute = {RecomputePolicy{}, op};
  const std::vector<SweepPoint> points = enumerate_sweep(space).value();
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].recompute, RecomputePolicy{});
  EXPECT_EQ(points[1].recompute, op);
  EXPECT_TRUE(points[2].unified_streams);
  EXPECT_EQ(points[3].recompute, op);
  // A point's policy replaces the base's; a point without one keeps it.
  const SweepBase base = tiny_base();
  EXPECT_EQ(point_config(base.config, points[1]).recompute, op);
  EXPECT_EQ(point_config(base.config, points[0]).recompute, RecomputePolicy{});
  space.recompute.clear();
  const std::vector<SweepPoint> kept = enumerate_sweep(space).value();
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_FALSE(kept[0].recompute.has_value());
  EXPECT_EQ(point_config(base.config, kept[0]).recompute, RecomputePolicy::full());
  // The simulated step honours the point's policy: selective-op keeps less than none.
  const SweepOutcome none = run_sweep_point(base, points[0]);
  const SweepOutcome selective = run_sweep_point(base, points[1]);
  ASSERT_TRUE(none.error.empty() && selective.error.empty()) << none.error << selective.error;
  EXPECT_LT(selective.peak_bytes, none.peak_bytes);
}

// Tensor- and expert-parallel sizes: an innermost axis, the DP axes over what is left; sizes that
// do not divide the ranks and tp with ep are skipped (docs/design/parallelism.md).
TEST(SweepTest, ParallelSizesAddAnInnermostAxis) {
  SweepSpace space;
  space.ranks = 16;
  space.strategies = {Strategy::kZero3, Strategy::kHsdp};
  space.layouts = {ShardLayout::kPadded, ShardLayout::kUnpadded};
  space.microbatches = {1};
  space.prefetch = {PrefetchPolicy::none()};
  space.unified_streams = {false};
  space.tp_sizes = {1, 4, 3};
  space.ep_sizes = {1, 2};
  const std::vector<SweepPoint> points = enumerate_sweep(space).value();
  std::vector<std::string> meshes;
  for (const SweepPoint& p : points) {
    meshes.push_back(str_cat(to_string(p.mesh), " ", to_string(p.layout)));
    EXPECT_EQ(p.mesh.size(), 16);
  }
  const std::vector<std::string> expected = {
      // zero3: dp=16 (padded, unpadded), dp=8,ep=2 (padded: two dp axes), dp=4,tp=4 (both)
      "dp=16 padded", "dp=16 unpadded", "dp=8,ep=2 padded", "dp=4,tp=4 padded",
      "dp=4,tp=4 unpadded",
      // hsdp: inner 2, 4, 8 of 16; 2, 4 of 8 with ep=2; 2 of 4 with tp=4
      "dp_outer=8,dp_inner=2 padded", "dp_outer=4,dp_inner=4 padded",
      "dp_outer=2,dp_inner=8 padded", "dp_outer=4,dp_inner=2,ep=2 padded",
      "dp_outer=2,dp_inner=4,ep=2 padded", "dp_outer=2,dp_inner=2,tp=4 padded"};
  EXPECT_EQ(meshes, expected);
}

// A split point runs its split model; the report's tokens count each tp group once.
TEST(SweepTest, SplitPointsSimulateTheirRankLocalModel) {
  SweepBase base = tiny_base();
  SweepPoint point;
  point.strategy = Strategy::kZero3;
  point.mesh = mesh_of("dp=2,tp=2");
  const SweepOutcome missing = run_sweep_point(base, point);
  EXPECT_EQ(missing.error, "no model split for tp=2, ep=1");
  // The whole model on a tp mesh is refused by the builder, naming the axis.
  base.split_models.emplace(std::pair{2, 1}, base.model);
  const SweepOutcome whole = run_sweep_point(base, point);
  EXPECT_NE(whole.error.find("has a 'tp' axis of 2 ranks"), std::string::npos) << whole.error;
  // A Llama shape small enough to simulate at once, whole and split for tp=2.
  const HubArch arch = testing::small_preset_arch("llama-3-8b");
  base.model = hub_arch_to_model(arch, "small", "small").value();
  base.split_models.clear();
  base.split_models.emplace(
      std::pair{2, 1},
      hub_arch_to_model(arch, "small", "small", ModelSplit::make(2, 1, false).value()).value());
  const SweepOutcome split = run_sweep_point(base, point);
  ASSERT_TRUE(split.error.empty()) << split.error;
  EXPECT_EQ(split.rank_classes, 1);              // the two tp ranks run one program
  EXPECT_GT(split.exposed_communication_ps, 0);  // the tp all-reduces block compute
}

TEST(SweepTest, RankCountOutsideTheRangeIsAnError) {
  SweepSpace space = small_space();
  space.ranks = 0;
  EXPECT_EQ(enumerate_sweep(space).error().message(), "the sweep has 0 ranks; expected 1 to 2^30");
  space.ranks = (std::int64_t{1} << 30) + 1;
  EXPECT_FALSE(enumerate_sweep(space).has_value());
}

TEST(SweepTest, APointOverridesItsDimensionsAndKeepsTheRestOfTheBase) {
  const SweepBase base = tiny_base();
  const SweepPoint point{.index = 3,
                         .strategy = Strategy::kHsdp,
                         .mesh = mesh_of("dp_outer=2,dp_inner=2"),
                         .layout = ShardLayout::kPadded,
                         .microbatches = 2,
                         .prefetch = PrefetchPolicy::next_units(1).value(),
                         .unified_streams = true};
  const ConfigOptions o = point_config(base.config, point);
  EXPECT_EQ(o.mesh, point.mesh);
  EXPECT_EQ(o.strategy, Strategy::kHsdp);
  EXPECT_EQ(o.microbatches, 2);
  EXPECT_EQ(o.recompute, RecomputePolicy::full());  // the point has none of its own
  EXPECT_EQ(o.optimizer, base.config.optimizer);
  EXPECT_EQ(o.schedule, SchedulePolicy::make(point.prefetch, point.prefetch, 2, true).value());
  const FsdpConfig config = assemble_config(o).value();
  EXPECT_EQ(config.placements(), make_strategy_placements(Strategy::kHsdp, point.mesh).value());
  EXPECT_EQ(config.num_microbatches(), 2);
}

TEST(SweepTest, APointSimulatesAsItsConfigDoesDirectly) {
  const SweepBase base = tiny_base();
  const std::vector<SweepPoint> points = enumerate_sweep(small_space()).value();
  const SweepPoint& point = points[5];
  const SweepOutcome o = run_sweep_point(base, point);
  ASSERT_TRUE(o.error.empty()) << o.error;
  const FsdpConfig config = assemble_config(point_config(base.config, point)).value();
  const Schedule schedule = build_schedule(base.model, config, base.workload).value();
  const sim::SimResult direct = sim::simulate(schedule, base.hardware, base.sim).value();
  EXPECT_EQ(o.index, 5);
  EXPECT_EQ(o.step_time_ps, direct.step_time.ps());
  EXPECT_EQ(o.events, direct.events);
  EXPECT_EQ(o.fits, direct.fits);
  EXPECT_EQ(o.rank_classes, static_cast<std::int64_t>(direct.classes.size()));
}

TEST(SweepTest, AFailingPointCarriesItsErrorAndNoFigures) {
  SweepBase base = tiny_base();
  SweepPoint point;
  point.strategy = Strategy::kHsdp;  // on the 1-axis default mesh
  const SweepOutcome o = run_sweep_point(base, point);
  EXPECT_NE(o.error.find("hsdp needs a 2-axis dp mesh"), std::string::npos) << o.error;
  EXPECT_EQ(o.step_time_ps, 0);
  EXPECT_FALSE(o.fits);
}

TEST(SweepTest, OutcomesDoNotDependOnTheThreadCount) {
  const SweepBase base = tiny_base();
  const std::vector<SweepPoint> points = enumerate_sweep(small_space()).value();
  ASSERT_EQ(points.size(), 24u);
  const std::vector<std::int64_t> which = {23, 0, 7, 12, 1};
  std::int64_t last_done = -1;
  const std::vector<SweepOutcome> one =
      run_sweep_points(base, points, which, 1, [&](std::int64_t done, std::int64_t total) {
        EXPECT_EQ(total, 5);
        EXPECT_GE(done, last_done);
        last_done = done;
      });
  EXPECT_EQ(last_done, 5);
  const std::vector<SweepOutcome> three = run_sweep_points(base, points, which, 3, {});
  ASSERT_EQ(one.size(), which.size());
  EXPECT_EQ(one, three);
  for (std::size_t i = 0; i < which.size(); ++i) {
    EXPECT_EQ(one[i].index, which[i]);
    EXPECT_TRUE(one[i].error.empty()) << one[i].error;
  }
}

SweepOutcome outcome(std::int64_t index, std::int64_t step_ps, std::int64_t peak, bool fits = true,
                     std::string error = "", std::int64_t tokens = 1000) {
  SweepOutcome o;
  o.index = index;
  o.step_time_ps = step_ps;
  o.tokens_per_step = tokens;
  o.peak_bytes = peak;
  o.peak_reserved_bytes = peak;
  o.fits = fits;
  o.error = std::move(error);
  return o;
}

TEST(SweepTest, ThroughputComparesTokensPerStepOverStepTimeExactly) {
  // 3000 tokens in 10 ps against 2000 in 7 ps: 300 > 285.7 per ps although 7 < 10.
  EXPECT_TRUE(higher_throughput(outcome(0, 10, 0, true, "", 3000), outcome(1, 7, 0, true, "", 2000)));
  EXPECT_FALSE(higher_throughput(outcome(1, 7, 0, true, "", 2000), outcome(0, 10, 0, true, "", 3000)));
  // Equal: 6 ps for 2000 tokens and 9 ps for 3000; neither is higher.
  EXPECT_FALSE(higher_throughput(outcome(0, 6, 0, true, "", 2000), outcome(1, 9, 0, true, "", 3000)));
  EXPECT_FALSE(higher_throughput(outcome(1, 9, 0, true, "", 3000), outcome(0, 6, 0, true, "", 2000)));
  // Large factors do not overflow: 2^40 tokens in 2^50 ps against one token fewer.
  const std::int64_t big = std::int64_t{1} << 40;
  EXPECT_TRUE(higher_throughput(outcome(0, std::int64_t{1} << 50, 0, true, "", big),
                                outcome(1, std::int64_t{1} << 50, 0, true, "", big - 1)));
}

TEST(SweepTest, TheFrontIsTheUndominatedFittingSet) {
  std::vector<SweepOutcome> outcomes = {
      outcome(0, 100, 50),              // front: fastest
      outcome(1, 100, 50),              // front: equal to 0
      outcome(2, 200, 40),              // front: slower, smaller
      outcome(3, 200, 45),              // dominated by 2
      outcome(4, 300, 40),              // dominated by 2
      outcome(5, 50, 10, false),        // does not fit: never on the front
      outcome(6, 10, 1, true, "boom"),  // failed: never on the front
  };
  mark_pareto_front(outcomes);
  std::vector<bool> front;
  for (const SweepOutcome& o : outcomes) {
    front.push_back(o.pareto);
  }
  EXPECT_EQ(front, (std::vector<bool>{true, true, true, false, false, false, false}));
}

TEST(SweepTest, OutcomesRoundTripThroughJson) {
  SweepOutcome o = outcome(9, 123456789012, 987654321);
  o.peak_reserved_bytes = 1 << 30;
  o.rank_classes = 3;
  o.exposed_communication_ps = 42;
  o.overlap_fraction = 0.1 + 0.2;  // not a short decimal
  o.events = 77;
  o.headroom_bytes = -5;
  o.tokens_per_second_per_gpu = 1.0 / 3.0;
  o.tflops_per_gpu = 0.7;
  o.mfu = 0.1 + 0.7;
  EXPECT_EQ(outcome_from_json(outcome_to_json(o)).value(), o);
  const SweepOutcome failed = outcome(2, 0, 0, false, "layout: no");
  EXPECT_EQ(outcome_from_json(outcome_to_json(failed)).value(), failed);
  EXPECT_FALSE(outcome_from_json(nlohmann::json{{"index", 1}}).has_value());
}

}  // namespace
}  // namespace fsdp::sweep

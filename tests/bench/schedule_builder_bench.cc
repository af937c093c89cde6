// SPDX-License-Identifier: Apache-2.0
// Benchmarks of build_schedule (which verifies) and verify_schedule at production scale.
//
// Scenarios (the model and config are built once, outside the timed loop):
//   BM_BuildSchedule405bHsdp16384      Llama 3.1 405B preset, HSDP on dp_outer=2048 x dp_inner=8
//                                      (16,384 ranks, 8 per node), 8 microbatches, padded
//                                      layouts: every rank is alike, so one program is built.
//                                      Target: well under 1 s.
//   BM_CheckSchedule405bHsdp16384      verify_schedule on that schedule (one class).
//   BM_BuildSchedule70bUnpadded4096    Llama 3 70B preset, ZeRO-3 on dp=4096 with UNPADDED
//                                      layouts, 8 microbatches: uneven shards split the ranks
//                                      into several classes (reported as the "classes" counter),
//                                      one program each.
//   BM_CheckSchedule70bUnpadded4096    verify_schedule on that schedule.
// Counters: ops (per program), classes, collectives (table entries).
//
// Run: cmake --preset bench && cmake --build --preset bench -j2 --target schedule_builder_bench
//      && build/bench/bin/schedule_builder_bench
#include "core/model/model_presets.h"
#include "core/policy/fsdp_config.h"
#include "core/schedule/schedule_builder.h"
#include "core/schedule/happens_before.h"
#include "core/schedule/schedule_verifier.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

namespace fsdp {
namespace {

struct Scenario {
  Model model;
  FsdpConfig config;
};

Scenario make_scenario(const char* preset, Strategy strategy, const char* mesh,
                       ShardLayout layout) {
  FsdpOptions o;
  o.num_microbatches = 8;
  o.shard_layout = layout;
  return Scenario{load_model_preset(preset).value(),
                  make_fsdp_config(strategy, parse_device_mesh(mesh).value(), o).value()};
}

const Scenario& llama405b_hsdp() {
  static const Scenario s = make_scenario("llama-3.1-405b", Strategy::kHsdp,
                                          "dp_outer=2048,dp_inner=8", ShardLayout::kPadded);
  return s;
}

const Scenario& llama70b_unpadded() {
  static const Scenario s =
      make_scenario("llama-3-70b", Strategy::kZero3, "dp=4096", ShardLayout::kUnpadded);
  return s;
}

void report(benchmark::State& state, const Schedule& s) {
  state.counters["ops"] = static_cast<double>(s.programs().front().ops.size());
  state.counters["classes"] = static_cast<double>(s.programs().size());
  state.counters["collectives"] = static_cast<double>(s.collectives().size());
}

void build_bench(benchmark::State& state, const Scenario& sc) {
  for (auto _ : state) {
    auto s = build_schedule(sc.model, sc.config, Workload{});
    if (!s) {
      state.SkipWithError(s.error().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(s);
  }
  report(state, build_schedule(sc.model, sc.config, Workload{}).value());
}

void check_bench(benchmark::State& state, const Scenario& sc) {
  const Schedule s = build_schedule(sc.model, sc.config, Workload{}).value();
  for (auto _ : state) {
    const Status st = verify_schedule(s.parts());
    if (!st) {
      state.SkipWithError(st.error().message().c_str());
      return;
    }
  }
  report(state, s);
}

void BM_BuildSchedule405bHsdp16384(benchmark::State& state) {
  build_bench(state, llama405b_hsdp());
}
void BM_CheckSchedule405bHsdp16384(benchmark::State& state) {
  check_bench(state, llama405b_hsdp());
}
void BM_BuildSchedule70bUnpadded4096(benchmark::State& state) {
  build_bench(state, llama70b_unpadded());
}
void BM_CheckSchedule70bUnpadded4096(benchmark::State& state) {
  check_bench(state, llama70b_unpadded());
}

BENCHMARK(BM_BuildSchedule405bHsdp16384)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CheckSchedule405bHsdp16384)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BuildSchedule70bUnpadded4096)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CheckSchedule70bUnpadded4096)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fsdp

BENCHMARK_MAIN();

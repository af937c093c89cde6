// SPDX-License-Identifier: Apache-2.0
// Benchmarks of the discrete-event simulator (sim/engine/simulator.h).
//
// Scenarios:
//   BM_SimulatorLlama405bHsdp       one full optimizer step (8 microbatches) of Llama 3.1 405B on
//                                   16,384 H100 ranks, HSDP dp_outer=2048 x dp_inner=8, ZeRO-3
//                                   inside nodes; the schedule is built once outside the loop.
//                                   Counters: events/s (DES events processed per second), ops/s
//                                   (schedule ops executed per second), and the simulated step.
//   BM_SimulatorLlama405bTp8        the same model and ranks as dp=2048,tp=8 (ZeRO-3 over dp,
//                                   8-way tensor parallelism inside nodes: issue 19's target is
//                                   under 0.5 s), 8 microbatches, the rank-local model of tp=8.
//   BM_SimulatorLlama8bDp16         the CLI default (Llama 3 8B, dp=16, 4 microbatches).
//   BM_SimulatorLlama405bHsdpTrace  the first scenario with trace recording on.
//   BM_SimulatorLlama70bUnpadded    Llama 3 70B on dp=4096 (ZeRO-3) with the unpadded layout, 8
//                                   microbatches: ranks hold unequal shards, so many rank classes
//                                   are simulated and the slowest member gates each collective.
//   BM_Engine*                      the same scenarios on a PreparedSimulation prepared once
//                                   outside the loop: each iteration is PreparedSimulation::run(),
//                                   the event loop and the result it returns (the engine itself);
//                                   the BM_Simulator* ones time simulate(), preparation included.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "core/hardware/hardware_presets.h"
#include "core/model/hub_arch.h"
#include "core/model/hub_config.h"
#include "core/model/json_fields.h"
#include "core/model/model_presets.h"
#include "core/model/model_split.h"
#include "core/policy/fsdp_config.h"
#include "core/schedule/schedule_builder.h"
#include "sim/engine/simulator.h"

namespace fsdp::sim {
namespace {

Schedule build(const std::string& model, Strategy strategy, const std::string& mesh,
               std::int64_t microbatches, ShardLayout layout = ShardLayout::kPadded) {
  FsdpOptions options;
  options.num_microbatches = microbatches;
  options.shard_layout = layout;
  const FsdpConfig config =
      make_fsdp_config(strategy, parse_device_mesh(mesh).value(), options).value();
  return build_schedule(load_model_preset(model).value(), config, Workload{}).value();
}

// Times simulate() (prepared == false) or PreparedSimulation::run() on a simulation prepared
// before the loop (prepared == true).
void run(benchmark::State& state, const Schedule& schedule, bool trace, bool prepared = false) {
  const Hardware hw = find_hardware_preset("h100").value();
  SimOptions options;
  options.record_trace = trace;
  std::int64_t events = 0;
  std::int64_t ops = 0;
  for (const RankProgram& p : schedule.programs()) {
    ops += static_cast<std::int64_t>(p.ops.size());
  }
  auto simulation = prepare_simulation(schedule, hw, options);
  if (!simulation) {
    state.SkipWithError(simulation.error().message().c_str());
    return;
  }
  double step_ms = 0;
  for (auto _ : state) {
    auto result = prepared ? simulation->run() : simulate(schedule, hw, options);
    if (!result) {
      state.SkipWithError(result.error().message().c_str());
      return;
    }
    events += result->events;
    step_ms = result->step_time.ms();
    benchmark::DoNotOptimize(result);
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events),
                                                  benchmark::Counter::kIsRate);
  state.counters["ops/s"] = benchmark::Counter(
      static_cast<double>(ops) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  state.counters["classes"] = static_cast<double>(schedule.programs().size());
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["step_ms"] = step_ms;
}

const Schedule& llama405b_hsdp() {
  static const Schedule schedule =
      build("llama-3.1-405b", Strategy::kHsdp, "dp_outer=2048,dp_inner=8", 8);
  return schedule;
}

const Schedule& llama405b_tp8() {
  static const Schedule schedule = [] {
    const ModelPreset* preset = find_model_preset("llama-3.1-405b");
    const HubArch arch =
        read_hub_arch(parse_json_text(preset->config_json, "405b").value(), "405b").value();
    const Model local =
        hub_arch_to_model(arch, "405b", "llama-3.1-405b", ModelSplit::make(8, 1, false).value())
            .value();
    FsdpOptions options;
    options.num_microbatches = 8;
    const FsdpConfig config =
        make_fsdp_config(Strategy::kZero3, parse_device_mesh("dp=2048,tp=8").value(), options)
            .value();
    return build_schedule(local, config, Workload{}).value();
  }();
  return schedule;
}

void BM_SimulatorLlama405bTp8(benchmark::State& state) {
  run(state, llama405b_tp8(), /*trace=*/false);
}
BENCHMARK(BM_SimulatorLlama405bTp8)->Unit(benchmark::kMillisecond);

const Schedule& llama70b_unpadded() {
  static const Schedule schedule =
      build("llama-3-70b", Strategy::kZero3, "dp=4096", 8, ShardLayout::kUnpadded);
  return schedule;
}

const Schedule& llama8b_dp16() {
  static const Schedule schedule = build("llama-3-8b", Strategy::kZero3, "dp=16", 4);
  return schedule;
}

void BM_SimulatorLlama405bHsdp(benchmark::State& state) {
  run(state, llama405b_hsdp(), /*trace=*/false);
}
BENCHMARK(BM_SimulatorLlama405bHsdp)->Unit(benchmark::kMillisecond);

void BM_SimulatorLlama405bHsdpTrace(benchmark::State& state) {
  run(state, llama405b_hsdp(), /*trace=*/true);
}
BENCHMARK(BM_SimulatorLlama405bHsdpTrace)->Unit(benchmark::kMillisecond);

void BM_SimulatorLlama70bUnpadded(benchmark::State& state) {
  run(state, llama70b_unpadded(), /*trace=*/false);
}
BENCHMARK(BM_SimulatorLlama70bUnpadded)->Unit(benchmark::kMillisecond);

void BM_SimulatorLlama8bDp16(benchmark::State& state) {
  run(state, llama8b_dp16(), /*trace=*/false);
}
BENCHMARK(BM_SimulatorLlama8bDp16)->Unit(benchmark::kMillisecond);

void BM_EngineLlama405bHsdp(benchmark::State& state) {
  run(state, llama405b_hsdp(), /*trace=*/false, /*prepared=*/true);
}
BENCHMARK(BM_EngineLlama405bHsdp)->Unit(benchmark::kMillisecond);

void BM_EngineLlama70bUnpadded(benchmark::State& state) {
  run(state, llama70b_unpadded(), /*trace=*/false, /*prepared=*/true);
}
BENCHMARK(BM_EngineLlama70bUnpadded)->Unit(benchmark::kMillisecond);

void BM_EngineLlama8bDp16(benchmark::State& state) {
  run(state, llama8b_dp16(), /*trace=*/false, /*prepared=*/true);
}
BENCHMARK(BM_EngineLlama8bDp16)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fsdp::sim

BENCHMARK_MAIN();

// SPDX-License-Identifier: Apache-2.0
// One simulated optimizer step, reported the way practitioners compare runs: tokens/s/GPU, model
// TFLOP/s/GPU and MFU as torchtitan logs them, one fit verdict with its headroom, and what the
// framework, precision and checkpointing options did. The CLI's `simulate` (text and JSON) and
// the Python package's `simulate` print this one report (docs/cli.md, "simulate").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/base/expected.h"
#include "core/hardware/hardware.h"
#include "core/schedule/schedule.h"
#include "planner/run_options.h"
#include "planner/sim_args.h"
#include "sim/engine/sim_result.h"
#include "sim/engine/simulator.h"
#include "sim/report/step_metrics.h"
#include "sim/model/kernel_cost.h"

#include <nlohmann/json.hpp>

namespace fsdp::planner {

// The whole (unsplit) model of the options at seq_len (sim/report/step_metrics.h). Errors: those
// of loading the model.
Expected<sim::ModelFlops> model_flops_of(const RunOptions& options);

// What --recompute does per microbatch and rank: activations kept, units recomputed, the largest
// re-materialised set, the recompute FLOPs and, compiled, the saved outputs no backward reads
// that a compiled block does not keep (docs/models.md).
struct RecomputeEffects {
  std::int64_t kept_bytes = 0;
  std::int64_t units = 0;
  std::int64_t units_recomputed = 0;
  std::int64_t largest_transient_bytes = 0;
  double recompute_flops = 0;
  std::int64_t compiled_unread_bytes = 0;  // 0 unless --compile
};
RecomputeEffects recompute_effects(const PlannedRun& run);

// What --framework, --reshard-after-forward, --param-dtype, --reduce-dtype and
// --fp8-all-gather do, from rank 0's program (docs/design/simulator.md, "Framework profiles").
struct FrameworkEffects {
  // The dtype most parameter elements are gathered in (--fp8-all-gather leaves the embedding and
  // the output head in the compute dtype), and how many groups gather in another.
  std::string gather_dtype = "bf16";
  std::int64_t groups_gathered_otherwise = 0;
  std::string reduce_dtype = "bf16";
  std::int64_t loss_forward_bytes = 0;   // the loss's transients, per microbatch
  std::int64_t loss_backward_bytes = 0;
  std::int64_t optimizer_scratch_bytes = 0;
  std::int64_t copy_out_bytes = 0;       // largest copy-out buffer
  std::int64_t kept_gathered_units = 0;  // units not resharded after their forward
};
FrameworkEffects framework_effects(const PlannedRun& run, const Schedule& schedule);

// How far the predictions can be trusted: the validation figures of docs/validation.md, kept
// here once (a docs test checks that docs/validation.md and the README say the same).
struct Accuracy {
  double tokens_per_second_median_pct;
  double tokens_per_second_max_pct;
  double memory_median_pct;
  double memory_max_pct;
  int runs;
  int memory_runs;
};
inline constexpr Accuracy kAccuracy{3.9, 19.5, 6.9, 10.9, 9, 4};
// "predictions vs 9 published runs: tokens/s/GPU within 3.9% (median), 19.5% (max); peak memory
// within 6.9% (median), 10.9% (max) on 4 (docs/validation.md)".
std::string accuracy_line();

// A simulated step with everything its report needs.
struct SimulatedStep {
  RunOptions options;
  PlannedRun run;
  Schedule schedule;
  Hardware hardware;
  sim::SimOptions sim_options;
  sim::SimResult result;
  sim::ModelFlops flops;
  sim::Throughput throughput;
  sim::MemoryVerdict memory;
  // The per-op compute model's share of rank 0's class, by kernel class (when it priced ops).
  std::optional<sim::KernelTimes> kernels;
};

// Plans, builds and simulates the options on the hardware of `sim_args`. Errors: the first of
// the options, the hardware, the simulator options, planning, building, simulating.
Expected<SimulatedStep> simulate_step(const RunOptions& options, const SimArgs& sim_args);

// The report: JSON (the CLI's `--format json`, the Python Result's to_dict()) and text.
nlohmann::json step_report_json(const SimulatedStep& step);
std::string step_report_text(const SimulatedStep& step);

}  // namespace fsdp::planner

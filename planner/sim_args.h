// SPDX-License-Identifier: Apache-2.0
// The simulator's own options, as every front end takes them (the CLI's `simulate`, `sweep` and
// `plan`, the Python package's keywords): the hardware, the compute model, efficiencies,
// stragglers, contention and collective algorithms. make_sim_options validates them once; errors
// name the CLI option ("--straggler: ...").
#pragma once

#include <optional>
#include <string>

#include "core/base/expected.h"
#include "core/hardware/hardware.h"
#include "sim/engine/simulator.h"

namespace fsdp::planner {

struct SimArgs {
  std::string hardware = "h100";      // a preset (fsdpsim hardware) or a hardware JSON file
  std::string compute_model = "per-op";  // per-op | flops
  // The flops model's achieved fraction of peak; giving it selects compute_model flops (with
  // compute_model per-op given explicitly, it is a conflict).
  std::optional<double> matmul_efficiency;
  bool compute_model_given = false;  // compute_model was set by the user, not defaulted
  double memory_efficiency = sim::CostOptions{}.memory_efficiency;
  double link_efficiency = sim::CostOptions{}.link_efficiency;
  std::string straggler;        // rank=R,compute=X | fraction=F,link=Y; empty: none
  bool no_contention = false;
  std::optional<double> sm_slowdown;  // unset: the hardware file's measured one, else 1
  std::string all_reduce = "auto";    // ring | tree | auto
  std::int64_t min_message_bytes = 0;
  std::string uneven = "padded";      // padded | broadcast
  bool record_trace = false;          // a trace, memory plot or Gantt chart is wanted
};

// The simulator options of `args` on `hardware` (the calibrated slowdown of a measured hardware
// file applies when sm_slowdown is unset). Errors (kInvalidArgument), one line naming the option:
// an unknown compute model, algorithm or uneven mode; --matmul-efficiency with --compute-model
// per-op; an efficiency outside (0, 1]; --sm-slowdown outside [1, 1e6); a negative
// --min-message-bytes; a bad --straggler.
Expected<sim::SimOptions> make_sim_options(const SimArgs& args, const Hardware& hardware);

}  // namespace fsdp::planner

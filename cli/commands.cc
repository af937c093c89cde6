// SPDX-License-Identifier: Apache-2.0
// The registry of subcommands: add a line here and a <name>_command.cc beside it.
#include <array>

#include "cli/command.h"
#include "cli/subcommands.h"

namespace fsdp::cli {

std::span<const Command> all_commands() {
  static constexpr std::array kCommands = {
      Command{"model", "show a model's FSDP units, tensors, parameters and FLOPs",
              &run_model_command},
      Command{"hardware", "list or show hardware presets and custom cluster files",
              &run_hardware_command},
      Command{"layout", "lay out tensors into a DBuffer and draw each rank's segment",
              &run_layout_command},
      Command{"schedule", "build one optimizer step's schedule IR and print it (text, JSON, DOT)",
              &run_schedule_command},
      Command{"simulate", "simulate one optimizer step on a virtual mesh (time, overlap, memory)",
              &run_simulate_command},
      Command{"train",
              "train a small decoder for real by executing the schedule IR (CPU+MPI, CUDA+NCCL)",
              &run_train_command},
      Command{"checkpoint", "inspect a sharded training checkpoint (fsdpsim train --save)",
              &run_checkpoint_command},
      Command{"commbench", "CPU backend all-gather/reduce-scatter bus bandwidth vs plain MPI",
              &run_commbench_command},
      Command{"plan",
              "the fastest configurations for N GPUs at a global batch, and why the best wins",
              &run_plan_command},
      Command{"sweep", "simulate a raw grid of meshes and policies; the Pareto front",
              &run_sweep_command},
      Command{"calibrate", "measure this machine for the CPU backend; a hardware file to simulate",
              &run_calibrate_command},
      Command{"compare", "line up a simulated and a measured trace op by op; predicted vs measured",
              &run_compare_command},
  };
  return kCommands;
}

}  // namespace fsdp::cli

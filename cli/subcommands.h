// SPDX-License-Identifier: Apache-2.0
// Entry points of the subcommands, one per <name>_command.cc; cli/commands.cc lists them.
#pragma once

#include <span>
#include <string>

#include "cli/command.h"

namespace fsdp::cli {

int run_layout_command(std::span<const std::string> args, Io& io);
int run_schedule_command(std::span<const std::string> args, Io& io);
int run_model_command(std::span<const std::string> args, Io& io);
int run_hardware_command(std::span<const std::string> args, Io& io);
int run_simulate_command(std::span<const std::string> args, Io& io);
int run_train_command(std::span<const std::string> args, Io& io);
int run_commbench_command(std::span<const std::string> args, Io& io);
int run_sweep_command(std::span<const std::string> args, Io& io);
int run_plan_command(std::span<const std::string> args, Io& io);
int run_calibrate_command(std::span<const std::string> args, Io& io);
int run_compare_command(std::span<const std::string> args, Io& io);
int run_checkpoint_command(std::span<const std::string> args, Io& io);

}  // namespace fsdp::cli

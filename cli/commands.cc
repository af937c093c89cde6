// SPDX-License-Identifier: Apache-2.0
// The registry of subcommands: add a line here and a <name>_command.cc beside it.
#include <array>

#include "cli/command.h"
#include "cli/subcommands.h"

namespace fsdp::cli {

std::span<const Command> all_commands() {
  static constexpr std::array kCommands = {
      Command{"layout", "lay out tensors into a DBuffer and draw each rank's segment",
              &run_layout_command},
  };
  return kCommands;
}

}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
// Runs an external program (Graphviz `dot`) by argument vector, never through a shell, so no file
// name is ever parsed as a command line (docs/cli.md, "Input and output files").
#pragma once

#include <string>
#include <vector>

#include "core/base/expected.h"

namespace fsdp::cli {

struct ProgramExit {
  bool not_found = false;  // argv[0] is not on PATH (nothing ran)
  int exit_code = -1;      // the program's exit status, or -1 when a signal ended it
  int signal = 0;
};

// posix_spawnp(argv[0], argv) with stdin from /dev/null and stdout to stderr; waits for it.
// An error only when the program could not be started for another reason than "not found".
Expected<ProgramExit> run_program(const std::vector<std::string>& argv);

}  // namespace fsdp::cli

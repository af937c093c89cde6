// SPDX-License-Identifier: Apache-2.0
// Runs an external program (Graphviz `dot`) by argument vector, never through a shell, so no file
// name is ever parsed as a command line, and within a wall-clock bound, so a program that hangs
// never hangs fsdpsim (docs/cli.md, "Input and output files").
#pragma once

#include <string>
#include <vector>

#include "core/base/expected.h"

namespace fsdp::cli {

struct ProgramExit {
  bool not_found = false;  // argv[0] is not on PATH (nothing ran)
  bool timed_out = false;  // it ran past the bound and was killed (SIGKILL)
  int exit_code = -1;      // the program's exit status, or -1 when a signal ended it
  int signal = 0;
};

// posix_spawnp(argv[0], argv) with stdin from /dev/null and stdout to stderr, in a process group
// of its own; waits for it at most timeout_s seconds (finite, > 0), then kills the group
// (SIGKILL), reaps the program and returns timed_out. An error only when the program could not
// be started for another reason than "not found", or when timeout_s is not a positive finite
// number of seconds.
Expected<ProgramExit> run_program(const std::vector<std::string>& argv, double timeout_s);

}  // namespace fsdp::cli

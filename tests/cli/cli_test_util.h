// SPDX-License-Identifier: Apache-2.0
// Runs a subcommand function with captured output, for the CLI tests.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"

namespace fsdp::cli::testing {

struct Result {
  int code = 0;
  std::string out;
  std::string err;
};

inline Result run_command(CommandFn command, std::vector<std::string> args) {
  std::ostringstream out;
  std::ostringstream err;
  Io io{out, err, false};
  Result r;
  r.code = command(args, io);
  r.out = out.str();
  r.err = err.str();
  return r;
}

}  // namespace fsdp::cli::testing

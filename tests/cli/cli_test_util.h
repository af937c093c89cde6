// SPDX-License-Identifier: Apache-2.0
// Runs a subcommand function with captured output, or the fsdpsim executable, for the CLI tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
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

#ifdef FSDPSIM_EXE
// Runs the real executable with `args` (a shell command line); stderr is merged into out.
inline Result run_exe(const std::string& args) {
  Result r;
  const std::string cmd = std::string(FSDPSIM_EXE) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    r.code = -1;
    return r;
  }
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) {
    r.out.append(buf.data(), n);
  }
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}
#endif

}  // namespace fsdp::cli::testing

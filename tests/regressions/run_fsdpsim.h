// SPDX-License-Identifier: Apache-2.0
// Runs the real `fsdpsim` binary as a child process (argument vector, no shell) under limits,
// for the regression suite of issue 16: every bad input must end in seconds, under 1 GB of
// address space, with a one-line error and exit 1 or 2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::regressions {

struct Limits {
  double timeout_s = 20.0;                   // wall clock; the child is killed past it
  std::int64_t address_space_bytes = 1LL << 30;  // RLIMIT_AS of the child (0: none)
  std::string stdin_path = "/dev/null";      // what the child reads as stdin
  std::string stdout_path;                   // empty: captured; else the child's stdout file
  std::string cwd;                           // empty: the test's working directory
  // NAME=VALUE entries added to the child's environment, replacing any inherited NAME.
  std::vector<std::string> environment;
};

struct ProcessResult {
  int exit_code = -1;   // exit status, or -1 when killed by a signal
  int signal = 0;       // the signal that ended it, 0 if none
  bool timed_out = false;
  std::string out;      // stdout (empty when Limits::stdout_path is set)
  std::string err;      // stderr
};

// Runs FSDPSIM_EXE with `args` (argv[1..]). Never throws for a child's failure.
ProcessResult run_fsdpsim(const std::vector<std::string>& args, const Limits& limits = {});

// Runs any program (argv[0] is the path) the same way.
ProcessResult run_program(const std::vector<std::string>& argv, const Limits& limits = {});

// A fresh empty directory under the system temp folder, unique to this process and call.
std::string make_temp_dir(const std::string& tag);

// True when `text` is exactly one line (one trailing newline allowed) that is not empty.
bool is_one_line(const std::string& text);

// The names in directory `dir` (non-recursive, sorted), for "no stray file" checks.
std::vector<std::string> list_dir(const std::string& dir);

}  // namespace fsdp::regressions

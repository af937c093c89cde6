// SPDX-License-Identifier: Apache-2.0
// The subcommand seam of the fsdpsim executable: each subcommand is a function from its arguments
// to an exit code (0 success, 1 invalid input, 2 usage error), listed in cli/commands.cc. Helpers
// here give every subcommand the same --help, usage-error and error-line behaviour.
#pragma once

#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/base/error.h"
#include "core/base/expected.h"

#include <boost/program_options.hpp>

namespace fsdp::cli {

enum ExitCode : int { kExitOk = 0, kExitInvalidInput = 1, kExitUsage = 2 };

// Where a subcommand writes; tests pass string streams.
struct Io {
  std::ostream& out;
  std::ostream& err;
  bool out_is_terminal = false;
  bool err_is_terminal = false;  // progress bars go to err only when it is a terminal
};

using CommandFn = int (*)(std::span<const std::string> args, Io& io);

struct Command {
  std::string_view name;
  std::string_view summary;  // one line for `fsdpsim --help`
  CommandFn run;
};

// Every subcommand, in the order `fsdpsim --help` lists them.
std::span<const Command> all_commands();
const Command* find_command(std::string_view name);

// Parses args against desc into vm. On --help prints "usage: fsdpsim <usage>", the description
// and the options, and returns kExitOk; on a parse error prints one usage-error line and returns
// kExitUsage; returns nullopt when the command should go on.
std::optional<int> parse_command_line(std::string_view command, std::string_view usage,
                                      std::string_view description,
                                      boost::program_options::options_description& desc,
                                      std::span<const std::string> args,
                                      boost::program_options::variables_map& vm, Io& io);

// The libFuzzer seam (fuzz/cli_args_fuzz.cc, docs/user-guide.md "Fuzzing the command line"):
// while set, parse_command_line ends every subcommand with kExitOk right after its options parse
// (strict checks and notifiers included), before the subcommand does any work.
void set_parse_only(bool on);

// Prints "fsdpsim: error: <message>" and returns kExitInvalidInput.
int report_error(Io& io, const Error& error);
// Prints "fsdpsim <command>: usage error: <message> (try 'fsdpsim <command> --help')" and returns
// kExitUsage.
int report_usage_error(Io& io, std::string_view command, std::string_view message);

// A file argument of a command line: the option that names it and the path (empty: not given).
struct FileArgument {
  std::string_view option;
  std::string path;
};

// Before anything is written: a usage error when an output would replace one of the inputs
// (std::filesystem::equivalent) or two outputs name the same path, as `calibrate --fit T --out T`
// once did (issue 16); nullopt when they are all distinct.
std::optional<int> refuse_outputs_over_inputs(Io& io, std::string_view command,
                                              const std::vector<FileArgument>& outputs,
                                              const std::vector<FileArgument>& inputs);

// A progress bar on a terminal's stderr: "\r[####....] 12/40 <what>", a newline when done == total
// and `end_line`.
void draw_progress(std::ostream& err, std::int64_t done, std::int64_t total, std::string_view what,
                   bool end_line = true);

// Reads a whole input file (core/base/file_io.h: regular files only, up to kMaxInputFileBytes);
// the error names the path and the reason.
Expected<std::string> read_text_file(const std::string& path);

}  // namespace fsdp::cli

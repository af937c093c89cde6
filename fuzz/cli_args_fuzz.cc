// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the command-line front end (issue 16, "Must show"): arbitrary argument
// vectors for every subcommand, in-process. The input's first byte picks the subcommand; the rest
// is its arguments, separated by NUL bytes. Each subcommand runs with set_parse_only (cli/command.h)
// so it stops after its options parse; then the same arguments go through the typed seams every
// planning and training subcommand uses (run_option_conflict, parse_config_options,
// assemble_config, make_workload; make_train_spec). Properties: no crash or sanitizer report, no
// exception, an exit code of 0, 1 or 2, and a failing command prints exactly one line on stderr.
// Seeds: fuzz/corpus/cli_args. Run with scripts/fuzz.sh (docs/user-guide.md).
#include <cstddef>
#include <cstdint>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/run_options.h"
#include "cli/train_options.h"
#include "fuzz/fuzz_checks.h"

namespace {

namespace po = boost::program_options;
using fsdp::fuzz::check;

std::vector<std::string> split_args(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.emplace_back();
    } else {
      args.back() += static_cast<char>(data[i]);
    }
  }
  if (args.back().empty()) {
    args.pop_back();
  }
  return args;
}

bool one_line(const std::string& text) {
  const std::size_t newline = text.find('\n');
  return !text.empty() && text != "\n" &&
         (newline == std::string::npos || newline + 1 == text.size());
}

// An error of a typed seam as the CLI prints it (cli::report_error): one line, and not internal.
// (The message itself may quote what the user typed, control characters included; the printed
// line escapes them.)
void check_error(const fsdp::Error& error) {
  std::ostringstream out;
  std::ostringstream err;
  fsdp::cli::Io io{out, err, false, false};
  fsdp::cli::report_error(io, error);
  check(one_line(err.str()), "a printed error is not one line", err.str());
  check(error.code() != fsdp::ErrorCode::kInternal, "an internal error", error.message());
}

// The options of every planning subcommand, parsed leniently (unknown options skipped), through
// the typed seams.
void check_typed_seams(const std::vector<std::string>& args) {
  {
    po::options_description desc;
    fsdp::cli::RunOptions run;
    fsdp::cli::add_run_options(desc, &run);
    po::variables_map vm;
    try {
      po::store(po::command_line_parser(args).options(desc).allow_unregistered().run(), vm);
      po::notify(vm);
    } catch (const po::error&) {
      return;  // the subcommand itself reported this as a usage error
    }
    (void)fsdp::cli::run_option_conflict(vm, run);
    auto config = fsdp::cli::parse_config_options(run);
    if (!config) {
      check_error(config.error());
    } else if (auto assembled = fsdp::assemble_config(*config); !assembled) {
      check_error(assembled.error());
    }
    if (auto workload = fsdp::cli::make_workload(run); !workload) {
      check_error(workload.error());
    }
  }
  po::options_description desc;
  fsdp::cli::TrainOptions train;
  fsdp::cli::add_train_options(desc, &train);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).allow_unregistered().run(), vm);
    po::notify(vm);
  } catch (const po::error&) {
    return;
  }
  if (auto spec = fsdp::cli::make_train_spec(train); !spec) {
    check_error(spec.error());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const auto commands = fsdp::cli::all_commands();
  const fsdp::cli::Command& command = commands[data[0] % commands.size()];
  const std::vector<std::string> args = split_args(data + 1, size - 1);
  fsdp::cli::set_parse_only(true);
  std::ostringstream out;
  std::ostringstream err;
  fsdp::cli::Io io{out, err, false, false};
  int code = -1;
  try {
    code = command.run(args, io);
  } catch (const std::exception& e) {
    check(false, "an exception escaped the subcommand", e.what());
  }
  check(code == 0 || code == 1 || code == 2, "exit code outside {0, 1, 2}", std::to_string(code));
  if (code != 0) {
    check(one_line(err.str()), "a failing subcommand's stderr is not one line", err.str());
  }
  try {
    check_typed_seams(args);
  } catch (const std::exception& e) {
    check(false, "an exception escaped a typed seam", e.what());
  }
  return 0;
}

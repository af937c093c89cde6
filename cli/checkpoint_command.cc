// SPDX-License-Identifier: Apache-2.0
// `fsdpsim checkpoint inspect DIR`: prints the manifest of a checkpoint that `fsdpsim train
// --save` wrote (backends/exec/checkpoint_manifest.h), as text or JSON. DIR is a checkpoint
// directory (its `latest` step is shown) or one step-N directory.
#include <string>
#include <string_view>
#include <vector>

#include "backends/exec/checkpoint.h"
#include "backends/exec/checkpoint_manifest.h"
#include "cli/command.h"
#include "cli/subcommands.h"
#include "core/base/strings.h"

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

constexpr std::string_view kCmd = "checkpoint";

constexpr std::string_view kUsage = "checkpoint inspect DIR [--format text|json]";

constexpr std::string_view kDescription =
    "Shows a sharded checkpoint written by `fsdpsim train --save DIR`: the step and data\n"
    "position, the model's tensors (names and shapes), the mesh, strategy and layout that saved\n"
    "it, the optimizer and its hyper-parameters, and every shard file with its size, CRC-32 and\n"
    "record count. DIR is the checkpoint directory (its `latest` step is shown) or one step-N\n"
    "directory in it. --format json prints manifest.json itself.\n\n"
    "examples:\n"
    "  fsdpsim train --mesh dp=4 --steps 5 --save ckpt\n"
    "  fsdpsim checkpoint inspect ckpt\n"
    "  fsdpsim checkpoint inspect ckpt/step-5 --format json";

}  // namespace

int run_checkpoint_command(std::span<const std::string> args, Io& io) {
  po::options_description desc("options");
  std::string format = "text";
  desc.add_options()("format", po::value(&format)->default_value("text"), "text | json");
  // The action and the directory are positional; everything after them is an option.
  std::string dir;
  std::span<const std::string> rest = args;
  if (!rest.empty() && rest.front() == "inspect") {
    rest = rest.subspan(1);
    if (!rest.empty() && !rest.front().empty() && rest.front().front() != '-') {
      dir = rest.front();
      rest = rest.subspan(1);
    }
  } else if (!rest.empty() && !rest.front().empty() && rest.front().front() != '-') {
    return report_usage_error(io, kCmd,
                              str_cat("unknown action '", rest.front(), "'; expected inspect"));
  }
  po::variables_map vm;
  if (auto done = parse_command_line(kCmd, kUsage, kDescription, desc, rest, vm, io)) {
    return *done;
  }
  if (args.empty() || args.front() != "inspect") {
    return report_usage_error(io, kCmd, "expected an action: checkpoint inspect DIR");
  }
  if (dir.empty()) {
    return report_usage_error(io, kCmd, "inspect needs a checkpoint directory: inspect DIR");
  }
  if (format != "text" && format != "json") {
    return report_usage_error(io, kCmd,
                              str_cat("--format is '", format, "'; expected text or json"));
  }
  auto step_dir = exec::resolve_checkpoint_step(dir);
  if (!step_dir) {
    return report_error(io, step_dir.error());
  }
  auto manifest = exec::read_checkpoint_manifest(*step_dir);
  if (!manifest) {
    return report_error(io, manifest.error());
  }
  if (format == "json") {
    io.out << exec::to_json(*manifest).dump(2) << "\n";
  } else {
    io.out << "checkpoint: " << *step_dir << "\n" << exec::describe_manifest(*manifest);
  }
  return kExitOk;
}

}  // namespace fsdp::cli

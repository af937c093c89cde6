// SPDX-License-Identifier: Apache-2.0
// `fsdpsim schedule`: build the schedule IR of one optimizer step and print it as a text listing
// per rank class and stream, as JSON (with a summary of collective counts), or as Graphviz DOT
// (rendered to SVG when the output file ends in .svg and `dot` is installed).
#include <iostream>
#include <vector>

#include "cli/command.h"
#include "cli/process.h"
#include "cli/run_options.h"
#include "cli/subcommands.h"
#include "core/base/file_io.h"
#include "core/base/strings.h"
#include "viz/schedule_report.h"

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

constexpr std::string_view kUsage = "schedule [--model M] [--mesh AXES] [--strategy S] [options]";

constexpr std::string_view kDescription =
    "Builds the schedule of one optimizer step exactly as Megatron-FSDP v2's hooks would issue it:\n"
    "per rank and stream, the all-gathers (demand and prefetch), compute, frees, reduce-scatters,\n"
    "outer all-reduces (last microbatch only), the optimizer step and the post-step weight sync,\n"
    "with every buffer allocation. Ranks with identical shards share one program (a class).\n\n"
    "examples:\n"
    "  fsdpsim schedule --model llama-3-8b --mesh dp=16 --microbatches 4\n"
    "  fsdpsim schedule --mesh dp_outer=2,dp_inner=8 --strategy hsdp --format json\n"
    "  fsdpsim schedule --model tiny.json --mesh dp=4 --format dot --output step.svg";

// The largest --dot-timeout: about 11.6 days, far above any render and far below where the
// deadline arithmetic could overflow.
constexpr double kMaxDotTimeoutS = 1e6;

}  // namespace

int run_schedule_command(std::span<const std::string> args, Io& io) {
  po::options_description desc("options");
  RunOptions options;
  add_run_options(desc, &options);
  std::string format = "text";
  std::string output;
  std::int64_t max_ops = 200;
  double dot_timeout_s = 60.0;
  desc.add_options()
      ("format", po::value(&format)->default_value("text"), "text | json | dot")
      ("output,o", po::value(&output), "write to FILE; with --format dot and FILE.svg, render SVG")
      ("max-ops", po::value(&max_ops)->default_value(200), "text: ops listed per stream")
      ("dot-timeout", po::value(&dot_timeout_s)->default_value(dot_timeout_s),
       "seconds Graphviz `dot` may take to render FILE.svg before it is killed");
  po::variables_map vm;
  if (auto done = parse_command_line("schedule", kUsage, kDescription, desc, args, vm, io)) {
    return *done;
  }
  if (auto conflict = run_option_conflict(vm, options)) {
    return report_usage_error(io, "schedule", *conflict);
  }
  if (!(dot_timeout_s > 0.0 && dot_timeout_s <= kMaxDotTimeoutS)) {
    return report_usage_error(io, "schedule",
                              str_cat("--dot-timeout is ", dot_timeout_s,
                                      "; expected seconds in (0, ", kMaxDotTimeoutS, "]"));
  }
  if (format != "text" && format != "json" && format != "dot") {
    return report_usage_error(io, "schedule",
                              str_cat("--format is '", format, "'; expected text, json or dot"));
  }
  auto run = plan_run(options);
  if (!run) {
    return report_error(io, run.error());
  }
  auto schedule = build_run_schedule(*run);
  if (!schedule) {
    return report_error(io, schedule.error());
  }
  std::string text;
  if (format == "json") {
    text = viz::schedule_to_json(*schedule).dump(2) + "\n";
  } else if (format == "dot") {
    text = viz::render_schedule_dot(*schedule);
  } else {
    text = viz::render_schedule_text(*schedule, max_ops);
  }
  if (output.empty()) {
    io.out << text;
    return kExitOk;
  }
  const bool svg = format == "dot" && output.size() > 4 &&
                   output.compare(output.size() - 4, 4, ".svg") == 0;
  const std::string path = svg ? output.substr(0, output.size() - 4) + ".dot" : output;
  std::vector<FileArgument> outputs = {{"--output", output}};
  if (svg) {
    outputs.push_back({"--output (.dot)", path});
  }
  if (auto refused =
          refuse_outputs_over_inputs(io, "schedule", outputs, {{"--model", options.model}})) {
    return *refused;
  }
  if (auto written = write_output_file(path, text); !written) {
    return report_error(io, written.error().with_context("--output"));
  }
  if (svg) {
    // `dot` runs by argument vector (no shell sees the names) and writes a temporary file that
    // replaces `output` only when it succeeded (docs/cli.md, "Input and output files").
    bool dot_missing = false;
    auto rendered = write_output_file_with(
        output, [&](int /*fd*/, const std::string& tmp_path) -> Status {
          FSDP_TRY(const ProgramExit dot_exit,
                   run_program({"dot", "-Tsvg", path, "-o", tmp_path}, dot_timeout_s));
          if (dot_exit.not_found) {
            dot_missing = true;
            return Error(ErrorCode::kUnavailable, "'dot' (Graphviz) is not installed");
          }
          if (dot_exit.timed_out) {
            return Error(ErrorCode::kUnavailable,
                         str_cat("dot did not render '", path, "' within ", dot_timeout_s,
                                 " s (--dot-timeout) and was killed; ", path, " is written"));
          }
          if (dot_exit.exit_code != 0) {
            return Error(ErrorCode::kUnavailable,
                         str_cat("dot failed to render '", path, "' to '", output, "' (",
                                 dot_exit.signal != 0 ? str_cat("signal ", dot_exit.signal)
                                                  : str_cat("exit status ", dot_exit.exit_code),
                                 ")"));
          }
          return ok_status();
        });
    if (dot_missing) {
      io.err << "fsdpsim: note: 'dot' (Graphviz) is not installed; wrote " << path
             << " instead of " << output << "\n";
      return kExitOk;
    }
    if (!rendered) {
      return report_error(io, rendered.error().with_context("--output"));
    }
    io.out << "wrote " << output << " (and " << path << ")\n";
  } else {
    io.out << "wrote " << output << "\n";
  }
  return kExitOk;
}

}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
// `fsdpsim simulate`: build one optimizer step's schedule and run it through the discrete-event
// simulator on a hardware preset or file; print a summary (text or JSON) and optionally write a
// Chrome trace. With no arguments: Llama 3 8B, ZeRO-3, dp=16 (2 nodes of 8 H100s), 4 microbatches.
#include <fstream>
#include <sstream>

#include "cli/command.h"
#include "cli/run_options.h"
#include "cli/subcommands.h"
#include "core/base/strings.h"
#include "core/hardware/hardware_json.h"
#include "core/hardware/hardware_presets.h"
#include "sim/engine/simulator.h"
#include "sim/report/sim_report.h"

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

// Shortest text that reads back as the same double (0.8, not 0.80000000000000004).
std::string format_default(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

constexpr std::string_view kUsage =
    "simulate [--model M] [--mesh AXES] [--hardware H] [--format text|json] [--trace FILE]";

constexpr std::string_view kDescription =
    "Simulates one optimizer step of the schedule (see `fsdpsim schedule`) on a virtual mesh:\n"
    "per rank class and stream, ops run in order; collectives start when every member reaches\n"
    "them and cost ring alpha-beta time on the axis's link; compute costs\n"
    "max(FLOPs / (peak x efficiency), bytes / (HBM x efficiency)). Prints the step time, compute,\n"
    "exposed communication per stream and axis, overlap, bus bandwidth and peak memory.\n"
    "Defaults: llama-3-8b, zero3, dp=16 on 2 nodes of 8 H100s, 4 microbatches.\n\n"
    "examples:\n"
    "  fsdpsim simulate\n"
    "  fsdpsim simulate --mesh dp_outer=2,dp_inner=8 --strategy hsdp --hardware h200\n"
    "  fsdpsim simulate --format json --trace step.json   (open in ui.perfetto.dev)";

Expected<Hardware> load_hardware(const std::string& text) {
  auto preset = find_hardware_preset(text);
  if (preset || text.find('.') == std::string::npos) {
    return preset;
  }
  FSDP_TRY(std::string contents, read_text_file(text));
  return parse_hardware_json(contents, text);
}

}  // namespace

int run_simulate_command(std::span<const std::string> args, Io& io) {
  po::options_description desc("options");
  RunOptions options;
  options.mesh = "dp=16";
  options.microbatches = 4;
  add_run_options(desc, &options);
  std::string hardware_name = "h100";
  std::string format = "text";
  std::string trace_path;
  sim::SimOptions sim_options;
  desc.add_options()
      ("hardware", po::value(&hardware_name)->default_value(hardware_name),
       "a preset (list them with: fsdpsim hardware) or a hardware JSON file")
      ("format", po::value(&format)->default_value(format), "text | json")
      ("trace", po::value(&trace_path), "write a Chrome trace (JSON) of the step to FILE")
      ("matmul-efficiency",
       po::value(&sim_options.cost.forward_efficiency)
           ->default_value(sim_options.cost.forward_efficiency,
                          format_default(sim_options.cost.forward_efficiency)),
       "achieved fraction of peak math for forward, backward and recompute")
      ("memory-efficiency",
       po::value(&sim_options.cost.memory_efficiency)
           ->default_value(sim_options.cost.memory_efficiency,
                          format_default(sim_options.cost.memory_efficiency)),
       "achieved fraction of HBM bandwidth")
      ("link-efficiency",
       po::value(&sim_options.cost.link_efficiency)
           ->default_value(sim_options.cost.link_efficiency,
                          format_default(sim_options.cost.link_efficiency)),
       "achieved fraction of link bandwidth for collectives");
  po::variables_map vm;
  if (auto done = parse_command_line("simulate", kUsage, kDescription, desc, args, vm, io)) {
    return *done;
  }
  if (format != "text" && format != "json") {
    return report_usage_error(io, "simulate",
                              str_cat("--format is '", format, "'; expected text or json"));
  }
  for (double e : {sim_options.cost.forward_efficiency, sim_options.cost.memory_efficiency,
                   sim_options.cost.link_efficiency}) {
    if (!(e > 0.0 && e <= 1.0)) {
      return report_usage_error(io, "simulate",
                                str_cat("an efficiency is ", e, "; expected (0, 1]"));
    }
  }
  sim_options.cost.backward_efficiency = sim_options.cost.forward_efficiency;
  sim_options.cost.recompute_efficiency = sim_options.cost.forward_efficiency;
  sim_options.record_trace = !trace_path.empty();
  auto hardware = load_hardware(hardware_name);
  if (!hardware) {
    return report_error(io, hardware.error());
  }
  auto schedule = build_schedule_from_options(options);
  if (!schedule) {
    return report_error(io, schedule.error());
  }
  auto result = sim::simulate(*schedule, *hardware, sim_options);
  if (!result) {
    return report_error(io, result.error().with_context("while simulating"));
  }
  if (format == "json") {
    io.out << sim::sim_result_to_json(*result, *schedule, *hardware).dump(2) << "\n";
  } else {
    io.out << "model " << options.model << ", strategy " << options.strategy << ", seq-len "
           << options.seq_len << " x micro-batch-size " << options.micro_batch_size << "\n";
    io.out << sim::render_sim_text(*result, *schedule, *hardware);
  }
  if (!trace_path.empty()) {
    std::ofstream out(trace_path);
    out << sim::chrome_trace(*result, *schedule).dump() << "\n";
    if (!out) {
      return report_error(io, Error(ErrorCode::kInvalidArgument,
                                    str_cat("cannot write trace '", trace_path, "'")));
    }
    if (format != "json") {
      io.out << "wrote trace " << trace_path << "\n";
    }
  }
  return kExitOk;
}

}  // namespace fsdp::cli

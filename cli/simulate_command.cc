// SPDX-License-Identifier: Apache-2.0
// `fsdpsim simulate`: build one optimizer step's schedule and run it through the discrete-event
// simulator on a hardware preset or file; print a summary (text or JSON) and optionally write a
// Chrome trace. With no arguments: Llama 3 8B, ZeRO-3, dp=16 (2 nodes of 8 H100s), 4 microbatches.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/run_options.h"
#include "cli/subcommands.h"
#include "core/base/checked_math.h"
#include "core/base/file_io.h"
#include "core/base/strings.h"
#include "core/policy/recompute_policy.h"
#include "planner/step_report.h"
#include "sim/engine/simulator.h"
#include "sim/report/sim_report.h"
#include "viz/svg_gantt.h"
#include "viz/svg_memory_plot.h"

#include <nlohmann/json.hpp>

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
    "simulate [--model M] [--mesh AXES] [--hardware H] [--format text|json] [--trace FILE]\n"
    "         [--straggler SPEC] [--no-contention] [--sm-slowdown F] [--all-reduce ALG]\n"
    "         [--plot FILE.svg] [--gantt FILE.svg] [--config FILE.toml] [--profile NAME]";

constexpr std::string_view kDescription =
    "Simulates one optimizer step of the schedule (see `fsdpsim schedule`) on a virtual mesh:\n"
    "per rank class and stream, ops run in order. Collectives start when every member reaches\n"
    "them and cost what NCCL 2.28's tuner picks per call (ring, tree or NVLS with the LL, LL128\n"
    "or Simple protocol; channels over the node's NICs; concurrent collectives share links); a\n"
    "hardware file with \"collectives\": \"alpha-beta\" prices ring alpha-beta time instead.\n"
    "Compute is priced per op from the hardware's compute profile (GEMMs with wave\n"
    "quantization, flash attention, elementwise traffic; --compute-model flops: FLOPs at\n"
    "--matmul-efficiency of peak). Memory follows PyTorch's caching allocator.\n"
    "Prints tokens/s/GPU, TFLOP/s/GPU and MFU (torchtitan's FLOP count, docs/metrics.md), one\n"
    "fit verdict (peak reserved plus CUDA context and NCCL within device memory) with its\n"
    "headroom, then step time, compute, exposed communication per stream and axis, overlap,\n"
    "bus bandwidth and peak memory by buffer class. Times are rounded to three significant\n"
    "digits: the validation against published runs (docs/validation.md) is a few percent.\n"
    "Defaults: llama-3-8b, zero3, dp=16 on 2 nodes of 8 H100s, 4 microbatches.\n\n"
    "examples:\n"
    "  fsdpsim simulate\n"
    "  fsdpsim simulate --model llama-3-70b --mesh dp=64 --framework fsdp2 --recompute full\n"
    "  fsdpsim simulate --mesh dp_outer=2,dp_inner=8 --strategy hsdp --hardware h200\n"
    "  fsdpsim simulate --config llama3_8b.toml --mesh dp=64   (a torchtitan job config)\n"
    "  fsdpsim simulate --format json --trace step.json   (open in ui.perfetto.dev)";

}  // namespace

int run_simulate_command(std::span<const std::string> args, Io& io) {
  po::options_description desc("options");
  RunOptions options;
  options.mesh = "dp=16";
  options.microbatches = 4;
  add_run_options(desc, &options);
  ConfigArguments config_args;
  add_config_options(desc, &config_args);
  planner::SimArgs sim_args;
  std::string format = "text";
  std::string trace_path;
  std::string plot_path;
  std::string gantt_path;
  const sim::CostOptions cost_defaults;
  desc.add_options()
      ("hardware", po::value(&sim_args.hardware)->default_value(sim_args.hardware),
       "a preset (list them with: fsdpsim hardware) or a hardware JSON file")
      ("format", po::value(&format)->default_value(format), "text | json")
      ("trace", po::value(&trace_path),
       "write a Chrome trace (JSON) of the step to FILE (open it in ui.perfetto.dev)")
      ("plot", po::value(&plot_path), "write an SVG plot of memory over the step to FILE")
      ("gantt", po::value(&gantt_path), "write an SVG Gantt chart of the streams to FILE")
      ("compute-model", po::value(&sim_args.compute_model)->default_value(sim_args.compute_model),
       "per-op (each GEMM, attention and elementwise kernel from the hardware's compute profile)"
       " | flops (FLOPs at --matmul-efficiency of peak)")
      ("matmul-efficiency", po::value<double>()->notifier([&](double v) {
         sim_args.matmul_efficiency = v;
       }),
       str_cat("achieved fraction of peak math for forward, backward and recompute under the "
               "flops model (giving it selects --compute-model flops; default ",
               format_default(cost_defaults.forward_efficiency), ")")
           .c_str())
      ("memory-efficiency",
       po::value(&sim_args.memory_efficiency)
           ->default_value(sim_args.memory_efficiency, format_default(sim_args.memory_efficiency)),
       "achieved fraction of HBM bandwidth")
      ("link-efficiency",
       po::value(&sim_args.link_efficiency)
           ->default_value(sim_args.link_efficiency, format_default(sim_args.link_efficiency)),
       "achieved fraction of link bandwidth for collectives")
      ("straggler", po::value(&sim_args.straggler),
       "slow ranks: rank=R (repeatable) or fraction=F, with compute=X and/or link=Y factors, "
       "e.g. rank=3,compute=1.2; the report shows the step without them")
      ("no-contention", po::bool_switch(&sim_args.no_contention),
       "give every collective its link's full bandwidth (no sharing between concurrent ones)")
      ("sm-slowdown", po::value<double>()->notifier([&](double v) { sim_args.sm_slowdown = v; }),
       "compute runs this many times slower while collectives run on the device (>= 1; default "
       "1, or a calibrated hardware file's measured figure)")
      ("all-reduce", po::value(&sim_args.all_reduce)->default_value(sim_args.all_reduce),
       "all-reduce algorithm: ring | tree | auto (the fastest per call, as NCCL's tuner)")
      ("min-message-bytes",
       po::value(&sim_args.min_message_bytes)->default_value(sim_args.min_message_bytes),
       "ring-step messages below this size cost as this size (0: off)")
      ("uneven", po::value(&sim_args.uneven)->default_value(sim_args.uneven),
       "uneven all-gather/reduce-scatter: padded (to the largest member, NCCL 2.28) | broadcast");
  po::variables_map vm;
  if (auto done = parse_command_line("simulate", kUsage, kDescription, desc, args, vm, io)) {
    return *done;
  }
  if (auto conflict = run_option_conflict(vm, options)) {
    return report_usage_error(io, "simulate", *conflict);
  }
  if (format != "text" && format != "json") {
    return report_usage_error(io, "simulate",
                              str_cat("--format is '", format, "'; expected text or json"));
  }
  auto config = layer_config_arguments(vm, config_args, {}, &options);
  if (!config) {
    return report_error(io, config.error());
  }
  sim_args.compute_model_given = !vm["compute-model"].defaulted();
  sim_args.record_trace = !trace_path.empty() || !plot_path.empty() || !gantt_path.empty();
  if (auto refused = refuse_outputs_over_inputs(
          io, "simulate",
          {{"--trace", trace_path}, {"--plot", plot_path}, {"--gantt", gantt_path}},
          {{"--model", options.model}, {"--hardware", sim_args.hardware},
           {"--config", config_args.config_path}})) {
    return *refused;
  }
  auto step = planner::simulate_step(options, sim_args);
  if (!step) {
    return report_error(io, step.error());
  }
  if (format == "json") {
    nlohmann::json report = planner::step_report_json(*step);
    if (*config) {
      report["config_ignored_fields"] = (*config)->ignored_fields;
    }
    io.out << report.dump(2) << "\n";
  } else {
    io.out << planner::step_report_text(*step);
  }
  if (!trace_path.empty()) {
    if (auto written = write_output_file(
            trace_path, sim::chrome_trace(step->result, step->schedule).dump() + "\n");
        !written) {
      return report_error(io, written.error().with_context("--trace"));
    }
    if (format != "json") {
      io.out << "wrote trace " << trace_path << "\n";
    }
  }
  for (const bool memory_plot : {true, false}) {
    const std::string& path = memory_plot ? plot_path : gantt_path;
    const char* what = memory_plot ? "memory plot" : "Gantt chart";
    if (path.empty()) {
      continue;
    }
    if (auto written = write_output_file(
            path, memory_plot
                      ? viz::render_memory_svg(step->result, step->schedule, step->hardware)
                      : viz::render_gantt_svg(step->result, step->schedule));
        !written) {
      return report_error(io, written.error().with_context(str_cat("--",
                                                                   memory_plot ? "plot" : "gantt",
                                                                   " (", what, ")")));
    }
    if (format != "json") {
      io.out << "wrote " << what << " " << path << "\n";
    }
  }
  if (*config) {
    print_ignored_fields(io.err, (*config)->ignored_fields);
  }
  return kExitOk;
}

}  // namespace fsdp::cli

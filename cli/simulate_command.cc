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
#include "sim/engine/simulator.h"
#include "sim/model/kernel_cost.h"
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

// 0.0123 -> "1.23%".
std::string format_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", fraction * 100.0);
  return buf;
}

constexpr std::string_view kUsage =
    "simulate [--model M] [--mesh AXES] [--hardware H] [--format text|json] [--trace FILE]\n"
    "         [--straggler SPEC] [--no-contention] [--sm-slowdown F] [--all-reduce ALG]\n"
    "         [--plot FILE.svg] [--gantt FILE.svg]";

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

// The simulator options that need parsing; returns the one-line error, if any.
std::optional<std::string> apply_sim_options(const std::string& straggler, bool no_contention,
                                             const std::string& all_reduce,
                                             const std::string& uneven, sim::SimOptions* o) {
  if (!straggler.empty()) {
    auto parsed = sim::parse_straggler(straggler);
    if (!parsed) {
      return str_cat("--straggler: ", parsed.error().message());
    }
    o->straggler = *parsed;
  }
  o->contention = !no_contention;
  if (!(o->cost.sm_slowdown >= 1.0 && o->cost.sm_slowdown < 1e6)) {
    return str_cat("--sm-slowdown is ", o->cost.sm_slowdown, "; expected a value in [1, 1e6)");
  }
  if (o->cost.min_message_bytes < 0) {
    return str_cat("--min-message-bytes is ", o->cost.min_message_bytes, "; expected >= 0");
  }
  if (all_reduce == "ring" || all_reduce == "tree" || all_reduce == "auto") {
    o->cost.all_reduce = all_reduce == "ring"   ? sim::AllReduceAlgorithm::kRing
                         : all_reduce == "tree" ? sim::AllReduceAlgorithm::kTree
                                                : sim::AllReduceAlgorithm::kAuto;
  } else {
    return str_cat("--all-reduce is '", all_reduce, "'; expected ring, tree or auto");
  }
  if (uneven == "padded" || uneven == "broadcast") {
    o->cost.uneven = uneven == "padded" ? sim::UnevenCollective::kPadToMax
                                        : sim::UnevenCollective::kGroupedBroadcast;
  } else {
    return str_cat("--uneven is '", uneven, "'; expected padded or broadcast");
  }
  return std::nullopt;
}

// What --recompute does per microbatch and rank: activations kept, units recomputed, the largest
// re-materialised set, the recompute FLOPs and, compiled, the saved outputs no backward reads
// that a compiled block does not keep (docs/models.md).
struct RecomputeEffects {
  std::int64_t kept_bytes = 0;
  std::int64_t units = 0;
  std::int64_t units_recomputed = 0;
  std::int64_t largest_transient_bytes = 0;
  double recompute_flops = 0;
  std::int64_t compiled_unread_bytes = 0;  // 0 unless --compile
};

// a * b + c, saturated at the int64 maximum (a schedule whose buffers overflow does not build, so
// this only keeps the report defined).
std::int64_t saturating_mul_add(std::int64_t a, std::int64_t b, std::int64_t c) {
  std::int64_t product = 0;
  std::int64_t sum = 0;
  if (!checked_mul(a, b, &product) || !checked_add(product, c, &sum)) {
    return std::numeric_limits<std::int64_t>::max();
  }
  return sum;
}

RecomputeEffects recompute_effects(const PlannedRun& run) {
  const std::int64_t tokens =
      saturating_mul_add(run.workload.seq_len, run.workload.micro_batch_size, 0);
  const std::vector<UnitCheckpoint> checkpoints =
      checkpoints_of(run.config.recompute(), run.model, run.workload.compile);
  RecomputeEffects e;
  e.units = static_cast<std::int64_t>(checkpoints.size());
  for (const UnitCheckpoint& c : checkpoints) {
    e.kept_bytes = saturating_mul_add(c.kept, tokens, e.kept_bytes);
    if (c.recomputed) {
      ++e.units_recomputed;
      e.largest_transient_bytes =
          std::max(e.largest_transient_bytes, saturating_mul_add(c.transient, tokens, 0));
      e.recompute_flops +=
          (static_cast<double>(c.flops.matmul) + static_cast<double>(c.flops.attention_per_seq) *
                                                     static_cast<double>(run.workload.seq_len)) *
          static_cast<double>(tokens);
    }
  }
  if (run.workload.compile) {
    std::int64_t eager_kept = 0;
    for (const UnitCheckpoint& c : checkpoints_of(run.config.recompute(), run.model, false)) {
      eager_kept = saturating_mul_add(c.kept, tokens, eager_kept);
    }
    e.compiled_unread_bytes = eager_kept - e.kept_bytes;
  }
  return e;
}

std::string recompute_line(const PlannedRun& run) {
  const RecomputeEffects e = recompute_effects(run);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "recompute %s: %.2f GiB of activations kept per microbatch, %lld of %lld units "
                "recomputed (%.2f GiB re-materialised at most, %.2f TFLOP per microbatch)",
                to_string(run.config.recompute()).c_str(), static_cast<double>(e.kept_bytes) / kGiB,
                static_cast<long long>(e.units_recomputed), static_cast<long long>(e.units),
                static_cast<double>(e.largest_transient_bytes) / kGiB, e.recompute_flops * 1e-12);
  std::string line = buf;
  if (e.compiled_unread_bytes > 0) {
    std::snprintf(buf, sizeof buf,
                  "; compiled, %.2f GiB of saved outputs no backward reads not kept",
                  static_cast<double>(e.compiled_unread_bytes) / kGiB);
    line += buf;
  }
  return line;
}

// What --framework, --reshard-after-forward, --param-dtype, --reduce-dtype and
// --fp8-all-gather do, from rank 0's program (docs/design/simulator.md, "Framework profiles").
struct FrameworkEffects {
  // The dtype most parameter elements are gathered in (--fp8-all-gather leaves the embedding and
  // the output head in the compute dtype), and how many groups gather in another.
  std::string gather_dtype = "bf16";
  std::int64_t groups_gathered_otherwise = 0;
  std::string reduce_dtype = "bf16";
  std::int64_t loss_forward_bytes = 0;   // the loss's transients, per microbatch
  std::int64_t loss_backward_bytes = 0;
  std::int64_t optimizer_scratch_bytes = 0;
  std::int64_t copy_out_bytes = 0;       // largest copy-out buffer
  std::int64_t kept_gathered_units = 0;  // units not resharded after their forward
};

// " (--fp8-all-gather)", and the groups gathered in another dtype when there are any.
std::string gathered_note(const PlannedRun& run, const FrameworkEffects& e) {
  if (!run.config.mixed_precision().fp8_all_gather()) {
    return "";
  }
  if (e.groups_gathered_otherwise == 0) {
    return " (--fp8-all-gather)";
  }
  return str_cat(" (--fp8-all-gather; ", e.groups_gathered_otherwise,
                 " groups without fp8 GEMMs in the compute dtype)");
}

FrameworkEffects framework_effects(const PlannedRun& run, const Schedule& schedule) {
  FrameworkEffects e;
  const ShardGeometry& geo = schedule.geometry();
  if (!geo.groups.empty()) {
    std::map<DType, std::int64_t> elements;
    for (const GroupGeometry& g : geo.groups) {
      elements[g.gather_dtype] += g.numel;
    }
    const auto most =
        std::max_element(elements.begin(), elements.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    e.gather_dtype = std::string(to_string(most->first));
    for (const GroupGeometry& g : geo.groups) {
      e.groups_gathered_otherwise += g.gather_dtype != most->first ? 1 : 0;
    }
    e.reduce_dtype = std::string(to_string(geo.groups.front().reduce_dtype));
  }
  const RankProgram& program = schedule.programs()[static_cast<std::size_t>(
      schedule.rank_class().front())];
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::kAlloc && op.buffer_class == BufferClass::kOptimizerState &&
        op.phase == Phase::kStep) {
      e.optimizer_scratch_bytes += op.bytes;
    }
    if (op.kind == OpKind::kAlloc && op.buffer_class == BufferClass::kUnshardedWeights &&
        op.stream == StreamKind::kCompute) {
      e.copy_out_bytes = std::max(e.copy_out_bytes, op.bytes);
    }
  }
  for (const Unit& unit : run.model.units()) {
    if (unit.activations().loss_logits > 0 && run.config.framework().eager_torch_loss()) {
      const std::int64_t logits = unit.activations().loss_logits * run.workload.seq_len *
                                  run.workload.micro_batch_size;
      e.loss_forward_bytes += logits * 6;
      e.loss_backward_bytes += logits * 8;
    }
  }
  // Units whose forward leaves the gathered weights live: the schedule's first microbatch
  // frees them only in backward. Counted from the ops: a unit whose last forward op is not
  // followed by a free of its unsharded buffers before the backward phase.
  std::vector<std::int32_t> live(static_cast<std::size_t>(run.model.num_units()), 0);
  for (const Op& op : program.ops) {
    if (op.microbatch != 0 || op.phase != Phase::kForward || op.unit < 0) {
      continue;
    }
    if (op.buffer_class == BufferClass::kUnshardedWeights && op.kind == OpKind::kAlloc) {
      ++live[static_cast<std::size_t>(op.unit)];
    } else if (op.buffer_class == BufferClass::kUnshardedWeights && op.kind == OpKind::kFree) {
      --live[static_cast<std::size_t>(op.unit)];
    }
  }
  for (std::int32_t n : live) {
    e.kept_gathered_units += n > 0 ? 1 : 0;
  }
  return e;
}

std::string framework_line(const PlannedRun& run, const Schedule& schedule) {
  const FrameworkEffects e = framework_effects(run, schedule);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  const RuntimeMemory runtime = schedule.runtime_memory();
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "framework %s, reshard after forward %s: weights gathered in %s%s, gradients "
                "reduced in %s; %lld units keep gathered weights to backward; copy-out %.2f "
                "GiB at most; loss transients %.2f GiB forward, %.2f GiB backward; optimizer "
                "scratch %.2f GiB; runtime %.2f GiB outside the allocator, %.3f GiB workspace",
                std::string(to_string(run.config.framework().framework())).c_str(),
                std::string(to_string(run.config.framework().reshard_after_forward())).c_str(),
                e.gather_dtype.c_str(), gathered_note(run, e).c_str(), e.reduce_dtype.c_str(),
                static_cast<long long>(e.kept_gathered_units),
                static_cast<double>(e.copy_out_bytes) / kGiB,
                static_cast<double>(e.loss_forward_bytes) / kGiB,
                static_cast<double>(e.loss_backward_bytes) / kGiB,
                static_cast<double>(e.optimizer_scratch_bytes) / kGiB,
                static_cast<double>(runtime.outside_allocator_bytes) / kGiB,
                static_cast<double>(runtime.allocator_bytes) / kGiB);
  return buf;
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
  std::string plot_path;
  std::string gantt_path;
  sim::SimOptions sim_options;
  std::string straggler_text;
  bool no_contention = false;
  std::string all_reduce = "auto";
  std::string uneven = "padded";
  std::string compute_model = "per-op";
  desc.add_options()
      ("hardware", po::value(&hardware_name)->default_value(hardware_name),
       "a preset (list them with: fsdpsim hardware) or a hardware JSON file")
      ("format", po::value(&format)->default_value(format), "text | json")
      ("trace", po::value(&trace_path), "write a Chrome trace (JSON) of the step to FILE")
      ("plot", po::value(&plot_path), "write an SVG plot of memory over the step to FILE")
      ("gantt", po::value(&gantt_path), "write an SVG Gantt chart of the streams to FILE")
      ("compute-model", po::value(&compute_model)->default_value(compute_model),
       "per-op (each GEMM, attention and elementwise kernel from the hardware's compute profile)"
       "\n| flops (FLOPs at --matmul-efficiency of peak)")
      ("matmul-efficiency",
       po::value(&sim_options.cost.forward_efficiency)
           ->default_value(sim_options.cost.forward_efficiency,
                          format_default(sim_options.cost.forward_efficiency)),
       "achieved fraction of peak math for forward, backward and recompute (the flops model;\n"
       "giving it selects --compute-model flops)")
      ("memory-efficiency",
       po::value(&sim_options.cost.memory_efficiency)
           ->default_value(sim_options.cost.memory_efficiency,
                          format_default(sim_options.cost.memory_efficiency)),
       "achieved fraction of HBM bandwidth")
      ("link-efficiency",
       po::value(&sim_options.cost.link_efficiency)
           ->default_value(sim_options.cost.link_efficiency,
                          format_default(sim_options.cost.link_efficiency)),
       "achieved fraction of link bandwidth for collectives")
      ("straggler", po::value(&straggler_text),
       "slow ranks: rank=R (repeatable) or fraction=F, with compute=X and/or link=Y factors,\n"
       "e.g. rank=3,compute=1.2; the report shows the step without them")
      ("no-contention", po::bool_switch(&no_contention),
       "give every collective its link's full bandwidth (no sharing between concurrent ones)")
      ("sm-slowdown",
       po::value(&sim_options.cost.sm_slowdown)->default_value(sim_options.cost.sm_slowdown, "1"),
       "compute runs this many times slower while collectives run on the device (>= 1)")
      ("all-reduce", po::value(&all_reduce)->default_value(all_reduce),
       "all-reduce algorithm: ring | tree | auto (the fastest per call, as NCCL's tuner)")
      ("min-message-bytes",
       po::value(&sim_options.cost.min_message_bytes)->default_value(0),
       "ring-step messages below this size cost as this size (0: off)")
      ("uneven", po::value(&uneven)->default_value(uneven),
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
  if (compute_model != "per-op" && compute_model != "flops") {
    return report_usage_error(io, "simulate",
                              str_cat("--compute-model is '", compute_model,
                                      "'; expected per-op or flops"));
  }
  if (vm.count("matmul-efficiency") != 0 && !vm["matmul-efficiency"].defaulted()) {
    if (!vm["compute-model"].defaulted() && compute_model == "per-op") {
      return report_usage_error(io, "simulate",
                                "--matmul-efficiency applies to --compute-model flops; it "
                                "conflicts with --compute-model per-op");
    }
    compute_model = "flops";
  }
  sim_options.cost.per_op_compute = compute_model == "per-op";
  for (double e : {sim_options.cost.forward_efficiency, sim_options.cost.memory_efficiency,
                   sim_options.cost.link_efficiency}) {
    if (!(e > 0.0 && e <= 1.0)) {
      return report_usage_error(io, "simulate",
                                str_cat("an efficiency is ", e, "; expected (0, 1]"));
    }
  }
  if (auto sim_error = apply_sim_options(straggler_text, no_contention, all_reduce, uneven,
                                         &sim_options)) {
    return report_usage_error(io, "simulate", *sim_error);
  }
  sim_options.cost.backward_efficiency = sim_options.cost.forward_efficiency;
  sim_options.cost.recompute_efficiency = sim_options.cost.forward_efficiency;
  sim_options.record_trace = !trace_path.empty() || !plot_path.empty() || !gantt_path.empty();
  if (auto refused = refuse_outputs_over_inputs(
          io, "simulate",
          {{"--trace", trace_path}, {"--plot", plot_path}, {"--gantt", gantt_path}},
          {{"--model", options.model}, {"--hardware", hardware_name}})) {
    return *refused;
  }
  auto hardware = load_hardware_argument(hardware_name);
  if (!hardware) {
    return report_error(io, hardware.error());
  }
  if (vm["sm-slowdown"].defaulted()) {  // a calibrated file's measured slowdown, if it has one
    sim_options.cost = sim::calibrated_cost_options(sim_options.cost, *hardware);
  }
  auto run = plan_run(options);
  if (!run) {
    return report_error(io, run.error());
  }
  auto schedule = build_run_schedule(*run);
  if (!schedule) {
    return report_error(io, schedule.error());
  }
  auto result = sim::simulate(*schedule, *hardware, sim_options);
  if (!result) {
    return report_error(io, result.error().with_context("while simulating"));
  }
  const PlanPadding* padding = &schedule->padding();
  // The per-op compute model's share of rank 0's class, by kernel class (when it priced ops).
  std::optional<sim::KernelTimes> kernels;
  if (sim_options.cost.per_op_compute) {
    auto times = sim::program_kernel_times(
        *schedule, static_cast<std::size_t>(schedule->rank_class().front()), *hardware);
    if (!times) {
      return report_error(io, times.error());
    }
    if (times->total() > 0.0) {
      kernels = *times;
    }
  }
  const Workload& workload = schedule->workload();
  const std::string kernel_setup =
      str_cat(workload.kernels == KernelLibrary::kTransformerEngine ? "te" : "torch",
              workload.compile ? " compiled" : "", ", ", to_string(workload.matmul_dtype),
              " matmuls");
  if (format == "json") {
    nlohmann::json json = sim::sim_result_to_json(*result, *schedule, *hardware);
    json["padding"] = {{"flat_elements", padding->flat_elements},
                       {"data_elements", padding->data_elements},
                       {"padding_elements", padding->padding_elements},
                       {"fraction", padding->fraction()},
                       {"gathered_padding_bytes", padding->gathered_padding_bytes}};
    json["compute_model"] = {{"model", kernels ? "per-op" : "flops"},
                             {"kernels", workload.kernels == KernelLibrary::kTransformerEngine
                                             ? "te"
                                             : "torch"},
                             {"compile", workload.compile},
                             {"matmul_dtype", std::string(to_string(workload.matmul_dtype))}};
    {
      const RecomputeEffects r = recompute_effects(*run);
      json["recompute"] = {{"mode", to_string(run->config.recompute())},
                           {"kept_bytes_per_microbatch", r.kept_bytes},
                           {"units", r.units},
                           {"units_recomputed", r.units_recomputed},
                           {"largest_transient_bytes", r.largest_transient_bytes},
                           {"recompute_flops_per_microbatch", r.recompute_flops},
                           {"compiled_unread_bytes_not_kept", r.compiled_unread_bytes}};
    }
    {
      const FrameworkEffects e = framework_effects(*run, *schedule);
      json["framework"] = {
          {"framework", std::string(to_string(run->config.framework().framework()))},
          {"reshard_after_forward",
           std::string(to_string(run->config.framework().reshard_after_forward()))},
          {"gather_dtype", e.gather_dtype},
          {"groups_gathered_in_other_dtype", e.groups_gathered_otherwise},
          {"reduce_dtype", e.reduce_dtype},
          {"fp8_all_gather", run->config.mixed_precision().fp8_all_gather()},
          {"units_kept_gathered", e.kept_gathered_units},
          {"copy_out_bytes", e.copy_out_bytes},
          {"loss_forward_bytes", e.loss_forward_bytes},
          {"loss_backward_bytes", e.loss_backward_bytes},
          {"optimizer_scratch_bytes", e.optimizer_scratch_bytes},
          {"runtime_outside_allocator_bytes", schedule->runtime_memory().outside_allocator_bytes},
          {"runtime_allocator_bytes", schedule->runtime_memory().allocator_bytes}};
    }
    if (kernels) {
      json["compute_model"]["rank0_ms"] = {{"gemm", kernels->gemm * 1e3},
                                           {"attention", kernels->attention * 1e3},
                                           {"elementwise", kernels->elementwise * 1e3},
                                           {"fp8_casts", kernels->casts * 1e3}};
    }
    io.out << json.dump(2) << "\n";
  } else {
    io.out << "model " << options.model << ", strategy " << options.strategy << ", seq-len "
           << options.seq_len << " x micro-batch-size " << options.micro_batch_size << "\n";
    io.out << recompute_line(*run) << "\n";
    io.out << framework_line(*run, *schedule) << "\n";
    io.out << sim::render_sim_text(*result, *schedule, *hardware);
    if (kernels) {
      io.out << std::fixed << std::setprecision(1) << "per-op compute (" << kernel_setup
             << "), rank 0: GEMM " << kernels->gemm * 1e3 << " ms, attention "
             << kernels->attention * 1e3 << " ms, elementwise " << kernels->elementwise * 1e3
             << " ms, fp8 casts " << kernels->casts * 1e3 << " ms\n"
             << std::defaultfloat << std::setprecision(6);
    } else {
      io.out << "compute: from FLOPs at --matmul-efficiency " << sim_options.cost.forward_efficiency
             << " of peak\n";
    }
    io.out << "padding: " << padding->padding_elements << " of " << padding->flat_elements
           << " flat-buffer elements (" << format_percent(padding->fraction()) << "), "
           << padding->gathered_padding_bytes << " B in every full gather\n";
  }
  if (!trace_path.empty()) {
    if (auto written =
            write_output_file(trace_path, sim::chrome_trace(*result, *schedule).dump() + "\n");
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
            path, memory_plot ? viz::render_memory_svg(*result, *schedule, *hardware)
                              : viz::render_gantt_svg(*result, *schedule));
        !written) {
      return report_error(io, written.error().with_context(str_cat("--",
                                                                   memory_plot ? "plot" : "gantt",
                                                                   " (", what, ")")));
    }
    if (format != "json") {
      io.out << "wrote " << what << " " << path << "\n";
    }
  }
  return kExitOk;
}

}  // namespace fsdp::cli

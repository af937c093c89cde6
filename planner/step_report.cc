// SPDX-License-Identifier: Apache-2.0
#include "planner/step_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

#include "core/base/number_text.h"
#include "core/base/strings.h"
#include "core/mesh/placements.h"
#include "core/policy/recompute_policy.h"
#include "planner/model_argument.h"
#include "sim/report/sim_report.h"

namespace fsdp::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string fixed(double v, int digits) { return fixed_text(v, digits); }

std::string sig3(double v) { return significant_text(v, 3); }

std::string gib1(std::int64_t bytes) { return fixed(static_cast<double>(bytes) / kGiB, 1) + " GiB"; }

}  // namespace

Expected<sim::ModelFlops> model_flops_of(const RunOptions& options) {
  FSDP_TRY(const Model whole, load_model_argument(options.model, options.sizes));
  std::string name;
  Expected<HubArch> arch = load_arch_argument(options.model, &name);
  if (!arch) {  // an fsdpsim model file: no architecture
    return sim::model_flops(whole, nullptr, options.seq_len);
  }
  FSDP_TRY(const HubArch shrunk, apply_hub_overrides(std::move(arch).value(), options.sizes));
  return sim::model_flops(whole, &shrunk, options.seq_len);
}

RecomputeEffects recompute_effects(const PlannedRun& run) {
  const std::int64_t tokens =
      sim::saturating_mul_add(run.workload.seq_len, run.workload.micro_batch_size, 0);
  const std::vector<UnitCheckpoint> checkpoints =
      checkpoints_of(run.config.recompute(), run.model, run.workload.compile);
  RecomputeEffects e;
  e.units = static_cast<std::int64_t>(checkpoints.size());
  for (const UnitCheckpoint& c : checkpoints) {
    e.kept_bytes = sim::saturating_mul_add(c.kept, tokens, e.kept_bytes);
    if (c.recomputed) {
      ++e.units_recomputed;
      e.largest_transient_bytes =
          std::max(e.largest_transient_bytes, sim::saturating_mul_add(c.transient, tokens, 0));
      e.recompute_flops +=
          (static_cast<double>(c.flops.matmul) + static_cast<double>(c.flops.attention_per_seq) *
                                                     static_cast<double>(run.workload.seq_len)) *
          static_cast<double>(tokens);
    }
  }
  if (run.workload.compile) {
    std::int64_t eager_kept = 0;
    for (const UnitCheckpoint& c : checkpoints_of(run.config.recompute(), run.model, false)) {
      eager_kept = sim::saturating_mul_add(c.kept, tokens, eager_kept);
    }
    e.compiled_unread_bytes = eager_kept - e.kept_bytes;
  }
  return e;
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

std::string accuracy_line() {
  return str_cat("predictions vs ", kAccuracy.runs, " published runs: tokens/s/GPU within ",
                 fixed(kAccuracy.tokens_per_second_median_pct, 1), "% (median), ",
                 fixed(kAccuracy.tokens_per_second_max_pct, 1), "% (max); peak memory within ",
                 fixed(kAccuracy.memory_median_pct, 1), "% (median), ",
                 fixed(kAccuracy.memory_max_pct, 1), "% (max) on ", kAccuracy.memory_runs,
                 " (docs/validation.md)");
}

Expected<SimulatedStep> simulate_step(const RunOptions& options, const SimArgs& sim_args) {
  FSDP_TRY(Hardware hardware, load_hardware_argument(sim_args.hardware));
  FSDP_TRY(sim::SimOptions sim_options, make_sim_options(sim_args, hardware));
  FSDP_TRY(PlannedRun run, plan_run(options));
  FSDP_TRY(Schedule schedule, build_run_schedule(run));
  FSDP_TRY(sim::ModelFlops flops, model_flops_of(options));
  auto result = sim::simulate(schedule, hardware, sim_options);
  if (!result) {
    return result.error().with_context("while simulating");
  }
  std::optional<sim::KernelTimes> kernels;
  if (sim_options.cost.per_op_compute) {
    FSDP_TRY(const sim::KernelTimes times,
             sim::program_kernel_times(
                 schedule, static_cast<std::size_t>(schedule.rank_class().front()), hardware));
    if (times.total() > 0.0) {
      kernels = times;
    }
  }
  const sim::Throughput throughput =
      sim::throughput_of(schedule, static_cast<double>(result->step_time.ps()) * 1e-12, flops, hardware);
  const sim::MemoryVerdict memory = sim::memory_verdict(*result, hardware);
  return SimulatedStep{.options = options,
                       .run = std::move(run),
                       .schedule = std::move(schedule),
                       .hardware = std::move(hardware),
                       .sim_options = sim_options,
                       .result = std::move(*result),
                       .flops = flops,
                       .throughput = throughput,
                       .memory = memory,
                       .kernels = kernels};
}

namespace {

bool has_experts(const Model& model) {
  for (const Unit& unit : model.units()) {
    for (const Param& p : unit.params()) {
      if (sim::routed_expert(p.name())) {
        return true;
      }
    }
  }
  return false;
}

std::string routing_line(const SimulatedStep& s) {
  return str_cat("routing: balanced (every expert receives its even share of tokens), capacity "
                 "factor ",
                 s.options.capacity_factor,
                 " (expert inputs padded to capacity; dropped tokens not modelled)");
}

}  // namespace

nlohmann::json step_report_json(const SimulatedStep& s) {
  nlohmann::json json = sim::sim_result_to_json(s.result, s.schedule, s.hardware);
  // The figures people compare, at the top level (docs/metrics.md).
  json["step_time_s"] = s.throughput.step_time_s;
  json["tokens_per_step"] = s.throughput.tokens_per_step;
  json["tokens_per_second_per_gpu"] = s.throughput.tokens_per_second_per_gpu;
  json["tflops_per_gpu"] = s.throughput.tflops_per_gpu;
  json["mfu"] = s.throughput.mfu;
  json["model_flops"] = {{"per_token", s.flops.per_token},
                         {"active_parameters", s.flops.active_parameters},
                         {"attention_per_token", s.flops.attention_per_token},
                         {"convention", s.flops.convention},
                         {"peak_bf16_flops", s.hardware.peak_bf16_flops()}};
  json["fits"] = s.memory.fits;
  json["headroom_bytes"] = s.memory.headroom_bytes;
  json["memory"] = {{"device_bytes", s.memory.device_bytes},
                    {"peak_reserved_bytes", s.memory.peak_reserved_bytes},
                    {"peak_allocated_bytes", s.memory.peak_allocated_bytes},
                    {"outside_allocator_bytes", s.memory.outside_allocator_bytes},
                    {"headroom_bytes", s.memory.headroom_bytes},
                    {"fits", s.memory.fits}};
  json["accuracy"] = {{"tokens_per_second_median_error_pct", kAccuracy.tokens_per_second_median_pct},
                      {"tokens_per_second_max_error_pct", kAccuracy.tokens_per_second_max_pct},
                      {"memory_median_error_pct", kAccuracy.memory_median_pct},
                      {"memory_max_error_pct", kAccuracy.memory_max_pct},
                      {"published_runs", kAccuracy.runs},
                      {"source", "docs/validation.md"}};
  if (has_experts(s.run.model)) {
    json["routing"] = {{"assumption", "balanced"}, {"capacity_factor", s.options.capacity_factor}};
  }
  const PlanPadding& padding = s.schedule.padding();
  json["padding"] = {{"flat_elements", padding.flat_elements},
                     {"data_elements", padding.data_elements},
                     {"padding_elements", padding.padding_elements},
                     {"fraction", padding.fraction()},
                     {"gathered_padding_bytes", padding.gathered_padding_bytes}};
  const Workload& workload = s.schedule.workload();
  json["compute_model"] = {
      {"model", s.kernels ? "per-op" : "flops"},
      {"kernels", workload.kernels == KernelLibrary::kTransformerEngine ? "te" : "torch"},
      {"compile", workload.compile},
      {"matmul_dtype", std::string(to_string(workload.matmul_dtype))}};
  if (s.kernels) {
    json["compute_model"]["rank0_ms"] = {{"gemm", s.kernels->gemm * 1e3},
                                         {"attention", s.kernels->attention * 1e3},
                                         {"elementwise", s.kernels->elementwise * 1e3},
                                         {"fp8_casts", s.kernels->casts * 1e3}};
  }
  const RecomputeEffects r = recompute_effects(s.run);
  json["recompute"] = {{"mode", to_string(s.run.config.recompute())},
                       {"kept_bytes_per_microbatch", r.kept_bytes},
                       {"units", r.units},
                       {"units_recomputed", r.units_recomputed},
                       {"largest_transient_bytes", r.largest_transient_bytes},
                       {"recompute_flops_per_microbatch", r.recompute_flops},
                       {"compiled_unread_bytes_not_kept", r.compiled_unread_bytes}};
  const FrameworkEffects e = framework_effects(s.run, s.schedule);
  json["framework"] = {
      {"framework", std::string(to_string(s.run.config.framework().framework()))},
      {"reshard_after_forward",
       std::string(to_string(s.run.config.framework().reshard_after_forward()))},
      {"gather_dtype", e.gather_dtype},
      {"groups_gathered_in_other_dtype", e.groups_gathered_otherwise},
      {"reduce_dtype", e.reduce_dtype},
      {"fp8_all_gather", s.run.config.mixed_precision().fp8_all_gather()},
      {"units_kept_gathered", e.kept_gathered_units},
      {"copy_out_bytes", e.copy_out_bytes},
      {"loss_forward_bytes", e.loss_forward_bytes},
      {"loss_backward_bytes", e.loss_backward_bytes},
      {"optimizer_scratch_bytes", e.optimizer_scratch_bytes},
      {"runtime_outside_allocator_bytes", s.schedule.runtime_memory().outside_allocator_bytes},
      {"runtime_allocator_bytes", s.schedule.runtime_memory().allocator_bytes}};
  return json;
}

std::string step_report_text(const SimulatedStep& s) {
  std::string out;
  const RunOptions& o = s.options;
  const sim::Throughput& t = s.throughput;
  const sim::MemoryVerdict& m = s.memory;
  out += str_cat("model ", o.model, ", strategy ", o.strategy, ", seq-len ", o.seq_len,
                 " x micro-batch-size ", o.micro_batch_size, ", ", t.tokens_per_step,
                 " tokens per step (", t.data_ranks, " data ranks x ",
                 s.schedule.num_microbatches(), " microbatches)\n");
  out += str_cat("throughput: ", sig3(t.tokens_per_second_per_gpu), " tokens/s/GPU, ",
                 sig3(t.tflops_per_gpu), " TFLOP/s/GPU, MFU ", fixed(100.0 * t.mfu, 1),
                 "% of ", fixed(static_cast<double>(s.hardware.peak_bf16_flops()) * 1e-12, 0),
                 " TFLOP/s dense bf16 (", s.flops.convention, " FLOPs: ",
                 sig3(s.flops.per_token * 1e-9), " GFLOP per token)\n");
  out += str_cat("memory: ", m.fits ? "fits" : "DOES NOT FIT", ", ",
                 gib1(m.peak_reserved_bytes), " peak reserved + ",
                 gib1(m.outside_allocator_bytes), " outside the allocator of ",
                 gib1(m.device_bytes), ", headroom ", gib1(m.headroom_bytes), " (",
                 gib1(m.peak_allocated_bytes), " peak allocated)\n");
  out += str_cat("accuracy: ", accuracy_line(), "\n");
  if (has_experts(s.run.model)) {
    out += routing_line(s) + "\n";
  }
  {
    const RecomputeEffects e = recompute_effects(s.run);
    out += str_cat("recompute ", to_string(s.run.config.recompute()), ": ",
                   fixed(static_cast<double>(e.kept_bytes) / kGiB, 2),
                   " GiB of activations kept per microbatch, ", e.units_recomputed, " of ",
                   e.units, " units recomputed (",
                   fixed(static_cast<double>(e.largest_transient_bytes) / kGiB, 2),
                   " GiB re-materialised at most, ", fixed(e.recompute_flops * 1e-12, 2),
                   " TFLOP per microbatch)");
    if (e.compiled_unread_bytes > 0) {
      out += str_cat("; compiled, ", fixed(static_cast<double>(e.compiled_unread_bytes) / kGiB, 2),
                     " GiB of saved outputs no backward reads not kept");
    }
    out += "\n";
  }
  {
    const FrameworkEffects e = framework_effects(s.run, s.schedule);
    const RuntimeMemory runtime = s.schedule.runtime_memory();
    std::string gathered;
    if (s.run.config.mixed_precision().fp8_all_gather()) {
      gathered = e.groups_gathered_otherwise == 0
                     ? " (--fp8-all-gather)"
                     : str_cat(" (--fp8-all-gather; ", e.groups_gathered_otherwise,
                               " groups without fp8 GEMMs in the compute dtype)");
    }
    out += str_cat(
        "framework ", to_string(s.run.config.framework().framework()),
        ", reshard after forward ", to_string(s.run.config.framework().reshard_after_forward()),
        ": weights gathered in ", e.gather_dtype, gathered, ", gradients reduced in ",
        e.reduce_dtype, "; ", e.kept_gathered_units,
        " units keep gathered weights to backward; copy-out ",
        fixed(static_cast<double>(e.copy_out_bytes) / kGiB, 2), " GiB at most; loss transients ",
        fixed(static_cast<double>(e.loss_forward_bytes) / kGiB, 2), " GiB forward, ",
        fixed(static_cast<double>(e.loss_backward_bytes) / kGiB, 2),
        " GiB backward; optimizer scratch ",
        fixed(static_cast<double>(e.optimizer_scratch_bytes) / kGiB, 2), " GiB; runtime ",
        fixed(static_cast<double>(runtime.outside_allocator_bytes) / kGiB, 2),
        " GiB outside the allocator, ", fixed(static_cast<double>(runtime.allocator_bytes) / kGiB, 3),
        " GiB workspace\n");
  }
  out += sim::render_sim_text(s.result, s.schedule, s.hardware);
  const Workload& workload = s.schedule.workload();
  if (s.kernels) {
    out += str_cat("per-op compute (",
                   workload.kernels == KernelLibrary::kTransformerEngine ? "te" : "torch",
                   workload.compile ? " compiled" : "", ", ", to_string(workload.matmul_dtype),
                   " matmuls), rank 0: GEMM ", sig3(s.kernels->gemm * 1e3), " ms, attention ",
                   sig3(s.kernels->attention * 1e3), " ms, elementwise ",
                   sig3(s.kernels->elementwise * 1e3), " ms, fp8 casts ",
                   sig3(s.kernels->casts * 1e3), " ms\n");
  } else {
    out += str_cat("compute: from FLOPs at --matmul-efficiency ",
                   s.sim_options.cost.forward_efficiency, " of peak\n");
  }
  const PlanPadding& padding = s.schedule.padding();
  out += str_cat("padding: ", padding.padding_elements, " of ", padding.flat_elements,
                 " flat-buffer elements (", fixed(padding.fraction() * 100.0, 2), "%), ",
                 padding.gathered_padding_bytes, " B in every full gather\n");
  return out;
}

}  // namespace fsdp::planner

// SPDX-License-Identifier: Apache-2.0
#include "planner/run_options.h"

#include <filesystem>
#include <utility>

#include "core/base/file_io.h"
#include "core/base/strings.h"
#include "core/hardware/hardware_json.h"
#include "core/hardware/hardware_presets.h"
#include "core/mesh/axis_names.h"
#include "core/mesh/placements.h"
#include "core/mesh/strategy.h"
#include "core/model/model_split.h"
#include "core/model/model_loader.h"
#include "core/model/model_presets.h"
#include "planner/model_argument.h"
#include "planner/resource_estimate.h"

namespace fsdp::planner {

Expected<Hardware> load_hardware_argument(const std::string& text) {
  auto preset = find_hardware_preset(text);
  // A preset name, unless it names no preset but looks like a path or is an existing file of any
  // kind (which the reader then accepts or refuses): "cluster" in the working folder is a file.
  std::error_code ec;
  const bool exists = std::filesystem::exists(std::filesystem::symlink_status(text, ec));
  if (preset || (text.find('.') == std::string::npos && text.find('/') == std::string::npos &&
                 !exists)) {
    return preset;
  }
  FSDP_TRY(std::string contents, read_input_file(text));
  return parse_hardware_json(contents, text);
}

Expected<ConfigOptions> parse_config_options(const RunOptions& o) {
  auto ctx = [](const char* option, const Error& e) {
    return e.with_context(str_cat("--", option));
  };
  auto mesh = parse_run_mesh(o.mesh);
  if (!mesh) {
    return ctx("mesh", mesh.error());
  }
  auto strategy = parse_strategy(o.strategy);
  if (!strategy) {
    return ctx("strategy", strategy.error());
  }
  auto layout = parse_shard_layout(o.shard_layout);
  if (!layout) {
    return ctx("shard-layout", layout.error());
  }
  auto main = parse_dtype(o.main_params);
  if (!main) {
    return ctx("main-params", main.error());
  }
  std::optional<DType> param_dtype;
  if (!o.param_dtype.empty()) {
    if (o.param_dtype != "bf16" && o.param_dtype != "fp32") {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("--param-dtype is '", o.param_dtype, "'; expected bf16 or fp32"));
    }
    param_dtype = o.param_dtype == "bf16" ? DType::kBf16 : DType::kFp32;
  }
  auto mp = MixedPrecisionPolicy::make(*main, std::nullopt, param_dtype);
  if (!mp) {
    return ctx("main-params", mp.error());
  }
  auto kind = parse_optimizer_kind(o.optimizer);
  if (!kind) {
    return ctx("optimizer", kind.error());
  }
  auto opt = OptimizerPolicy::make(*kind);
  if (!opt) {
    return ctx("optimizer", opt.error());
  }
  auto fwd = parse_prefetch_policy(o.forward_prefetch);
  if (!fwd) {
    return ctx("forward-prefetch", fwd.error());
  }
  auto bwd = parse_prefetch_policy(o.backward_prefetch);
  if (!bwd) {
    return ctx("backward-prefetch", bwd.error());
  }
  auto sched = SchedulePolicy::make(*fwd, *bwd, o.max_inflight, o.unified_streams);
  if (!sched) {
    return ctx("max-inflight-all-gathers", sched.error());
  }
  auto recompute = RecomputePolicy::parse(o.recompute);
  if (!recompute) {
    return recompute.error();
  }
  std::optional<DType> reduce_dtype;
  if (!o.reduce_dtype.empty()) {
    if (o.reduce_dtype != "bf16" && o.reduce_dtype != "fp32") {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("--reduce-dtype is '", o.reduce_dtype, "'; expected fp32 or bf16"));
    }
    reduce_dtype = o.reduce_dtype == "bf16" ? DType::kBf16 : DType::kFp32;
  }
  if (o.fp8_all_gather && o.compute_dtype != "fp8") {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("--fp8-all-gather needs --compute-dtype fp8, got --compute-dtype '",
                         o.compute_dtype, "'"));
  }
  auto precision = mp->with_collective_dtypes(reduce_dtype, o.fp8_all_gather);
  if (!precision) {
    return ctx("reduce-dtype", precision.error());
  }
  auto framework = parse_framework(o.framework);
  if (!framework) {
    return framework.error();
  }
  auto reshard = parse_reshard_after_forward(o.reshard_after_forward);
  if (!reshard) {
    return reshard.error();
  }
  return ConfigOptions{.mesh = std::move(*mesh),
                       .strategy = *strategy,
                       .tensor_atomic = o.tensor_atomic,
                       .shard_layout = *layout,
                       .block_size = o.block,
                       .microbatches = o.microbatches,
                       .grad_scale = o.grad_scale,
                       .recompute = *recompute,
                       .mixed_precision = *precision,
                       .optimizer = *opt,
                       .schedule = *sched,
                       .framework = FrameworkProfile::make(*framework, *reshard)};
}

Expected<Workload> make_workload(const RunOptions& o) {
  if (o.seq_len < 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("--seq-len is ", o.seq_len, "; expected >= 1"));
  }
  if (o.micro_batch_size < 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("--micro-batch-size is ", o.micro_batch_size, "; expected >= 1"));
  }
  Workload workload{.seq_len = o.seq_len, .micro_batch_size = o.micro_batch_size,
                    .compile = o.compile};
  if (o.compute_dtype == "bf16") {
    workload.matmul_dtype = DType::kBf16;
  } else if (o.compute_dtype == "fp8") {
    workload.matmul_dtype = DType::kFp8;
  } else {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("--compute-dtype is '", o.compute_dtype, "'; expected bf16 or fp8"));
  }
  if (o.kernels == "torch") {
    workload.kernels = KernelLibrary::kTorch;
  } else if (o.kernels == "te") {
    workload.kernels = KernelLibrary::kTransformerEngine;
  } else if (o.kernels == "auto") {
    // The framework's own kernels: Transformer Engine under Megatron-FSDP, PyTorch's under
    // FSDP1/FSDP2. An unknown --framework is reported by parse_config_options.
    workload.kernels = o.framework == "megatron-fsdp" ? KernelLibrary::kTransformerEngine
                                                      : KernelLibrary::kTorch;
  } else {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("--kernels is '", o.kernels, "'; expected torch, te or auto"));
  }
  return workload;
}

Expected<ModelSplit> model_split_of(const DeviceMesh& mesh, const RunOptions& o) {
  std::int64_t tp = 1;
  std::int64_t ep = 1;
  if (const auto a = mesh.axis_index(kTensorParallelAxis)) {
    tp = mesh.axis_size(*a);
  }
  if (const auto a = mesh.axis_index(kExpertParallelAxis)) {
    ep = mesh.axis_size(*a);
  }
  if (o.sequence_parallel && tp == 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("--sequence-parallel needs a tp axis of more than one rank, got mesh ",
                         to_string(mesh)));
  }
  auto split = ModelSplit::make(tp, ep, o.sequence_parallel, o.capacity_factor);
  if (!split) {
    return split.error().with_context(
        split.error().code() == ErrorCode::kFailedPrecondition ? "--mesh" : "--capacity-factor");
  }
  return split;
}

Expected<PlannedRun> plan_run(const RunOptions& options) {
  FSDP_TRY(const ConfigOptions config_options, parse_config_options(options));
  FSDP_TRY(const ModelSplit split, model_split_of(config_options.mesh, options));
  FSDP_TRY(Model model, load_model_argument(options.model, options.sizes, split));
  FSDP_TRY(FsdpConfig config, assemble_config(config_options));
  FSDP_TRY(Workload workload, make_workload(options));
  FSDP_RETURN_IF_ERROR(check_memory_estimate(config.mesh().size(), model.num_units(),
                                             config.num_microbatches()));
  return PlannedRun{std::move(model), std::move(config), workload};
}

Expected<Schedule> build_run_schedule(const PlannedRun& run) {
  return build_schedule(run.model, run.config, run.workload);
}

Expected<Schedule> build_schedule_from_options(const RunOptions& options) {
  FSDP_TRY(const PlannedRun run, plan_run(options));
  return build_run_schedule(run);
}

}  // namespace fsdp::planner

// SPDX-License-Identifier: Apache-2.0
#include "cli/run_options.h"

#include <filesystem>
#include <utility>

#include "cli/model_argument.h"
#include "cli/resource_estimate.h"
#include "core/base/strings.h"
#include "core/hardware/hardware_json.h"
#include "core/hardware/hardware_presets.h"
#include "core/mesh/axis_names.h"
#include "core/mesh/placements.h"
#include "core/mesh/strategy.h"
#include "core/model/model_split.h"
#include "core/model/model_loader.h"
#include "core/model/model_presets.h"

namespace po = boost::program_options;

namespace fsdp::cli {

void add_run_options(po::options_description& desc, RunOptions* o) {
  desc.add_options()
      ("model", po::value(&o->model)->default_value(o->model),
       "preset name (fsdpsim model --list) or a hub config.json / fsdpsim model JSON file")
      ("mesh", po::value(&o->mesh)->default_value(o->mesh),
       "device mesh, outermost axis first: dp=16, dp_outer=2,dp_inner=8, or with a tensor-"
       "parallel axis 'tp' (not a dp axis: dp=32,tp=8) or an expert-parallel axis 'ep' (a dp "
       "axis of the dense parameters, experts split over it: dp=8,ep=8)")
      ("sequence-parallel", po::bool_switch(&o->sequence_parallel),
       "with a tp axis: Megatron sequence parallelism (all-gather + reduce-scatter around each "
       "tensor-parallel block instead of all-reduces; norms and residuals on 1/tp of the tokens)")
      ("capacity-factor", po::value(&o->capacity_factor)->default_value(o->capacity_factor),
       "with an ep axis: routed tokens per expert as a multiple of the balanced share (expert "
       "inputs padded to capacity), in [1, 64]")
      ("strategy", po::value(&o->strategy)->default_value(o->strategy),
       "noshard | zero1 | zero2 | zero3 | hsdp | hfsdp (hsdp/hfsdp need a 2-axis mesh)")
      ("microbatches", po::value(&o->microbatches)->default_value(o->microbatches),
       "microbatches accumulated per optimizer step")
      ("shard-layout", po::value(&o->shard_layout)->default_value(o->shard_layout),
       "padded | unpadded (unpadded needs a 1-axis mesh)")
      ("block", po::value(&o->block)->default_value(o->block), "rows kept together (BlockAtomic)")
      ("tensor-atomic", po::bool_switch(&o->tensor_atomic),
       "TensorAtomic placements with planned owners (zero1/2/3)")
      ("prefetch", po::value<std::string>()->notifier([o](const std::string& v) {
         o->forward_prefetch = v;
         o->backward_prefetch = v;
       }),
       "both directions: none | next(K) | budget(ELEMENTS) | a reference prefetch size")
      ("forward-prefetch", po::value(&o->forward_prefetch), "forward direction only")
      ("backward-prefetch", po::value(&o->backward_prefetch), "backward direction only")
      ("max-inflight-all-gathers", po::value(&o->max_inflight)->default_value(o->max_inflight),
       "cap on units holding gathered weights, 0 = unlimited")
      ("unified-streams", po::bool_switch(&o->unified_streams),
       "one stream for all-gathers and reduce-scatters")
      ("recompute", po::value(&o->recompute)->default_value(o->recompute)->implicit_value("full"),
       "activation checkpointing: none | full (bare --recompute: every transformer block, as "
       "torchtitan's and Megatron's full) | full-all-units (the embedding and head too) | "
       "selective-op | selective-layer:K (every K-th block) | core-attention")
      ("main-params", po::value(&o->main_params)->default_value(o->main_params),
       "main weight dtype: fp32 | bf16 | fp16")
      ("optimizer", po::value(&o->optimizer)->default_value(o->optimizer),
       "sgd | sgd-momentum | adam")
      ("grad-scale", po::value(&o->grad_scale)->default_value(o->grad_scale),
       "gradient multiplier after DP averaging")
      ("seq-len", po::value(&o->seq_len)->default_value(o->seq_len), "tokens per sequence")
      ("micro-batch-size", po::value(&o->micro_batch_size)->default_value(o->micro_batch_size),
       "sequences per microbatch per rank (per tensor-parallel group with a tp axis)")
      ("compile", po::bool_switch(&o->compile),
       "the model runs compiled (torch.compile): elementwise kernels fused; with "
       "--recompute selective-op a block keeps only the saved outputs backward reads")
      ("compute-dtype", po::value(&o->compute_dtype)->default_value(o->compute_dtype),
       "math of the weight matmuls: bf16 | fp8 (dynamic tensorwise float8; attention stays bf16)")
      ("kernels", po::value(&o->kernels)->default_value(o->kernels),
       "torch (PyTorch eager or compiled, FlashAttention-2) | te (Transformer Engine: fused "
       "kernels, cuDNN attention) | auto (the framework's: te for megatron-fsdp, torch for "
       "fsdp2 and fsdp1)")
      ("param-dtype", po::value(&o->param_dtype),
       "dtype weights are gathered and held unsharded (and computed) in: bf16 | fp32 "
       "(default: the model's parameter dtype); fp32 matmuls run at the fp32 (non-tensor-core) "
       "peak, as PyTorch's default allow_tf32=False does")
      ("reduce-dtype", po::value(&o->reduce_dtype),
       "dtype gradients are reduce-scattered in: fp32 | bf16 (default: the gradient dtype)")
      ("fp8-all-gather", po::bool_switch(&o->fp8_all_gather),
       "weights all-gathered and held unsharded in fp8 (torchao float8; needs --compute-dtype "
       "fp8); the embedding and the output head, which run no fp8 GEMM, stay in the compute dtype")
      ("framework", po::value(&o->framework)->default_value(o->framework),
       "megatron-fsdp (DBuffer) | fsdp2 (all-gather output + per-parameter copy-out) | fsdp1 "
       "(flat parameters): buffer lifetimes, copies, loss and optimizer temporaries")
      ("reshard-after-forward",
       po::value(&o->reshard_after_forward)->default_value(o->reshard_after_forward),
       "which transformer blocks free their gathered weights after forward: all | all-but-last "
       "(torchtitan) | none");
  add_model_size_options(desc, &o->sizes);
}

std::optional<std::string> run_option_conflict(const po::variables_map& vm, const RunOptions& o) {
  for (const char* one : {"forward-prefetch", "backward-prefetch"}) {
    if (vm.count("prefetch") != 0 && vm.count(one) != 0) {
      return str_cat("--prefetch sets both directions and conflicts with --", one,
                     "; give --forward-prefetch and --backward-prefetch instead");
    }
  }
  if (o.tensor_atomic && o.shard_layout == "unpadded") {
    return std::string(
        "--tensor-atomic places whole tensors and conflicts with --shard-layout unpadded");
  }
  if (o.tensor_atomic && o.block != 1) {
    return str_cat("--tensor-atomic places whole tensors and conflicts with --block ", o.block,
                   "; expected --block 1 or no --block");
  }
  return std::nullopt;
}

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
  FSDP_TRY(std::string contents, read_text_file(text));
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

}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
#include "cli/run_options.h"

#include <algorithm>

#include "core/base/strings.h"
#include "planner/run_profile.h"

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

void add_config_options(po::options_description& desc, ConfigArguments* args) {
  desc.add_options()
      ("config", po::value(&args->config_path),
       "a torchtitan job config (train_configs/*.toml): its model, batch, parallelism, "
       "checkpointing, compile, float8 and precision fields set the run options; options given "
       "on the command line win; the fields not used are listed on stderr")
      ("profile", po::value(&args->profile),
       "a framework's defaults, under --config and the command line: torchtitan (fsdp2, "
       "reshard all-but-last, bf16 params, fp32 reduce, torch kernels) | megatron-fsdp (te "
       "kernels, reshard all, fp32 reduce)");
}

Expected<std::optional<planner::TorchtitanConfig>> layer_config_arguments(
    const po::variables_map& vm, const ConfigArguments& args,
    std::span<const std::string_view> chosen, RunOptions* options) {
  planner::RunOptionsPatch profile;
  if (vm.count("profile") != 0) {
    FSDP_TRY(profile, planner::profile_defaults(args.profile));
  }
  std::optional<planner::TorchtitanConfig> config;
  if (vm.count("config") != 0) {
    FSDP_TRY(config, planner::read_torchtitan_config(args.config_path));
  }
  auto given = [&](std::string_view name) {
    const std::string key(name);
    return std::find(chosen.begin(), chosen.end(), name) != chosen.end() ||
           (vm.count(key) != 0 && !vm[key].defaulted());
  };
  FSDP_RETURN_IF_ERROR(planner::layer_run_options(profile, config ? &*config : nullptr, given,
                                                  options));
  return config;
}

void print_ignored_fields(std::ostream& err, const std::vector<std::string>& fields) {
  if (!fields.empty()) {
    err << "config: ignored fields: " << join(fields, ", ") << "\n";
  }
}

}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
#include "cli/train_options.h"

#include <optional>
#include <utility>

#include "cli/command.h"
#include "cli/model_argument.h"
#include "planner/resource_estimate.h"
#include "core/base/strings.h"
#include "core/mesh/axis_names.h"
#include "core/policy/recompute_policy.h"

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

// *out = the value of `parsed`, or its error prefixed with the option's name.
template <class T>
Status take(Expected<T> parsed, std::string_view option, T* out) {
  if (!parsed) {
    return parsed.error().with_context(option);
  }
  *out = std::move(*parsed);
  return ok_status();
}

// The decoder of the options: --model's network with the sizes applied, or the small decoder.
Expected<backend::DecoderConfig> decoder_of(const TrainOptions& o) {
  const backend::DecoderConfig& given = o.spec.model;
  if (o.model.empty()) {
    if (o.sizes.heads || o.sizes.kv_heads) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(o.sizes.heads ? "--heads" : "--kv-heads",
                           ": expected --model too (the small decoder has no attention), got no "
                           "--model"));
    }
    backend::DecoderConfig c = given;
    c.layers = o.sizes.layers.value_or(c.layers);
    c.hidden = o.sizes.hidden.value_or(c.hidden);
    c.ffn = o.sizes.ffn.value_or(c.ffn);
    c.vocab = o.sizes.vocab.value_or(c.vocab);
    return c;
  }
  std::string name;
  Expected<HubArch> loaded = load_arch_argument(o.model, &name);
  if (!loaded) {
    return loaded.error().with_context("--model");
  }
  HubArch arch = std::move(loaded).value();
  HubOverrides sizes = o.sizes;
  sizes.dtype = DType::kFp32;  // the backends train in fp32 (the activation widths follow)
  FSDP_TRY(arch, apply_hub_overrides(std::move(arch), sizes));
  auto config = backend::decoder_config_of_arch(arch, name, given.seq_len, given.micro_batch_size,
                                                given.seed);
  if (!config) {
    return config.error().with_context("--model");
  }
  config->capacity_factor = given.capacity_factor;
  return config;
}

}  // namespace

void add_train_options(po::options_description& desc, TrainOptions* o) {
  exec::TrainSpec& spec = o->spec;
  // clang-format off
  desc.add_options()
      ("model", po::value(&o->model),
       "a Llama-family network to train: a preset (fsdpsim model --list) or a hub config.json "
       "of model_type llama, mistral, qwen2 or mixtral (top-k routed experts); --layers, "
       "--hidden, --ffn, --heads, --kv-heads and --vocab shrink it. Default: the small decoder (2 layers, hidden 32, ffn 64, vocab "
       "64; no attention, so no --heads / --kv-heads)")
      ("mesh", po::value(&o->mesh)->default_value("dp=4"),
       "device mesh, outermost axis first: dp=4 or outer=2,inner=2; an axis named tp splits "
       "the --model network over its ranks, Megatron style (dp=2,tp=2: FSDP over dp of 2-way "
       "tensor parallelism); an axis named ep splits a mixtral --model's experts over its ranks "
       "(dp=2,ep=2: 4 data ranks, each holding half the experts, tokens sent to them by "
       "all-to-all; not together with tp)")
      ("capacity-factor",
       po::value(&spec.model.capacity_factor)->default_value(spec.model.capacity_factor),
       "with experts: each expert takes at most top_k x this x tokens / experts of a "
       "microbatch's routed tokens (the first in token order; the rest are dropped), a whole "
       "number; in [1, 64]")
      ("strategy", po::value(&o->strategy)->default_value("zero3"),
       "noshard | zero1 | zero2 | zero3 | hsdp | hfsdp (hsdp/hfsdp need a 2-axis mesh)")
      ("shard-layout", po::value(&o->shard_layout)->default_value("padded"),
       "padded | unpadded (unpadded needs a 1-axis mesh)")
      ("tensor-atomic", po::bool_switch(&spec.tensor_atomic),
       "TensorAtomic placements with planned owners (zero1/2/3)")
      ("block", po::value(&spec.block_size)->default_value(1), "rows kept together (BlockAtomic)")
      ("microbatches", po::value(&spec.microbatches)->default_value(1),
       "microbatches accumulated per optimizer step")
      ("prefetch", po::value(&o->prefetch)->default_value("next(1)"),
       "both directions: none | next(K) | budget(ELEMENTS)")
      ("max-inflight-all-gathers", po::value(&o->max_inflight)->default_value(0),
       "cap on units holding gathered weights, 0 = unlimited")
      ("unified-streams", po::bool_switch(&o->unified_streams),
       "one stream for all-gathers and reduce-scatters")
      ("recompute", po::value(&o->recompute)->default_value(o->recompute)->implicit_value("full"),
       "activation checkpointing: none | full (bare --recompute: every transformer block, as "
       "torchtitan's and Megatron-LM's full) | full-all-units (the embedding and head too); the "
       "training backends recompute whole units only")
      ("main-params", po::value(&o->main_params)->default_value("fp32"),
       "main weight dtype (real training needs fp32)")
      ("optimizer", po::value(&o->optimizer)->default_value("adam"), "sgd | sgd-momentum | adam")
      ("lr", po::value(&spec.hyper.lr)->default_value(1e-2), "learning rate")
      ("grad-scale", po::value(&spec.grad_scale)->default_value(1.0),
       "gradient multiplier after DP averaging")
      ("seed", po::value(&spec.model.seed)->default_value(1), "parameter and data seed")
      ("seq-len", po::value(&spec.model.seq_len)->default_value(16), "tokens per sample")
      ("micro-batch-size", po::value(&spec.model.micro_batch_size)->default_value(2),
       "samples per microbatch per rank")
      ("timeout", po::value(&spec.timeout_s)->default_value(60.0),
       "seconds a collective may take before every rank stops with an error");
  // clang-format on
  add_model_size_options(desc, &o->sizes);
}

Expected<exec::TrainSpec> make_train_spec(const TrainOptions& o) {
  exec::TrainSpec spec = o.spec;
  FSDP_TRY(spec.model, decoder_of(o));
  FSDP_RETURN_IF_ERROR(take(parse_run_mesh(o.mesh), "--mesh", &spec.mesh));
  // A tp axis splits the model (docs/design/parallelism.md, "Training it for real").
  spec.model.tp = exec::tensor_parallel_size(spec.mesh);
  spec.model.ep = exec::expert_parallel_size(spec.mesh);
  FSDP_RETURN_IF_ERROR(take(parse_strategy(o.strategy), "--strategy", &spec.strategy));
  FSDP_RETURN_IF_ERROR(
      take(parse_shard_layout(o.shard_layout), "--shard-layout", &spec.shard_layout));
  // TensorAtomic places whole tensors (docs/cli.md, "Command lines"): a row layout or block size
  // given with it would be silently dropped.
  if (spec.tensor_atomic && spec.shard_layout != ShardLayout::kPadded) {
    return Error(ErrorCode::kInvalidArgument,
                 "--tensor-atomic places whole tensors and conflicts with --shard-layout unpadded");
  }
  if (spec.tensor_atomic && spec.block_size != 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("--tensor-atomic places whole tensors and conflicts with --block ",
                         spec.block_size, "; expected --block 1 or no --block"));
  }
  FSDP_TRY(const RecomputePolicy recompute, RecomputePolicy::parse(o.recompute));
  // The decoders recompute whole units (docs/design/backends.md): full recomputes the
  // transformer blocks, full-all-units also the embedding and head.
  if (!recompute.is_none() && !recompute.is_full() && !recompute.is_full_all_units()) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("train --recompute is '", to_string(recompute),
                         "'; the training backends recompute whole units only: expected none, "
                         "full or full-all-units"));
  }
  spec.recompute = recompute;
  PrefetchPolicy prefetch;
  FSDP_RETURN_IF_ERROR(take(parse_prefetch_policy(o.prefetch), "--prefetch", &prefetch));
  FSDP_RETURN_IF_ERROR(
      take(SchedulePolicy::make(prefetch, prefetch, o.max_inflight, o.unified_streams),
           "--max-inflight-all-gathers", &spec.schedule));
  FSDP_RETURN_IF_ERROR(take(parse_optimizer_kind(o.optimizer), "--optimizer", &spec.optimizer));
  FSDP_RETURN_IF_ERROR(take(parse_dtype(o.main_params), "--main-params", &spec.main_params));
  return spec;
}

Status check_train_memory(const exec::TrainSpec& spec, std::int64_t ranks_here, bool check) {
  FSDP_TRY(const Model model, backend::decoder_model(spec.model));
  std::int64_t per_token = 0;
  for (const UnitCheckpoint& c : checkpoints_of(spec.recompute, model, /*compiled=*/false)) {
    per_token += c.kept;
  }
  return planner::check_training_memory(model.num_parameters(), per_token,
                               spec.model.seq_len * spec.model.micro_batch_size, spec.microbatches,
                               ranks_here, check);
}

}  // namespace fsdp::cli

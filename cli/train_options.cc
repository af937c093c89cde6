// SPDX-License-Identifier: Apache-2.0
#include "cli/train_options.h"

#include <utility>

#include "cli/command.h"
#include "core/base/strings.h"

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

}  // namespace

void add_train_options(po::options_description& desc, TrainOptions* o) {
  exec::TrainSpec& spec = o->spec;
  desc.add_options()
      ("mesh", po::value(&o->mesh)->default_value("dp=4"),
       "device mesh, outermost axis first: dp=4 or outer=2,inner=2")
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
      ("recompute", po::bool_switch(&spec.recompute), "activation recomputation in every unit")
      ("main-params", po::value(&o->main_params)->default_value("fp32"),
       "main weight dtype (real training needs fp32)")
      ("optimizer", po::value(&o->optimizer)->default_value("adam"), "sgd | sgd_momentum | adam")
      ("lr", po::value(&spec.hyper.lr)->default_value(1e-2), "learning rate")
      ("grad-scale", po::value(&spec.grad_scale)->default_value(1.0),
       "gradient multiplier after DP averaging")
      ("seed", po::value(&spec.model.seed)->default_value(1), "parameter and data seed")
      ("layers", po::value(&spec.model.layers)->default_value(2), "decoder blocks")
      ("hidden", po::value(&spec.model.hidden)->default_value(32), "hidden size")
      ("ffn", po::value(&spec.model.ffn)->default_value(64), "feed-forward size")
      ("vocab", po::value(&spec.model.vocab)->default_value(64), "vocabulary size")
      ("seq-len", po::value(&spec.model.seq_len)->default_value(16), "tokens per sample")
      ("micro-batch-size", po::value(&spec.model.micro_batch_size)->default_value(2),
       "samples per microbatch per rank")
      ("timeout", po::value(&spec.timeout_s)->default_value(60.0),
       "seconds a collective may take before every rank stops with an error");
}

Expected<exec::TrainSpec> make_train_spec(const TrainOptions& o) {
  exec::TrainSpec spec = o.spec;
  FSDP_RETURN_IF_ERROR(take(parse_device_mesh(o.mesh), "--mesh", &spec.mesh));
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
  PrefetchPolicy prefetch;
  FSDP_RETURN_IF_ERROR(take(parse_prefetch_policy(o.prefetch), "--prefetch", &prefetch));
  FSDP_RETURN_IF_ERROR(
      take(SchedulePolicy::make(prefetch, prefetch, o.max_inflight, o.unified_streams),
           "--max-inflight-all-gathers", &spec.schedule));
  FSDP_RETURN_IF_ERROR(take(parse_optimizer_kind(o.optimizer), "--optimizer", &spec.optimizer));
  FSDP_RETURN_IF_ERROR(take(parse_dtype(o.main_params), "--main-params", &spec.main_params));
  return spec;
}

}  // namespace fsdp::cli

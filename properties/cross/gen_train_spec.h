// SPDX-License-Identifier: Apache-2.0
// RapidCheck generator of tiny real-training requests (exec::TrainSpec) for the cross-checks of
// the simulator against the CPU backend: decoders of 1-2 layers, hidden 4-16, vocab 8-32, seq
// 2-8; every strategy on 1-8 ranks (HSDP/HFSDP on 2x2 and 2x4 meshes); padded layouts, unpadded
// on 1-axis meshes, TensorAtomic ZeRO-1/2/3, block sizes 1/2/4 (every dimension is a multiple of
// 4, so each block size divides every tensor's rows); 1-4 microbatches, prefetch next(0..2) each
// way, unified or separate streams, recompute, the three optimizers; 2 steps; half of them the
// Llama network (GQA or multi-head attention of head size 4, llama or qwen2 biases), a third of
// those whose kv heads are even with a tp=2 axis, and a sixth of the sharded ones Mixtral networks
// with an ep=2 axis. Every generated spec passes prepare_training.
#pragma once

#include "backends/exec/trainer.h"
#include "core/base/strings.h"
#include "core/mesh/strategy.h"
#include "core/policy/optimizer_policy.h"
#include "core/policy/schedule_policy.h"

#include <rapidcheck.h>

#include <cstdint>
#include <ostream>
#include <string>

namespace fsdp::exec {

// RapidCheck prints counter-examples with this (found by argument-dependent lookup).
inline void showValue(const TrainSpec& s, std::ostream& os) {
  os << to_string(s.strategy) << (s.tensor_atomic ? "(tensor-atomic)" : "") << " mesh " << s.mesh
     << " " << to_string(s.shard_layout) << " block " << s.block_size << " mb " << s.microbatches
     << " " << to_string(s.schedule)
     << (s.recompute.is_none() ? "" : " recompute " + to_string(s.recompute)) << " "
     << to_string(s.optimizer) << " grad_scale " << s.grad_scale << " | decoder V " << s.model.vocab
     << " H " << s.model.hidden << " F " << s.model.ffn << " L " << s.model.layers << " S "
     << s.model.seq_len << " B " << s.model.micro_batch_size << " seed " << s.model.seed
     << (s.model.tp > 1 ? " tp " : "")
     << (s.model.tp > 1 ? std::to_string(s.model.tp) : std::string())
     << (s.model.ep > 1 ? " ep " : "")
     << (s.model.ep > 1 ? std::to_string(s.model.ep) : std::string());
  if (s.model.family == backend::DecoderFamily::kLlama) {
    os << " | " << s.model.model_type << " heads " << s.model.heads << "/" << s.model.kv_heads
       << " x " << s.model.head_dim << (s.model.qkv_bias ? " qkv-bias" : "")
       << (s.model.o_bias ? " o/mlp-bias" : "");
  }
}

}  // namespace fsdp::exec

namespace fsdp::gen {

inline PrefetchPolicy prefetch_of(std::int64_t units) {
  return units == 0 ? PrefetchPolicy::none() : PrefetchPolicy::next_units(units).value();
}

inline rc::Gen<exec::TrainSpec> train_spec() {
  return rc::gen::exec([] {
    exec::TrainSpec s;
    s.model.layers = *rc::gen::inRange<std::int64_t>(1, 3);
    s.model.hidden = 4 * *rc::gen::inRange<std::int64_t>(1, 5);
    s.model.vocab = 4 * *rc::gen::inRange<std::int64_t>(2, 9);
    s.model.ffn = 4 * *rc::gen::inRange<std::int64_t>(1, 5);
    s.model.seq_len = *rc::gen::inRange<std::int64_t>(2, 9);
    s.model.micro_batch_size = *rc::gen::inRange<std::int64_t>(1, 3);
    s.model.seed = *rc::gen::inRange<std::uint64_t>(1, 1000);
    if (*rc::gen::arbitrary<bool>()) {
      // The Llama network (backends/model/decoder.h) of the same sizes: heads of size 4 keep
      // every row count a multiple of 4; grouped or multi-head; biases or none.
      HubArch a;
      a.model_type = *rc::gen::element(std::string("llama"), std::string("qwen2"));
      a.hidden = s.model.hidden;
      a.vocab = s.model.vocab;
      a.layers = s.model.layers;
      a.intermediate = s.model.ffn;
      a.heads = *rc::gen::element<std::int64_t>(1, 2, 4);
      a.kv_heads = *rc::gen::element<std::int64_t>(1, a.heads);
      a.qk_head_dim = 4;
      a.v_head_dim = 4;
      a.qkv_bias = a.model_type == "qwen2";
      a.o_bias = a.model_type == "llama" && *rc::gen::arbitrary<bool>();
      a.mlp_bias = a.o_bias;
      a.rope_theta = *rc::gen::element(10000.0, 500000.0);
      a.rms_norm_eps = 1e-5;
      s.model = backend::decoder_config_of_arch(a, "gen-llama", s.model.seq_len,
                                                s.model.micro_batch_size, s.model.seed)
                    .value();
    }
    s.strategy = *rc::gen::element(Strategy::kNoShard, Strategy::kZero1, Strategy::kZero2,
                                   Strategy::kZero3, Strategy::kZero3, Strategy::kHsdp,
                                   Strategy::kHfsdp);
    if (strategy_mesh_ndim(s.strategy) == 2) {
      s.mesh = parse_device_mesh(*rc::gen::element(std::string("outer=2,inner=2"),
                                                   std::string("outer=2,inner=4")))
                   .value();
    } else {
      s.mesh = one_axis_mesh(*rc::gen::inRange<std::int64_t>(1, 9));
      s.shard_layout = *rc::gen::element(ShardLayout::kPadded, ShardLayout::kUnpadded);
      s.tensor_atomic = s.strategy != Strategy::kNoShard && *rc::gen::arbitrary<bool>();
    }
    s.block_size = *rc::gen::element<std::int64_t>(1, 1, 2, 4);
    // Tensor parallelism beside FSDP (issue 19): a Llama network whose heads and kv heads tp=2
    // divides gets a tp=2 axis innermost on a third of the cases, up to 8 ranks in all. Its
    // slices have ffn / 2 and vocab / 2 rows, multiples of 2 only: blocks of 1 or 2.
    if (s.model.family == backend::DecoderFamily::kLlama && s.model.kv_heads % 2 == 0 &&
        *rc::gen::element(false, false, true)) {
      const std::string dp_axes = strategy_mesh_ndim(s.strategy) == 2
                                      ? std::string("outer=2,inner=2")
                                      : str_cat("dp=", *rc::gen::inRange<std::int64_t>(1, 5));
      s.mesh = parse_device_mesh(dp_axes + ",tp=2").value();
      s.model.tp = 2;
      s.block_size = *rc::gen::element<std::int64_t>(1, 2);
      if (s.model.qkv_bias) {
        // The k_proj bias's gradient is zero up to rounding (a shift of every key leaves the
        // softmax alone); Adam's steps of its rounding noise differ with the tp sums' order.
        s.optimizer = *rc::gen::element(OptimizerKind::kSgd, OptimizerKind::kSgdMomentum);
      }
    }
    // Expert parallelism beside FSDP (issue 19): on a sixth of the cases with a sharding
    // strategy (no-shard would all-reduce over dp x ep in two steps, which the planner does not
    // run), a Mixtral network of the same sizes (2 or 4 experts) with an ep=2 axis
    // innermost; a sequence length rounded up to a multiple of the experts. SGD: Adam amplifies the
    // rounding of gradient sums that nearly cancel, which the ep sums' order changes
    // (docs/design/parallelism.md).
    if (s.strategy != Strategy::kNoShard && s.model.tp == 1 &&
        *rc::gen::element(false, false, false, false, false, true)) {
      HubArch a;
      a.model_type = "mixtral";
      a.hidden = s.model.hidden;
      a.vocab = s.model.vocab;
      a.layers = s.model.layers;
      a.intermediate = s.model.ffn;
      a.heads = *rc::gen::element<std::int64_t>(1, 2);
      a.kv_heads = 1;
      a.qk_head_dim = s.model.hidden / a.heads;
      a.v_head_dim = a.qk_head_dim;
      a.experts = *rc::gen::element<std::int64_t>(2, 4);
      a.top_k = *rc::gen::inRange<std::int64_t>(1, a.experts);
      a.expert_intermediate = a.intermediate;
      a.rope_theta = 10000.0;
      a.rms_norm_eps = 1e-5;
      // A sequence length that is a multiple of the experts keeps the slots whole.
      s.model.seq_len = (s.model.seq_len + a.experts - 1) / a.experts * a.experts;
      s.model = backend::decoder_config_of_arch(a, "gen-mixtral", s.model.seq_len,
                                                s.model.micro_batch_size, s.model.seed)
                    .value();
      const std::string dp_axes = strategy_mesh_ndim(s.strategy) == 2
                                      ? std::string("outer=2,inner=2")
                                      : str_cat("dp=", *rc::gen::inRange<std::int64_t>(1, 5));
      s.mesh = parse_device_mesh(dp_axes + ",ep=2").value();
      s.model.ep = 2;
      s.shard_layout = ShardLayout::kPadded;
      s.tensor_atomic = false;
      s.block_size = 1;  // the router has `experts` rows
    }
    s.microbatches = *rc::gen::inRange<std::int64_t>(1, 5);
    const std::int64_t forward = *rc::gen::inRange<std::int64_t>(0, 3);
    const std::int64_t backward = *rc::gen::inRange<std::int64_t>(0, 3);
    s.schedule = SchedulePolicy::make(prefetch_of(forward), prefetch_of(backward),
                                      /*max_inflight=*/0, *rc::gen::arbitrary<bool>())
                     .value();
    // The modes the training backends run (docs/models.md): the blocks only, or every unit.
    s.recompute = *rc::gen::element(RecomputePolicy{}, RecomputePolicy::full(),
                                    RecomputePolicy::full_all_units());
    if (s.model.ep > 1) {
      s.optimizer = *rc::gen::element(OptimizerKind::kSgd, OptimizerKind::kSgdMomentum);
    } else if (s.model.tp == 1 || !s.model.qkv_bias) {
      s.optimizer =
          *rc::gen::element(OptimizerKind::kAdam, OptimizerKind::kSgd, OptimizerKind::kSgdMomentum);
    }
    s.grad_scale = *rc::gen::element(0.5, 1.0, 2.0);
    s.steps = 2;
    s.timeout_s = 60.0;
    return s;
  });
}

}  // namespace fsdp::gen

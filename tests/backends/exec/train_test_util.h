// SPDX-License-Identifier: Apache-2.0
// The tiny training spec the executor tests (CPU and GPU) train: a 2-layer decoder of hidden 8 on
// 4-token samples, 3 steps, small enough for many cases under the sanitizers; the Llama network of
// that size; setups with explicit placements.
#pragma once

#include "backends/exec/trainer.h"
#include "core/policy/config_options.h"
#include "core/schedule/schedule_builder.h"
#include "tests/backends/model/decoder_test_util.h"

namespace fsdp::exec::testing {

inline TrainSpec tiny_train_spec() {
  TrainSpec spec;
  spec.model.vocab = 16;
  spec.model.hidden = 8;
  spec.model.ffn = 16;
  spec.model.layers = 2;
  spec.model.seq_len = 4;
  spec.model.micro_batch_size = 2;
  spec.model.seed = 7;
  spec.steps = 3;
  spec.timeout_s = 30.0;
  spec.hyper.lr = 0.05;
  return spec;
}

// The Llama-family network of the same tiny size (hidden 8, 2 heads sharing one kv head of
// size 4, ffn 16, every bias so each gradient path is exercised), keeping the data sizes and seed
// of `base`.
inline backend::DecoderConfig tiny_train_llama(const backend::DecoderConfig& base) {
  HubArch a = backend::testing::tiny_llama_arch(/*biases=*/true);
  a.vocab = base.vocab;
  a.intermediate = 16;
  return backend::decoder_config_of_arch(a, "tiny-llama", base.seq_len, base.micro_batch_size,
                                         base.seed)
      .value();
}

// The Llama network tp = 2 splits (backend::testing::tiny_tp_llama_arch; ffn 16, an odd
// vocabulary so the last tp rank's slice holds a padding row), keeping the data sizes and seed
// of `base`, split for the tp axis of `mesh`.
inline backend::DecoderConfig tiny_tp_llama(const backend::DecoderConfig& base,
                                            const DeviceMesh& mesh) {
  HubArch a = backend::testing::tiny_tp_llama_arch();
  a.vocab = base.vocab - 1;
  a.intermediate = 16;
  backend::DecoderConfig c = backend::decoder_config_of_arch(a, "tiny-tp-llama", base.seq_len,
                                                             base.micro_batch_size, base.seed)
                                 .value();
  c.tp = tensor_parallel_size(mesh);
  return c;
}

// The Mixtral network ep splits (backend::testing::tiny_moe_arch: 4 experts, top 2), keeping the
// data sizes and seed of `base`, split for the ep axis of `mesh`; with `base`'s tokens per
// microbatch even, every expert has whole capacity slots and some copies are dropped.
inline backend::DecoderConfig tiny_moe(const backend::DecoderConfig& base, const DeviceMesh& mesh) {
  HubArch a = backend::testing::tiny_moe_arch();
  a.vocab = base.vocab;
  backend::DecoderConfig c =
      backend::decoder_config_of_arch(a, "tiny-moe", base.seq_len, base.micro_batch_size, base.seed)
          .value();
  c.ep = expert_parallel_size(mesh);
  return c;
}

// The setup of `spec` with explicit placements (ConfigOptions::placements) in place of the
// strategy's: e.g. ZeRO-3 on both DP axes of dp_outer=2,dp_inner=2 ([S, S]), which no strategy
// names. The model and initial values are the spec's.
inline TrainSetup setup_with_placements(const TrainSpec& spec, const Placements& placements) {
  TrainSetup setup = prepare_training(spec).value();
  ConfigOptions options = config_options_of(spec).value();
  options.placements = placements;
  setup.config = assemble_config(options).value();
  Workload workload;
  workload.seq_len = spec.model.seq_len;
  workload.micro_batch_size = spec.model.micro_batch_size;
  setup.schedule = build_schedule(setup.model, setup.config, workload).value();
  return setup;
}

// [S, S] on the first two axes of `mesh` (every list).
inline Placements shard_on_two_axes(const DeviceMesh& mesh) {
  const Placement sh = Placement::shard();
  return Placements::make(mesh, {std::int64_t{0}, std::int64_t{1}}, {sh, sh}, {sh, sh}, {sh, sh})
      .value();
}

}  // namespace fsdp::exec::testing

// SPDX-License-Identifier: Apache-2.0
// The tiny training spec the executor tests (CPU and GPU) train: a 2-layer decoder of hidden 8 on
// 4-token samples, 3 steps, small enough for many cases under the sanitizers.
#pragma once

#include "backends/exec/trainer.h"

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

}  // namespace fsdp::exec::testing

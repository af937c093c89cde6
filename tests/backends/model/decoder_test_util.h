// SPDX-License-Identifier: Apache-2.0
// Test helpers for the decoder: a tiny config, and the loss and gradients of one microbatch run
// through the public HostDecoder API (the path the executor takes).
#pragma once

#include <cstdint>
#include <vector>

#include "backends/model/decoder.h"

#include <gtest/gtest.h>

namespace fsdp::backend::testing {

// Small enough for finite differences over every parameter under ASan.
inline DecoderConfig tiny_config() {
  DecoderConfig c;
  c.vocab = 7;
  c.hidden = 6;
  c.ffn = 10;
  c.layers = 2;
  c.seq_len = 5;
  c.micro_batch_size = 2;
  c.seed = 42;
  return c;
}

inline std::vector<const float*> const_ptrs(const std::vector<std::vector<float>>& unit) {
  std::vector<const float*> out;
  for (const auto& p : unit) {
    out.push_back(p.data());
  }
  return out;
}

inline std::vector<float*> mutable_ptrs(std::vector<std::vector<float>>& unit) {
  std::vector<float*> out;
  for (auto& p : unit) {
    out.push_back(p.data());
  }
  return out;
}

// Forward over every unit of microbatch `mb`, then (when `grads` is not null) backward over every
// unit in reverse, overwriting *grads with d(local loss of mb) / d(params).
inline void run_microbatch(HostDecoder& decoder, const ParamValues& params, std::int32_t mb,
                           ParamValues* grads) {
  const auto num_units = static_cast<std::int32_t>(params.size());
  for (std::int32_t u = 0; u < num_units; ++u) {
    decoder.forward(u, mb, const_ptrs(params[static_cast<std::size_t>(u)]));
  }
  if (grads == nullptr) {
    return;
  }
  *grads = params;
  for (std::int32_t u = num_units; u-- > 0;) {
    const auto i = static_cast<std::size_t>(u);
    decoder.backward(u, mb, const_ptrs(params[i]), mutable_ptrs((*grads)[i]));
  }
}

// The loss of the single microbatch of step 0 on rank 0 of 1, and its gradients when asked.
inline double loss_and_grads(const DecoderConfig& config, const ParamValues& params,
                             ParamValues* grads = nullptr) {
  auto made = HostDecoder::make(config, /*num_microbatches=*/1, /*data_rank=*/0,
                                /*data_world=*/1);
  EXPECT_TRUE(made.has_value());
  HostDecoder& decoder = **made;
  decoder.begin_step(0);
  run_microbatch(decoder, params, 0, grads);
  return decoder.step_loss();
}

}  // namespace fsdp::backend::testing

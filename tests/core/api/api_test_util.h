// SPDX-License-Identifier: Apache-2.0
// Module trees for the training-API tests: a decoder-shaped tree with container modules and
// submodules, plus small helpers to wrap modules and run microbatch scopes.
#pragma once

#include "core/api/fsdp_context.h"
#include "core/api/fully_shard.h"
#include "core/api/microbatch.h"
#include "tests/core/schedule/schedule_test_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::testing {

inline Unit module_of(std::string name, std::int32_t parent, std::vector<Param> params,
                      std::int64_t matmul_flops = 0, UnitActivations acts = {}) {
  return Unit::make(std::move(name), parent, std::move(params), UnitFlops{matmul_flops, 0}, acts)
      .value();
}

// model                          (container, no parameters)
//   embed                        embed.weight [16, 8]
//   layers                       (container)
//     layers.0                   layers.0.norm [8]           flops 10
//       layers.0.attn            layers.0.attn.w [8, 8]      flops 100, stored 32
//       layers.0.mlp             layers.0.mlp.w [8, 8] fp32  flops 200, stored 64
//     layers.1                   (same shape as layers.0)
//   head                         head.w [16, 8]              flops 300
// Stored in DFS pre-order; bf16 unless noted.
inline Model decoder_tree() {
  std::vector<Unit> m;
  m.push_back(module_of("model", Unit::kNoParent, {}));
  m.push_back(module_of("embed", 0, {make_param("embed.weight", {16, 8})}));
  m.push_back(module_of("layers", 0, {}));
  for (int i = 0; i < 2; ++i) {
    const std::string p = "layers." + std::to_string(i);
    const auto layer = static_cast<std::int32_t>(m.size());
    m.push_back(module_of(p, 2, {make_param(p + ".norm", {8})}, 10));
    m.push_back(module_of(p + ".attn", layer, {make_param(p + ".attn.w", {8, 8})}, 100, {32, 8}));
    m.push_back(module_of(p + ".mlp", layer, {make_param(p + ".mlp.w", {8, 8}, DType::kFp32)},
                          200, {64, 8}));
  }
  m.push_back(module_of("head", 0, {make_param("head.w", {16, 8})}, 300));
  return Model::make("decoder", std::move(m)).value();
}

// The error message of `e`, or "(no error)" when it holds a value.
template <class T>
std::string error_of(const Expected<T>& e) {
  return e.has_value() ? "(no error)" : e.error().message();
}

inline Placements zero3_placements(const DeviceMesh& mesh) {
  return make_strategy_placements(Strategy::kZero3, mesh).value();
}

// Runs `n` microbatch scopes, the last one with is_last = true.
inline void run_microbatches(FsdpContext& ctx, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    auto mb = microbatch(ctx, /*is_last=*/i == n - 1);
    ASSERT_TRUE(mb.has_value()) << mb.error().message();
    EXPECT_EQ(mb->index(), i);
  }
}

}  // namespace fsdp::testing

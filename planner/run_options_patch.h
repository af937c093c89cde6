// SPDX-License-Identifier: Apache-2.0
// RunOptionsPatch: some of a RunOptions' fields, each set or not, as a framework profile or a job
// config file determines them (planner/run_profile.h, planner/torchtitan_config.h). Front ends
// layer them: profile defaults < config file < options the user gave (docs/cli.md, "Config files
// and profiles"). A plain value type.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/run_options.h"

namespace fsdp::planner {

struct RunOptionsPatch {
  std::optional<std::string> model;
  std::optional<std::string> mesh;
  std::optional<std::string> strategy;
  std::optional<std::int64_t> microbatches;
  std::optional<std::string> recompute;
  std::optional<std::string> main_params;
  std::optional<std::string> optimizer;
  std::optional<std::int64_t> seq_len;
  std::optional<std::int64_t> micro_batch_size;
  std::optional<bool> compile;
  std::optional<std::string> compute_dtype;
  std::optional<std::string> kernels;
  std::optional<std::string> param_dtype;
  std::optional<std::string> reduce_dtype;
  std::optional<bool> fp8_all_gather;
  std::optional<std::string> framework;
  std::optional<std::string> reshard_after_forward;
  std::optional<bool> sequence_parallel;
  friend bool operator==(const RunOptionsPatch&, const RunOptionsPatch&) = default;
};

// The CLI option names ("seq-len", "micro-batch-size", ...) of the fields `patch` sets, in
// declaration order.
std::vector<std::string> patched_options(const RunOptionsPatch& patch);

// `top`'s set fields over `base`'s.
RunOptionsPatch layer(const RunOptionsPatch& base, const RunOptionsPatch& top);

// Writes each set field of `patch` into `options`, except those whose CLI option name
// `given(name)` says the user gave. `given` may be empty (nothing given).
void apply_patch(const RunOptionsPatch& patch,
                 const std::function<bool(std::string_view option)>& given, RunOptions* options);

}  // namespace fsdp::planner

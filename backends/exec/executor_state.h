// SPDX-License-Identifier: Apache-2.0
// ExecutorState: what one rank's executor holds between steps that a checkpoint must keep (the
// fp32 main weights and optimizer states of this rank's optimizer shards, and the optimizer step
// count), as slices of the model's tensors: unit and parameter index in Model order plus an
// element range within the flattened (row-major) tensor. Layout coordinates never appear, so a
// state exported under one mesh/strategy/layout can be imported under another
// (docs/design/backends.md, "Checkpoints").
#pragma once

#include <cstdint>
#include <vector>

#include "core/layout/global_layout.h"

namespace fsdp::exec {

// Elements [range.start, range.end()) of parameter `param` of unit `unit`, flattened row-major.
struct TensorSlice {
  std::int32_t unit = 0;
  std::int32_t param = 0;
  Range range;
  friend bool operator==(const TensorSlice&, const TensorSlice&) = default;
};

// One slice's values: `weights` holds range.numel main-weight values, `states` num_states x
// range.numel optimizer-state values, state-major (Adam: exp_avg then exp_avg_sq).
struct TensorShard {
  TensorSlice slice;
  std::vector<float> weights;
  std::vector<float> states;
};

struct ExecutorState {
  std::int64_t steps_done = 0;  // optimizer steps completed (Adam's step count)
  std::int64_t num_states = 0;  // optimizer state values per weight
  std::vector<TensorShard> shards;
};

}  // namespace fsdp::exec

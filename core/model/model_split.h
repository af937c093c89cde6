// SPDX-License-Identifier: Apache-2.0
// ModelSplit: how a mesh's non-FSDP axes divide one model replica (docs/design/parallelism.md):
// tensor parallelism over `tp` ranks (Megatron-LM's column- and row-parallel layers, optionally
// with sequence parallelism) and expert parallelism over `ep` ranks (each holds experts / ep of
// every MoE layer; tokens reach them by all-to-all, with balanced routing padded to
// `capacity_factor` times the balanced share). The hub importer builds the rank-local model of a
// split (core/model/hub_config.h). A value type built by ModelSplit::make.
#pragma once

#include <cstdint>
#include <string>

#include "core/base/expected.h"

namespace fsdp {

class ModelSplit {
 public:
  // Errors (kInvalidArgument): tp or ep < 1; a capacity factor that is not finite or outside
  // [1, 64]. kFailedPrecondition: tp > 1 and ep > 1 together (expert tensor parallelism is not
  // modelled).
  static Expected<ModelSplit> make(std::int64_t tp, std::int64_t ep, bool sequence_parallel,
                                   double capacity_factor = 1.0);
  // tp = ep = 1: the whole model on every rank.
  ModelSplit() = default;

  std::int64_t tp() const { return tp_; }
  std::int64_t ep() const { return ep_; }
  bool sequence_parallel() const { return sequence_parallel_ && tp_ > 1; }
  double capacity_factor() const { return capacity_factor_; }
  bool is_whole() const { return tp_ == 1 && ep_ == 1; }

  friend bool operator==(const ModelSplit&, const ModelSplit&) = default;

 private:
  std::int64_t tp_ = 1;
  std::int64_t ep_ = 1;
  bool sequence_parallel_ = false;
  double capacity_factor_ = 1.0;
};

// "tp=8 sequence-parallel", "ep=8 capacity 1.25", "whole".
std::string to_string(const ModelSplit& split);

}  // namespace fsdp

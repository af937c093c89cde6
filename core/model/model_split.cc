// SPDX-License-Identifier: Apache-2.0
#include "core/model/model_split.h"

#include <cmath>

#include "core/base/strings.h"

namespace fsdp {

Expected<ModelSplit> ModelSplit::make(std::int64_t tp, std::int64_t ep, bool sequence_parallel,
                                      double capacity_factor) {
  if (tp < 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("tensor-parallel size is ", tp, "; expected >= 1"));
  }
  if (ep < 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("expert-parallel size is ", ep, "; expected >= 1"));
  }
  if (!std::isfinite(capacity_factor) || capacity_factor < 1.0 || capacity_factor > 64.0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("capacity factor is ", capacity_factor, "; expected a value in [1, 64]"));
  }
  if (tp > 1 && ep > 1) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("tp=", tp, " with ep=", ep,
                         " is not implemented: expected a tp axis or an ep axis, not both "
                         "(expert tensor parallelism is not modelled)"));
  }
  ModelSplit out;
  out.tp_ = tp;
  out.ep_ = ep;
  out.sequence_parallel_ = sequence_parallel;
  out.capacity_factor_ = capacity_factor;
  return out;
}

std::string to_string(const ModelSplit& split) {
  if (split.is_whole()) {
    return "whole";
  }
  std::string out;
  if (split.tp() > 1) {
    out = str_cat("tp=", split.tp(), split.sequence_parallel() ? " sequence-parallel" : "");
  }
  if (split.ep() > 1) {
    out = str_cat("ep=", split.ep(), " capacity ", split.capacity_factor());
  }
  return out;
}

}  // namespace fsdp

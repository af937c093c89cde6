// SPDX-License-Identifier: Apache-2.0
#include "core/schedule/op.h"

namespace fsdp {

std::string_view to_string(StreamKind stream) {
  switch (stream) {
    case StreamKind::kCompute:
      return "compute";
    case StreamKind::kAllGather:
      return "all-gather";
    case StreamKind::kReduceScatter:
      return "reduce-scatter";
  }
  return "?";
}

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kAlloc:
      return "alloc";
    case OpKind::kFree:
      return "free";
    case OpKind::kAllGather:
      return "all-gather";
    case OpKind::kReduceScatter:
      return "reduce-scatter";
    case OpKind::kAllReduce:
      return "all-reduce";
    case OpKind::kAllToAll:
      return "all-to-all";
    case OpKind::kForward:
      return "forward";
    case OpKind::kBackward:
      return "backward";
    case OpKind::kRecompute:
      return "recompute";
    case OpKind::kGradCopy:
      return "grad-copy";
    case OpKind::kCast:
      return "cast";
    case OpKind::kOptimizerStep:
      return "optimizer-step";
    case OpKind::kGradAccumulate:
      return "grad-accumulate";
    case OpKind::kRecord:
      return "record";
    case OpKind::kWait:
      return "wait";
  }
  return "?";
}

std::string_view to_string(BufferClass buffer_class) {
  switch (buffer_class) {
    case BufferClass::kShardedWeights:
      return "sharded_weights";
    case BufferClass::kMainGrads:
      return "main_grads";
    case BufferClass::kOptimizerState:
      return "optimizer_state";
    case BufferClass::kUnshardedWeights:
      return "unsharded_weights";
    case BufferClass::kPartialGrads:
      return "partial_grads";
    case BufferClass::kUnitGrads:
      return "unit_grads";
    case BufferClass::kActivations:
      return "activations";
  }
  return "?";
}

std::string_view to_string(Phase phase) {
  switch (phase) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kStep:
      return "step";
  }
  return "?";
}

}  // namespace fsdp

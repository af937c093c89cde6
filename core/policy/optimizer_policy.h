// SPDX-License-Identifier: Apache-2.0
// OptimizerPolicy: which optimizer updates the main weights and how much state it keeps per
// main-weight element (fsdp-behaviour.md §5.1: optimizer state sits at the optimizer placements, one buffer of
// local(opt) elements per state; Adam keeps 2). Immutable; default Adam with fp32 state.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "core/base/expected.h"
#include "core/model/dtype.h"

namespace fsdp {

enum class OptimizerKind : std::uint8_t {
  kSgd,          // no state
  kSgdMomentum,  // momentum buffer
  kAdam,         // exp_avg, exp_avg_sq
};

// "sgd", "sgd-momentum", "adam": the one spelling of every subcommand (docs/cli.md).
std::string_view to_string(OptimizerKind kind);
// The names above, case-insensitive (also "momentum" for kSgdMomentum, "adamw" for kAdam, which
// keeps the same state). Error (kInvalidArgument, one line): "optimizer 'x' is unknown; expected
// sgd, sgd-momentum or adam".
Expected<OptimizerKind> parse_optimizer_kind(std::string_view text);
// parse_optimizer_kind, also reading "sgd_momentum": the spelling of kSgdMomentum in files written
// before 2026-12-04 (checkpoint manifests); command lines take parse_optimizer_kind's names only.
Expected<OptimizerKind> parse_saved_optimizer_kind(std::string_view text);

class OptimizerPolicy {
 public:
  OptimizerPolicy() = default;  // Adam, fp32 state

  // Error (kInvalidArgument): an fp8 state dtype (§4.12).
  static Expected<OptimizerPolicy> make(OptimizerKind kind, DType state_dtype = DType::kFp32);

  OptimizerKind kind() const { return kind_; }
  DType state_dtype() const { return state_dtype_; }
  // State tensors per main-weight element: 0 (SGD), 1 (SGD momentum), 2 (Adam).
  std::int64_t num_states() const;
  // num_states() x bytes of the state dtype: 0, 4 and 8 with fp32 state.
  std::int64_t state_bytes_per_element() const;

  friend bool operator==(const OptimizerPolicy&, const OptimizerPolicy&) = default;

 private:
  OptimizerKind kind_ = OptimizerKind::kAdam;
  DType state_dtype_ = DType::kFp32;
};

// "adam(state=fp32)".
std::string to_string(const OptimizerPolicy& policy);
std::ostream& operator<<(std::ostream& os, const OptimizerPolicy& policy);

}  // namespace fsdp

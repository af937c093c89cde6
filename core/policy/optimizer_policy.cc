// SPDX-License-Identifier: Apache-2.0
#include "core/policy/optimizer_policy.h"

#include <cctype>

#include "core/base/strings.h"

namespace fsdp {

std::string_view to_string(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kSgdMomentum:
      return "sgd-momentum";
    case OptimizerKind::kAdam:
      return "adam";
  }
  return "unknown";
}

Expected<OptimizerKind> parse_optimizer_kind(std::string_view text) {
  std::string name(text);
  for (char& c : name) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (name == "sgd") {
    return OptimizerKind::kSgd;
  }
  if (name == "sgd-momentum" || name == "momentum") {
    return OptimizerKind::kSgdMomentum;
  }
  if (name == "adam" || name == "adamw") {
    return OptimizerKind::kAdam;
  }
  return Error(ErrorCode::kInvalidArgument,
               str_cat("optimizer '", text, "' is unknown; expected sgd, sgd-momentum or adam"));
}

Expected<OptimizerKind> parse_saved_optimizer_kind(std::string_view text) {
  if (text == "sgd_momentum") {
    return OptimizerKind::kSgdMomentum;
  }
  return parse_optimizer_kind(text);
}

Expected<OptimizerPolicy> OptimizerPolicy::make(OptimizerKind kind, DType state_dtype) {
  if (state_dtype == DType::kFp8) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(to_string(kind), " state dtype must be fp32, bf16 or fp16, got fp8"));
  }
  OptimizerPolicy out;
  out.kind_ = kind;
  out.state_dtype_ = state_dtype;
  return out;
}

std::int64_t OptimizerPolicy::num_states() const {
  switch (kind_) {
    case OptimizerKind::kSgd:
      return 0;
    case OptimizerKind::kSgdMomentum:
      return 1;
    case OptimizerKind::kAdam:
      return 2;
  }
  return 0;
}

std::int64_t OptimizerPolicy::state_bytes_per_element() const {
  return num_states() * dtype_bytes(state_dtype_);
}

std::string to_string(const OptimizerPolicy& policy) {
  return str_cat(to_string(policy.kind()), "(state=", to_string(policy.state_dtype()), ")");
}

std::ostream& operator<<(std::ostream& os, const OptimizerPolicy& policy) {
  return os << to_string(policy);
}

}  // namespace fsdp

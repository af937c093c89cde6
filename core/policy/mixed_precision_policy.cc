// SPDX-License-Identifier: Apache-2.0
#include "core/policy/mixed_precision_policy.h"

#include "core/base/strings.h"

namespace fsdp {

Expected<MixedPrecisionPolicy> MixedPrecisionPolicy::make(DType main_params_dtype,
                                                          std::optional<DType> main_grads_dtype,
                                                          std::optional<DType> compute_dtype) {
  if (main_params_dtype == DType::kFp8) {
    return Error(ErrorCode::kInvalidArgument,
                 "main params dtype must be fp32, bf16 or fp16, got fp8");
  }
  if (main_grads_dtype == DType::kFp8) {
    return Error(ErrorCode::kInvalidArgument,
                 "main grads dtype must be fp32, bf16 or fp16, got fp8");
  }
  MixedPrecisionPolicy out;
  out.main_params_dtype_ = main_params_dtype;
  out.main_grads_dtype_ = main_grads_dtype;
  out.compute_dtype_ = compute_dtype;
  return out;
}

Expected<MixedPrecisionPolicy> MixedPrecisionPolicy::with_collective_dtypes(
    std::optional<DType> reduce_dtype, bool fp8_all_gather) const {
  if (reduce_dtype == DType::kFp8) {
    return Error(ErrorCode::kInvalidArgument, "reduce dtype must be fp32, bf16 or fp16, got fp8");
  }
  MixedPrecisionPolicy out = *this;
  out.reduce_dtype_ = reduce_dtype;
  out.fp8_all_gather_ = fp8_all_gather;
  return out;
}

DType MixedPrecisionPolicy::grad_dtype_for(DType param_dtype) const {
  const DType compute = compute_dtype_for(param_dtype);
  return compute == DType::kFp8 ? DType::kBf16 : compute;
}

std::string to_string(const MixedPrecisionPolicy& policy) {
  const auto main_grads = policy.main_grads_dtype();
  const auto compute = policy.compute_dtype();
  return str_cat("main_params=", to_string(policy.main_params_dtype()),
                 " main_grads=", main_grads ? to_string(*main_grads) : "grad",
                 " compute=", compute ? to_string(*compute) : "param",
                 policy.reduce_dtype() ? str_cat(" reduce=", to_string(*policy.reduce_dtype()))
                                       : std::string(),
                 policy.fp8_all_gather() ? " all_gather=fp8" : "");
}

std::ostream& operator<<(std::ostream& os, const MixedPrecisionPolicy& policy) {
  return os << to_string(policy);
}

}  // namespace fsdp

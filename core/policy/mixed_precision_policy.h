// SPDX-License-Identifier: Apache-2.0
// MixedPrecisionPolicy (fsdp-behaviour.md §6, §5.1): the dtype of the main weights the optimizer updates, of
// the main gradients that accumulate across microbatches, and (a simulator knob) of compute. The
// default is the reference's: fp32 main weights, main grads in the parameter's dtype, compute in
// the parameter's dtype.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "core/base/expected.h"
#include "core/model/dtype.h"

namespace fsdp {

class MixedPrecisionPolicy {
 public:
  MixedPrecisionPolicy() = default;

  // main_params_dtype: main weight (and model-weight alias when equal to compute). main_grads:
  // nullopt = the gradient dtype. compute: nullopt = the parameter's own dtype; a value models
  // casting every parameter to it before fully_shard (the reference has no such field).
  // Errors (kInvalidArgument): fp8 main params or main grads (§4.12: gradients and optimizer
  // state never use fp8).
  static Expected<MixedPrecisionPolicy> make(DType main_params_dtype,
                                             std::optional<DType> main_grads_dtype,
                                             std::optional<DType> compute_dtype);

  // The same policy with the dtypes of the step's two collectives set (FSDP2's
  // MixedPrecisionPolicy.reduce_dtype; torchao's float8 all-gather): reduce_dtype is the dtype
  // gradients are reduce-scattered in (nullopt = the grad dtype); fp8_all_gather gathers the
  // weights, and holds them unsharded, in fp8 (one byte per element, one tensorwise scale per
  // tensor, no MXFP8 planes). Error (kInvalidArgument): an fp8 reduce dtype (§4.12).
  Expected<MixedPrecisionPolicy> with_collective_dtypes(std::optional<DType> reduce_dtype,
                                                        bool fp8_all_gather) const;

  DType main_params_dtype() const { return main_params_dtype_; }
  std::optional<DType> main_grads_dtype() const { return main_grads_dtype_; }
  std::optional<DType> compute_dtype() const { return compute_dtype_; }
  std::optional<DType> reduce_dtype() const { return reduce_dtype_; }
  bool fp8_all_gather() const { return fp8_all_gather_; }

  // The dtype a parameter stored as `param_dtype` computes in (model weight, unsharded buffer).
  DType compute_dtype_for(DType param_dtype) const {
    return compute_dtype_.value_or(param_dtype);
  }
  // The autograd gradient dtype, in which the partial-grad buffer is reduce-scattered (§4.6):
  // the compute dtype, except bf16 for fp8 (MXFP8) compute (assumption: TE's high-precision
  // dtype; gradients never use fp8).
  DType grad_dtype_for(DType param_dtype) const;
  // The main-grad dtype: main_grads_dtype or else grad_dtype_for(param_dtype).
  DType main_grads_dtype_for(DType param_dtype) const {
    return main_grads_dtype_.value_or(grad_dtype_for(param_dtype));
  }
  // The dtype a parameter's gradients are reduce-scattered in: reduce_dtype or else the grad
  // dtype.
  DType reduce_dtype_for(DType param_dtype) const {
    return reduce_dtype_.value_or(grad_dtype_for(param_dtype));
  }
  // The dtype a parameter is all-gathered and held unsharded in: fp8 with fp8_all_gather, else
  // the compute dtype.
  DType gather_dtype_for(DType param_dtype) const {
    return fp8_all_gather_ ? DType::kFp8 : compute_dtype_for(param_dtype);
  }
  // Whether the model weight aliases the main weight (§5.1: same dtype).
  bool model_weight_aliases_main(DType param_dtype) const {
    return compute_dtype_for(param_dtype) == main_params_dtype_;
  }

  friend bool operator==(const MixedPrecisionPolicy&, const MixedPrecisionPolicy&) = default;

 private:
  DType main_params_dtype_ = DType::kFp32;
  std::optional<DType> main_grads_dtype_;
  std::optional<DType> compute_dtype_;
  std::optional<DType> reduce_dtype_;
  bool fp8_all_gather_ = false;
};

// "main_params=fp32 main_grads=grad compute=param" (unset fields print as grad / param), then
// " reduce=fp32" and " all_gather=fp8" when set.
std::string to_string(const MixedPrecisionPolicy& policy);
std::ostream& operator<<(std::ostream& os, const MixedPrecisionPolicy& policy);

}  // namespace fsdp

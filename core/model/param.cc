// SPDX-License-Identifier: Apache-2.0
#include "core/model/param.h"

#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/model/internal/names.h"

namespace fsdp {

Expected<Param> Param::make(std::string name, Shape shape, DType dtype, bool requires_grad,
                            bool expert) {
  FSDP_RETURN_IF_ERROR(internal::check_name("parameter", name));
  std::int64_t bytes = 0;
  if (!checked_mul(shape.numel(), dtype_bytes(dtype), &bytes)) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("parameter '", name, "': expected numel x ", dtype_bytes(dtype),
                         " bytes to fit int64, got numel ", shape.numel()));
  }
  Param p;
  p.name_ = std::move(name);
  p.shape_ = shape;
  p.dtype_ = dtype;
  p.requires_grad_ = requires_grad;
  p.expert_ = expert;
  p.bytes_ = bytes;
  return p;
}

}  // namespace fsdp

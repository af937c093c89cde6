// SPDX-License-Identifier: Apache-2.0
#include "core/model/dtype.h"

#include "core/base/strings.h"

namespace fsdp {

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::kBf16:
      return "bf16";
    case DType::kFp16:
      return "fp16";
    case DType::kFp32:
      return "fp32";
    case DType::kFp8:
      return "fp8";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, DType dtype) { return os << to_string(dtype); }

Expected<DType> parse_dtype(std::string_view text) {
  if (text == "bf16" || text == "bfloat16") {
    return DType::kBf16;
  }
  if (text == "fp16" || text == "float16" || text == "half") {
    return DType::kFp16;
  }
  if (text == "fp32" || text == "float32" || text == "float") {
    return DType::kFp32;
  }
  if (text == "fp8" || text == "float8_e4m3fn" || text == "float8_e5m2") {
    return DType::kFp8;
  }
  return Error(ErrorCode::kInvalidArgument,
               str_cat("unknown dtype '", text, "'; expected one of bf16, fp16, fp32, fp8"));
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// DType: the element types a parameter can have, with their byte widths. fp8 stands for MXFP8
// (Megatron-FSDP's only FP8 parameter kind; its groups use BlockAtomic(32) layouts).
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>

#include "core/base/expected.h"

namespace fsdp {

enum class DType : std::uint8_t { kBf16, kFp16, kFp32, kFp8 };

// Bytes per element: 2, 2, 4, 1.
constexpr std::int64_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kBf16:
    case DType::kFp16:
      return 2;
    case DType::kFp32:
      return 4;
    case DType::kFp8:
      return 1;
  }
  return 0;
}

// "bf16", "fp16", "fp32", "fp8".
std::string_view to_string(DType dtype);
std::ostream& operator<<(std::ostream& os, DType dtype);

// Accepts the short names above and the torch spellings a hub config uses in torch_dtype
// ("bfloat16", "float16", "half", "float32", "float", "float8_e4m3fn", "float8_e5m2"). The error
// names the text and lists the accepted names.
Expected<DType> parse_dtype(std::string_view text);

}  // namespace fsdp

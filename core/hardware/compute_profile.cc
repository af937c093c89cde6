// SPDX-License-Identifier: Apache-2.0
#include "core/hardware/compute_profile.h"

#include <utility>

#include "core/base/strings.h"

namespace fsdp {

Status validate_compute_profile(const ComputeProfile& p) {
  const auto fail = [](std::string_view field, std::string_view expected, std::int64_t got) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("compute_profile.", field, ": expected ", expected, ", got ", got));
  };
  const std::pair<std::string_view, std::int64_t> positive[] = {
      {"sm_count", p.sm_count},
      {"gemm_tile_m", p.gemm_tile_m},
      {"gemm_tile_n", p.gemm_tile_n},
      {"attention_forward_flops", p.attention_forward_flops},
      {"attention_backward_flops", p.attention_backward_flops},
      {"cudnn_attention_forward_flops", p.cudnn_attention_forward_flops},
      {"cudnn_attention_backward_flops", p.cudnn_attention_backward_flops},
  };
  for (const auto& [field, value] : positive) {
    if (value < 1) {
      return fail(field, "a positive integer", value);
    }
  }
  if (p.peak_fp8_flops < 0) {
    return fail("peak_fp8_flops", "a non-negative integer (0: no fp8)", p.peak_fp8_flops);
  }
  const std::pair<std::string_view, std::int64_t> permille[] = {
      {"gemm_permille", p.gemm_permille},
      {"fp8_gemm_relative_permille", p.fp8_gemm_relative_permille},
      {"elementwise_permille", p.elementwise_permille},
  };
  for (const auto& [field, value] : permille) {
    if (value < 1 || value > 1000) {
      return fail(field, "an integer in [1, 1000]", value);
    }
  }
  return ok_status();
}

}  // namespace fsdp

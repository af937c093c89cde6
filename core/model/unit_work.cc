// SPDX-License-Identifier: Apache-2.0
#include "core/model/unit_work.h"

#include <cstdint>
#include <unordered_map>
#include <utility>

#include "core/base/strings.h"

namespace fsdp {

Status validate_unit_work(const UnitWork& work, std::string_view what) {
  const auto fail = [&](std::string_view field, std::string_view expected, std::int64_t got) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(what, ": work ", field, ": expected ", expected, ", got ", got));
  };
  std::unordered_map<std::int64_t, std::size_t> group_first;  // input group -> its first GEMM
  for (std::size_t i = 0; i < work.gemms.size(); ++i) {
    const GemmShape& g = work.gemms[i];
    const std::pair<const char*, std::int64_t> dims[] = {{"n", g.n},
                                                         {"k", g.k},
                                                         {"count", g.count},
                                                         {"rows_num", g.rows_num},
                                                         {"rows_den", g.rows_den}};
    for (const auto& [name, value] : dims) {
      if (value < 1) {
        return fail(str_cat("gemms[", i, "].", name), "a positive integer", value);
      }
    }
    if (g.input_group < 0) {
      return fail(str_cat("gemms[", i, "].input_group"), "a non-negative integer", g.input_group);
    }
    if (g.input_group == 0) {
      continue;
    }
    // The group's GEMMs read one tensor: the same k and the same rows as its first.
    const auto [it, first_of_group] = group_first.try_emplace(g.input_group, i);
    if (first_of_group) {
      continue;
    }
    const std::size_t j = it->second;
    const GemmShape& first = work.gemms[j];
    if (g.k != first.k) {
      return fail(str_cat("gemms[", i, "].k"),
                  str_cat(first.k, " (the k of gemms[", j, "], input_group ", g.input_group, ")"),
                  g.k);
    }
    if (g.rows_num != first.rows_num || g.rows_den != first.rows_den) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(what, ": work gemms[", i, "] rows: expected ", first.rows_num, "/",
                           first.rows_den, " (the rows of gemms[", j, "], input_group ",
                           g.input_group, "), got ", g.rows_num, "/", g.rows_den));
    }
  }
  const AttentionShape& a = work.attention;
  if (a.heads < 0) {
    return fail("attention.heads", "a non-negative integer", a.heads);
  }
  if (a.heads > 0 && a.qk_head_dim < 1) {
    return fail("attention.qk_head_dim", "a positive integer", a.qk_head_dim);
  }
  if (a.heads > 0 && a.v_head_dim < 1) {
    return fail("attention.v_head_dim", "a positive integer", a.v_head_dim);
  }
  if (work.elementwise_bytes < 0) {
    return fail("elementwise_bytes", "a non-negative integer", work.elementwise_bytes);
  }
  if (work.fused_elementwise_bytes < 0 || work.fused_elementwise_bytes > work.elementwise_bytes) {
    return fail("fused_elementwise_bytes",
                str_cat("an integer in [0, elementwise_bytes = ", work.elementwise_bytes, "]"),
                work.fused_elementwise_bytes);
  }
  if (work.te_elementwise_bytes < 0) {
    return fail("te_elementwise_bytes", "a non-negative integer", work.te_elementwise_bytes);
  }
  for (std::size_t i = 0; i < work.collectives.size(); ++i) {
    const ActivationCollective& c = work.collectives[i];
    if (c.site.empty()) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(what, ": work collectives[", i, "].site: expected a name, got none"));
    }
    if (c.elements_per_token < 1) {
      return fail(str_cat("collectives[", i, "].elements_per_token"), "a positive integer",
                  c.elements_per_token);
    }
    if (c.token_divisor < 1) {
      return fail(str_cat("collectives[", i, "].token_divisor"), "a positive integer",
                  c.token_divisor);
    }
  }
  return ok_status();
}

std::string_view to_string(ParallelAxis axis) {
  return axis == ParallelAxis::kTensor ? "tp" : "ep";
}

std::string_view to_string(ActivationCollectiveKind kind) {
  switch (kind) {
    case ActivationCollectiveKind::kAllReduce:
      return "all-reduce";
    case ActivationCollectiveKind::kAllGather:
      return "all-gather";
    case ActivationCollectiveKind::kReduceScatter:
      return "reduce-scatter";
    case ActivationCollectiveKind::kAllToAll:
      return "all-to-all";
  }
  return "unknown";
}

std::string_view to_string(CollectivePass pass) {
  return pass == CollectivePass::kForward ? "forward" : "backward";
}

}  // namespace fsdp

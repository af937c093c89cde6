// SPDX-License-Identifier: Apache-2.0
#include "core/hardware/calibration_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "core/base/strings.h"

namespace fsdp {
namespace {

Error fit_error(std::size_t i, std::string_view what) {
  return Error(ErrorCode::kInvalidArgument, str_cat("measured op ", i, ": ", what));
}

// The median of `v` (not empty), the mean of the two middle values for an even count, rounded.
std::int64_t median_ns(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  if (v.size() % 2 == 1) {
    return v[mid];
  }
  return (v[mid - 1] + v[mid] + 1) / 2;
}

}  // namespace

Expected<Calibration> fit_calibration(const Calibration& base, std::span<const MeasuredOp> ops,
                                      std::string source) {
  if (ops.empty()) {
    return Error(ErrorCode::kInvalidArgument, "fit: no measured op (expected at least one)");
  }
  // Per compute kind: summed FLOPs and ns (as doubles: sums of int64 may exceed int64).
  std::map<OpKind, std::pair<double, double>> compute;
  // Per (kind, group size): per payload, the measured durations.
  std::map<std::pair<OpKind, std::int64_t>, std::map<std::int64_t, std::vector<std::int64_t>>>
      collectives;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const MeasuredOp& op = ops[i];
    if (op.ns < 0) {
      return fit_error(i, str_cat("duration is ", op.ns, " ns; expected >= 0"));
    }
    if (is_collective(op.kind)) {
      if (op.bytes < 1) {
        return fit_error(i, str_cat(to_string(op.kind), " payload is ", op.bytes,
                                    " bytes; expected >= 1"));
      }
      if (op.group_ranks < 2) {
        return fit_error(i, str_cat(to_string(op.kind), " group has ", op.group_ranks,
                                    " ranks; expected >= 2"));
      }
      collectives[{op.kind, op.group_ranks}][op.bytes].push_back(op.ns);
    } else if (is_compute(op.kind)) {
      if (op.flops < 0) {
        return fit_error(i, str_cat(to_string(op.kind), " FLOPs are ", op.flops,
                                    "; expected >= 0"));
      }
      auto& [flops, ns] = compute[op.kind];
      flops += static_cast<double>(op.flops);
      ns += static_cast<double>(op.ns);
    }
  }
  Calibration fit = base;
  fit.source = std::move(source);
  fit.compute_slowdown_permille = 1000;
  for (const auto& [kind, sums] : compute) {
    const auto [flops, ns] = sums;
    if (flops <= 0 || ns <= 0) {
      continue;  // no FLOPs (grad-copy, cast) or no time: base's rate stays
    }
    const auto rate = static_cast<std::int64_t>(std::llround(flops * 1e9 / ns));
    const auto it = std::find_if(fit.compute.begin(), fit.compute.end(),
                                 [k = kind](const ComputeRate& r) { return r.kind == k; });
    const ComputeRate fitted{kind, std::max<std::int64_t>(rate, 1), 0};
    if (it == fit.compute.end()) {
      fit.compute.push_back(fitted);
    } else {
      *it = fitted;
    }
  }
  for (const auto& [key, by_bytes] : collectives) {
    CollectiveCurve curve{key.first, key.second, {}};
    for (const auto& [bytes, times] : by_bytes) {  // std::map: bytes increasing
      curve.points.push_back({bytes, median_ns(times)});
    }
    const auto it = std::find_if(fit.collectives.begin(), fit.collectives.end(),
                                 [&](const CollectiveCurve& c) {
                                   return c.kind == curve.kind && c.ranks == curve.ranks;
                                 });
    if (it == fit.collectives.end()) {
      fit.collectives.push_back(std::move(curve));
    } else {
      *it = std::move(curve);
    }
  }
  FSDP_RETURN_IF_ERROR(validate_calibration(fit));
  return fit;
}

}  // namespace fsdp

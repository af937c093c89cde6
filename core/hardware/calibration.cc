// SPDX-License-Identifier: Apache-2.0
#include "core/hardware/calibration.h"

#include <algorithm>

#include "core/base/strings.h"

namespace fsdp {
namespace {

Error field_error(std::string_view field, std::string_view expected, std::string_view got) {
  return Error(ErrorCode::kInvalidArgument,
               str_cat("field 'calibration.", field, "': expected ", expected, ", got ", got));
}

Status at_least(std::string_view field, std::int64_t value, std::int64_t min) {
  if (value < min) {
    return field_error(field,
                       min == 0 ? std::string("a non-negative integer")
                                : (min == 1 ? std::string("a positive integer")
                                            : str_cat("an integer >= ", min)),
                       str_cat(value));
  }
  return ok_status();
}

Status validate_compute(const Calibration& c) {
  for (std::size_t i = 0; i < c.compute.size(); ++i) {
    const ComputeRate& r = c.compute[i];
    const std::string at = str_cat("compute[", i, "]");
    if (!is_compute(r.kind)) {
      return field_error(at + ".op", "a compute op kind", str_cat("'", to_string(r.kind), "'"));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (c.compute[j].kind == r.kind) {
        return field_error(at + ".op", "one entry per kind",
                           str_cat("a second '", to_string(r.kind), "'"));
      }
    }
    FSDP_RETURN_IF_ERROR(at_least(at + ".flops_per_s", r.flops_per_s, 0));
    FSDP_RETURN_IF_ERROR(at_least(at + ".bytes_per_s", r.bytes_per_s, 0));
    if (r.flops_per_s == 0 && r.bytes_per_s == 0) {
      return field_error(at, "flops_per_s or bytes_per_s > 0", "both 0");
    }
  }
  return ok_status();
}

Status validate_collectives(const Calibration& c) {
  for (std::size_t i = 0; i < c.collectives.size(); ++i) {
    const CollectiveCurve& curve = c.collectives[i];
    const std::string at = str_cat("collectives[", i, "]");
    if (!is_collective(curve.kind)) {
      return field_error(at + ".op", "all-gather, reduce-scatter or all-reduce",
                         str_cat("'", to_string(curve.kind), "'"));
    }
    FSDP_RETURN_IF_ERROR(at_least(at + ".ranks", curve.ranks, 2));
    for (std::size_t j = 0; j < i; ++j) {
      if (c.collectives[j].kind == curve.kind && c.collectives[j].ranks == curve.ranks) {
        return field_error(at, "one curve per (op, ranks)",
                           str_cat("a second '", to_string(curve.kind), "' on ", curve.ranks,
                                   " ranks"));
      }
    }
    if (curve.points.empty()) {
      return field_error(at + ".points", "at least one point", "none");
    }
    for (std::size_t p = 0; p < curve.points.size(); ++p) {
      const std::string pt = str_cat(at, ".points[", p, "]");
      FSDP_RETURN_IF_ERROR(at_least(pt + ".bytes", curve.points[p].bytes, 1));
      FSDP_RETURN_IF_ERROR(at_least(pt + ".ns", curve.points[p].ns, 0));
      if (p > 0 && curve.points[p].bytes <= curve.points[p - 1].bytes) {
        return field_error(pt + ".bytes",
                           str_cat("more than the previous point's ", curve.points[p - 1].bytes),
                           str_cat(curve.points[p].bytes));
      }
    }
  }
  return ok_status();
}

}  // namespace

Status validate_calibration(const Calibration& c) {
  FSDP_RETURN_IF_ERROR(at_least("ranks", c.ranks, 1));
  FSDP_RETURN_IF_ERROR(at_least("copy_bytes_per_s", c.copy_bytes_per_s, 1));
  if (c.compute_slowdown_permille < 1000 || c.compute_slowdown_permille > 100000) {
    return field_error("compute_slowdown_permille", "an integer in [1000, 100000]",
                       str_cat(c.compute_slowdown_permille));
  }
  FSDP_RETURN_IF_ERROR(validate_compute(c));
  FSDP_RETURN_IF_ERROR(validate_collectives(c));
  for (std::size_t i = 0; i < c.matmuls.size(); ++i) {
    const MatmulRate& m = c.matmuls[i];
    const std::string at = str_cat("matmuls[", i, "]");
    FSDP_RETURN_IF_ERROR(at_least(at + ".m", m.m, 1));
    FSDP_RETURN_IF_ERROR(at_least(at + ".n", m.n, 1));
    FSDP_RETURN_IF_ERROR(at_least(at + ".k", m.k, 1));
    FSDP_RETURN_IF_ERROR(at_least(at + ".flops_per_s", m.flops_per_s, 1));
  }
  return ok_status();
}

const ComputeRate* find_compute_rate(const Calibration& calibration, OpKind kind) {
  for (const ComputeRate& r : calibration.compute) {
    if (r.kind == kind) {
      return &r;
    }
  }
  return nullptr;
}

const CollectiveCurve* find_collective_curve(const Calibration& calibration, OpKind kind,
                                             std::int64_t ranks) {
  for (const CollectiveCurve& c : calibration.collectives) {
    if (c.kind == kind && c.ranks == ranks) {
      return &c;
    }
  }
  return nullptr;
}

double curve_ns(const CollectiveCurve& curve, double bytes) {
  const std::vector<CollectivePoint>& p = curve.points;
  const auto x = [&](std::size_t i) { return static_cast<double>(p[i].bytes); };
  const auto y = [&](std::size_t i) { return static_cast<double>(p[i].ns); };
  if (p.empty()) {
    return 0.0;
  }
  if (bytes <= x(0)) {
    return y(0);
  }
  const std::size_t last = p.size() - 1;
  if (bytes >= x(last)) {
    return y(last) * bytes / x(last);
  }
  std::size_t hi = 1;
  while (bytes > x(hi)) {
    ++hi;
  }
  const double t = (bytes - x(hi - 1)) / (x(hi) - x(hi - 1));
  return y(hi - 1) + t * (y(hi) - y(hi - 1));
}

}  // namespace fsdp

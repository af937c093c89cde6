// SPDX-License-Identifier: Apache-2.0
// Calibration: figures measured on a real machine by `fsdpsim calibrate` (docs/design/fidelity.md)
// that the simulator prefers to a hardware file's datasheet figures: effective rates per compute
// op kind, the time of each collective kind per message size at a group size, memory-copy
// bandwidth and the slowdown of compute while communication runs. int64 base units throughout
// (FLOP/s, bytes/s, bytes, ns); a plain value, checked by validate_calibration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/expected.h"
#include "core/schedule/op.h"

namespace fsdp {

// A compute op of `kind` costs flops / flops_per_s + mem_bytes / bytes_per_s (Op::flops and
// Op::mem_bytes of the IR); a rate of 0 leaves its term out.
struct ComputeRate {
  OpKind kind = OpKind::kForward;
  std::int64_t flops_per_s = 0;
  std::int64_t bytes_per_s = 0;
  friend bool operator==(const ComputeRate&, const ComputeRate&) = default;
};

// One measured call: a member's payload (Op::bytes: its contribution to an all-gather, its
// result of a reduce-scatter, the whole buffer of an all-reduce) and the time of one call.
struct CollectivePoint {
  std::int64_t bytes = 0;
  std::int64_t ns = 0;
  friend bool operator==(const CollectivePoint&, const CollectivePoint&) = default;
};

// Measured times of one collective kind on groups of `ranks` members, bytes strictly increasing.
struct CollectiveCurve {
  OpKind kind = OpKind::kAllGather;
  std::int64_t ranks = 2;
  std::vector<CollectivePoint> points;
  friend bool operator==(const CollectiveCurve&, const CollectiveCurve&) = default;
};

// Measured BLAS throughput of one matmul shape (C m x n = A m x k times B k x n): informative,
// the simulator costs whole ops through ComputeRate.
struct MatmulRate {
  std::int64_t m = 1;
  std::int64_t n = 1;
  std::int64_t k = 1;
  std::int64_t flops_per_s = 1;
  friend bool operator==(const MatmulRate&, const MatmulRate&) = default;
};

struct Calibration {
  std::string source;                // how it was measured (free text, may be empty)
  std::int64_t ranks = 1;            // processes measured at once on the machine
  std::int64_t copy_bytes_per_s = 1;  // memcpy: bytes read plus bytes written per second
  // Compute runs this many thousandths slower while a collective of the same rank is in flight
  // (1000 = no slowdown).
  std::int64_t compute_slowdown_permille = 1000;
  std::vector<ComputeRate> compute;          // at most one per compute kind
  std::vector<CollectiveCurve> collectives;  // at most one per (kind, ranks)
  std::vector<MatmulRate> matmuls;
  friend bool operator==(const Calibration&, const Calibration&) = default;
};

// Errors (kInvalidArgument), naming the field as "calibration.compute[1].flops_per_s", the
// expected and the actual value: ranks, copy bandwidth or a matmul figure < 1; a slowdown below
// 1000 or above 100000; a compute entry of a non-compute kind, a duplicate kind, a negative rate
// or both rates 0; a collective entry of a non-collective kind, ranks < 2, a duplicate (kind,
// ranks), no points, bytes < 1, ns < 0, or bytes not strictly increasing.
Status validate_calibration(const Calibration& calibration);

// The entry for `kind`, or nullptr.
const ComputeRate* find_compute_rate(const Calibration& calibration, OpKind kind);
// The curve of `kind` measured on groups of `ranks`, or nullptr.
const CollectiveCurve* find_collective_curve(const Calibration& calibration, OpKind kind,
                                             std::int64_t ranks);

// The curve's time in ns of a call moving `bytes`: linear between measured points, the first
// point's time below it (latency-bound), proportional to the bytes beyond the last point (the
// largest measured size's bandwidth).
double curve_ns(const CollectiveCurve& curve, double bytes);

}  // namespace fsdp

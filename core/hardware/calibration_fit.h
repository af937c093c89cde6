// SPDX-License-Identifier: Apache-2.0
// Fitting a Calibration to a measured run: the effective rate of each compute kind and the time
// of each collective per payload, as they were in training (contention, oversubscription and the
// waits for slower peers included), instead of measured alone. `fsdpsim calibrate --fit`;
// docs/design/fidelity.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/base/expected.h"
#include "core/hardware/calibration.h"
#include "core/schedule/op.h"

namespace fsdp {

// One op of a measured timeline: its kind, the IR's FLOPs (compute) or payload bytes and group
// size (collectives), and how long it took.
struct MeasuredOp {
  OpKind kind = OpKind::kForward;
  std::int64_t flops = 0;        // compute: Op::flops
  std::int64_t bytes = 0;        // collectives: Op::bytes (a member's payload)
  std::int64_t group_ranks = 0;  // collectives: members of the group
  std::int64_t ns = 0;           // measured duration
};

// `base` with its figures replaced by those the measured ops give:
// * every compute kind with FLOPs: flops_per_s = sum of FLOPs / sum of durations, bytes_per_s 0
//   (kinds without FLOPs, such as grad-copy and cast, keep base's rates);
// * every (collective kind, group size): a curve with one point per distinct payload, the median
//   duration of the ops of that payload (replacing base's curve of that kind and size);
// * compute_slowdown_permille 1000: the measured compute times already include the slowdown.
// `source` describes the fit. Errors (kInvalidArgument): no measured op, a negative duration or
// FLOP count, a collective of payload < 1 or group < 2, or a result validate_calibration rejects.
Expected<Calibration> fit_calibration(const Calibration& base, std::span<const MeasuredOp> ops,
                                      std::string source);

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// build_schedule: the one optimizer step of fully_shard (fsdp-behaviour.md §4) as a per-rank op program:
// forward and backward of every microbatch with demand gathers, prefetches per SchedulePolicy,
// reshards, gradient reductions (finalised to the optimizer placements on the last microbatch
// only), the optimizer step and the post-step model-weight sync, with every buffer's allocation
// and release (fsdp-behaviour.md §5). Ranks with identical local shard sizes share one program.
#pragma once

#include <cstdint>

#include "core/base/expected.h"
#include "core/model/model.h"
#include "core/policy/fsdp_config.h"
#include "core/schedule/schedule.h"
#include "core/schedule/workload.h"

namespace fsdp {

// Errors: seq_len or micro_batch_size < 1; matmul_dtype other than bf16 or fp8; a unit whose
// parameters cannot be laid out for the DP mesh (the layout error with the unit and group named);
// sizes beyond int64.
Expected<Schedule> build_schedule(const Model& model, const FsdpConfig& config,
                                  const Workload& workload);

// The optimizer's arithmetic per main-weight element (documented in docs/design/schedule-ir.md):
// SGD 2, SGD with momentum 4, Adam 12.
std::int64_t optimizer_flops_per_element(const OptimizerPolicy& optimizer);

}  // namespace fsdp

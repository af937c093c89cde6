// SPDX-License-Identifier: Apache-2.0
// What a run needs, estimated before it is built (issue 16, class 3): `simulate --mesh
// dp=2147483647` and `--microbatches 1000000` once grew until the kernel killed them. The
// per-rank and per-op figures are measured peaks of the dev build (docs/design/simulator.md,
// "Memory estimate"); the budget is what this process may allocate.
#pragma once

#include <cstdint>

#include "core/base/expected.h"

namespace fsdp::cli {

// Measured: a simulated mesh holds about this much per rank (rank classes, group types, flags),
// and a schedule about this much per op (the op, its compiled step, trace and statistics).
inline constexpr std::int64_t kBytesPerRank = 256;
inline constexpr std::int64_t kBytesPerOp = 640;
// Ops one unit issues per microbatch, at most (forward, backward, gathers, frees, events,
// reduce-scatters; about 34 in the presets).
inline constexpr std::int64_t kOpsPerUnitMicrobatch = 64;

// The smaller of the address-space limit (RLIMIT_AS) and the physical memory, in bytes.
std::int64_t memory_budget_bytes();

// Error (kOutOfRange) when a run of `ranks` ranks and `units` units x `microbatches`
// microbatches, `copies` times at once (sweep threads), would need more than
// memory_budget_bytes(): "the run needs about 512.0 GiB (2147483647 ranks x 256 B + ...), more
// than the 23.4 GiB this process may use".
Status check_memory_estimate(std::int64_t ranks, std::int64_t units, std::int64_t microbatches,
                             std::int64_t copies = 1);

}  // namespace fsdp::cli

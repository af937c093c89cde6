// SPDX-License-Identifier: Apache-2.0
// What a run needs, estimated before it is built: `simulate --mesh
// dp=2147483647` and `--microbatches 1000000` once grew until the kernel killed them. The
// per-rank and per-op figures are measured peaks of the dev build (docs/design/simulator.md,
// "Memory estimate"); the budget is what this process may allocate.
#pragma once

#include <cstdint>

#include "core/base/expected.h"

namespace fsdp::planner {

// Measured: a simulated mesh holds about this much per rank (rank classes, group types, flags),
// and a schedule about this much per op (the op, its compiled step, trace and statistics).
inline constexpr std::int64_t kBytesPerRank = 256;
inline constexpr std::int64_t kBytesPerOp = 640;
// Ops one unit issues per microbatch, at most (forward, backward, gathers, frees, events,
// reduce-scatters; about 34 in the presets).
inline constexpr std::int64_t kOpsPerUnitMicrobatch = 64;

// The smaller of the address space left under RLIMIT_AS (the limit less what the process maps
// now, /proc/self/statm) and the physical memory, in bytes.
std::int64_t memory_budget_bytes();

// Error (kOutOfRange) when a run of `ranks` ranks and `units` units x `microbatches`
// microbatches, `copies` times at once (sweep threads), would need more than
// memory_budget_bytes(): "the run needs about 512.0 GiB (2147483647 ranks x 256 B + ...), more
// than the 23.4 GiB this process may use".
Status check_memory_estimate(std::int64_t ranks, std::int64_t units, std::int64_t microbatches,
                             std::int64_t copies = 1);

// Real training (`fsdpsim train`, `calibrate`): fp32 values of every parameter about
// kTrainCopiesPerParam times in this process (main weights, gradients, two Adam states, the
// initial values and a gathered unit, plus the reference's for --check), and the activations
// of every rank and microbatch: `ranks_here` ranks run in this process (all of them in-process,
// one under mpirun). Error (kOutOfRange) above memory_budget_bytes(): "training needs about
// 181.4 GiB (8030261248 parameters x 6 x 4 B + ...), more than the 23.4 GiB this process may
// use; shrink it with --layers, --hidden, --ffn or --vocab".
inline constexpr std::int64_t kTrainCopiesPerParam = 6;
Status check_training_memory(std::int64_t parameters, std::int64_t activation_bytes_per_token,
                             std::int64_t tokens_per_microbatch, std::int64_t microbatches,
                             std::int64_t ranks_here, bool check);

}  // namespace fsdp::planner

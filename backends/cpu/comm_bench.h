// SPDX-License-Identifier: Apache-2.0
// Collective benchmark of the CPU backend under mpirun: per message size, the bus bandwidth of
// all-gather, reduce-scatter and all-to-all issued through the backend (a CpuDevice stream task
// calling the MPI Communicator, as the executor does) next to a plain MPI_Allgatherv /
// MPI_Reduce_scatter / MPI_Alltoall loop of the same counts, datatype and op on the main thread
// (the all-to-all's total is every rank's send buffer). Bus bandwidth uses the nccl-tests factor
// (n - 1) / n over the total bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/mpi_session.h"
#include "core/base/expected.h"
#include "core/schedule/op.h"

namespace fsdp::cpu {

struct CommBenchOptions {
  std::vector<std::int64_t> total_bytes;  // per row: gathered / reduced buffer, all ranks
  std::int64_t iters = 20;                // timed calls per block
  std::int64_t repeats = 5;               // blocks per side; the median block counts
  double timeout_s = 120.0;               // the backend's watchdog
};

struct CommBenchRow {
  OpKind kind = OpKind::kAllGather;
  std::int64_t total_bytes = 0;     // gathered / reduced buffer, all ranks together
  double backend_seconds = 0.0;     // per call: median over blocks of the slowest rank's time
  double plain_seconds = 0.0;
  double backend_busbw_gbps = 0.0;  // GB/s (1e9 bytes)
  double plain_busbw_gbps = 0.0;
};

// The most calls per block and blocks per side: past them a run cannot end in a useful time
// (issue 16: --iters 2^63-1 ran until killed).
inline constexpr std::int64_t kMaxBenchIters = 1'000'000;
inline constexpr std::int64_t kMaxBenchRepeats = 10'000;

// The options that need no MPI: iters in [1, kMaxBenchIters], repeats in [1, kMaxBenchRepeats],
// a timeout in (0, kMaxTimeoutSeconds] (core/base/limits.h; 0 and NaN were accepted). Error
// (kInvalidArgument) names the option and the value.
Status check_bench_counts(const CommBenchOptions& options);

// Collective: every rank calls it with the same options. Per size and kind, `repeats` rounds each
// time one block of `iters` backend calls and one of `iters` plain calls (one warm-up call of each
// first), alternating which goes first so neither side always follows the other, and keeps each
// side's median block. Errors: sizes below 4 bytes per rank, a per-rank count past MPI's int,
// check_bench_counts' (kInvalidArgument); no mpirun (kFailedPrecondition); MPI failures.
Expected<std::vector<CommBenchRow>> bench_collectives(const MpiSession& session,
                                                      const CommBenchOptions& options);

}  // namespace fsdp::cpu

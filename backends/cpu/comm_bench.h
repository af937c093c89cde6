// SPDX-License-Identifier: Apache-2.0
// Collective benchmark of the CPU backend under mpirun: per message size, the bus bandwidth of
// all-gather and reduce-scatter issued through the backend (a CpuDevice stream task calling the
// MPI Communicator, as the executor does) next to a plain MPI_Allgatherv / MPI_Reduce_scatter loop
// on the main thread. Bus bandwidth uses the nccl-tests factor (n - 1) / n over the total bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/mpi_comm.h"
#include "core/base/expected.h"

namespace fsdp::cpu {

struct CommBenchRow {
  OpKind kind = OpKind::kAllGather;
  std::int64_t total_bytes = 0;     // gathered / reduced buffer, all ranks together
  double backend_seconds = 0.0;     // per call, slowest rank
  double plain_seconds = 0.0;
  double backend_busbw_gbps = 0.0;  // GB/s (1e9 bytes)
  double plain_busbw_gbps = 0.0;
};

// Collective: every rank calls it with the same arguments. Errors: sizes < 4 bytes or iters < 1
// (kInvalidArgument); MPI failures.
Expected<std::vector<CommBenchRow>> bench_collectives(const MpiSession& session,
                                                      const std::vector<std::int64_t>& total_bytes,
                                                      std::int64_t iters, double timeout_s);

}  // namespace fsdp::cpu

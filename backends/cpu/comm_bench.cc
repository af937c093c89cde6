// SPDX-License-Identifier: Apache-2.0
// Times `iters` back-to-back calls after one warm-up, between barriers, and keeps the slowest
// rank's time (MPI_MAX), as nccl-tests reports.
#include "backends/cpu/comm_bench.h"

#include <mpi.h>

#include <chrono>
#include <memory>
#include <utility>

#include "backends/cpu/cpu_device.h"
#include "core/base/strings.h"

namespace fsdp::cpu {
namespace {

double slowest(double seconds) {
  double out = seconds;
  MPI_Allreduce(&seconds, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Expected<std::vector<CommBenchRow>> bench_collectives(const MpiSession& session,
                                                      const std::vector<std::int64_t>& total_bytes,
                                                      std::int64_t iters, double timeout_s) {
  if (iters < 1) {
    return Error(ErrorCode::kInvalidArgument, str_cat("iters is ", iters, "; expected >= 1"));
  }
  const std::int64_t n = session.size();
  std::vector<MeshAxis> axes(1);
  axes[0].name = "world";
  axes[0].size = n;
  FSDP_TRY(DeviceMesh mesh, DeviceMesh::make(std::move(axes)));
  FSDP_TRY(std::unique_ptr<exec::CommunicatorSet> comms,
           make_mpi_communicators(session, mesh, timeout_s));
  exec::Communicator& comm = comms->axis(0);
  MPI_Comm plain = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &plain);
  std::vector<CommBenchRow> rows;
  CpuDevice device("bench");
  for (std::int64_t bytes : total_bytes) {
    if (bytes < 4 * n) {
      MPI_Comm_free(&plain);
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("message size ", bytes, " bytes is below 4 bytes per rank"));
    }
    const std::int64_t per_rank = bytes / 4 / n;
    const std::vector<std::int64_t> counts(static_cast<std::size_t>(n), per_rank);
    const std::vector<int> icounts(static_cast<std::size_t>(n), static_cast<int>(per_rank));
    std::vector<int> displs;
    for (std::int64_t r = 0; r < n; ++r) {
      displs.push_back(static_cast<int>(r * per_rank));
    }
    std::vector<float> full(static_cast<std::size_t>(per_rank * n), 1.0F);
    std::vector<float> part(static_cast<std::size_t>(per_rank), 1.0F);
    for (OpKind kind : {OpKind::kAllGather, OpKind::kReduceScatter}) {
      auto backend_call = [&]() -> Status {
        return kind == OpKind::kAllGather
                   ? comm.all_gather_v(StreamKind::kAllGather, DType::kFp32, part.data(), counts,
                                       full.data())
                   : comm.reduce_scatter_v(StreamKind::kAllGather, DType::kFp32, full.data(),
                                           counts, part.data());
      };
      auto plain_call = [&] {
        if (kind == OpKind::kAllGather) {
          MPI_Allgatherv(part.data(), icounts[0], MPI_FLOAT, full.data(), icounts.data(),
                         displs.data(), MPI_FLOAT, plain);
        } else {
          MPI_Reduce_scatter(full.data(), part.data(), icounts.data(), MPI_FLOAT, MPI_SUM, plain);
        }
      };
      // Backend: tasks on the all-gather stream of a CpuDevice, as the executor issues them;
      // one warm-up call first.
      device.submit(StreamKind::kAllGather, {}, backend_call);
      FSDP_RETURN_IF_ERROR(device.synchronize());
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now_s();
      for (std::int64_t i = 0; i < iters; ++i) {
        device.submit(StreamKind::kAllGather, {}, backend_call);
      }
      FSDP_RETURN_IF_ERROR(device.synchronize());
      const double backend = slowest(now_s() - t0) / static_cast<double>(iters);
      plain_call();
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = now_s();
      for (std::int64_t i = 0; i < iters; ++i) {
        plain_call();
      }
      const double plain_time = slowest(now_s() - t0) / static_cast<double>(iters);
      CommBenchRow row;
      row.kind = kind;
      row.total_bytes = per_rank * n * 4;
      row.backend_seconds = backend;
      row.plain_seconds = plain_time;
      const double factor = static_cast<double>(n - 1) / static_cast<double>(n);
      row.backend_busbw_gbps = factor * static_cast<double>(row.total_bytes) / backend / 1e9;
      row.plain_busbw_gbps = factor * static_cast<double>(row.total_bytes) / plain_time / 1e9;
      rows.push_back(row);
    }
  }
  MPI_Comm_free(&plain);
  return rows;
}

}  // namespace fsdp::cpu

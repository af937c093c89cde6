// SPDX-License-Identifier: Apache-2.0
// Times blocks of back-to-back calls between barriers and keeps the slowest rank's time
// (MPI_MAX), as nccl-tests reports; the median over blocks resists a machine shared with other
// work. Both sides use the same buffers, counts, datatype and op.
#include "backends/cpu/comm_bench.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <memory>
#include <tuple>
#include <utility>

#include "backends/cpu/cpu_device.h"
#include "backends/cpu/internal/mpi_error.h"
#include "backends/cpu/mpi_comm.h"
#include "core/base/limits.h"
#include "core/base/strings.h"

namespace fsdp::cpu {

Status check_bench_counts(const CommBenchOptions& options) {
  for (const auto& [name, value, limit] :
       {std::tuple<const char*, std::int64_t, std::int64_t>{"iters", options.iters,
                                                            kMaxBenchIters},
        {"repeats", options.repeats, kMaxBenchRepeats}}) {
    if (value < 1 || value > limit) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(name, " is ", value, "; expected a value in [1, ", limit, "]"));
    }
  }
  if (!(options.timeout_s > 0.0 && options.timeout_s <= kMaxTimeoutSeconds)) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("timeout is ", options.timeout_s, " s; expected a value in (0, ",
                         kMaxTimeoutSeconds, "]"));
  }
  return ok_status();
}

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Status check_options(const MpiSession& session, const CommBenchOptions& options) {
  FSDP_RETURN_IF_ERROR(check_bench_counts(options));
  const std::int64_t n = session.size();
  for (std::int64_t bytes : options.total_bytes) {
    if (bytes < 4 * n) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("message size ", bytes, " bytes is below 4 bytes per rank (", n,
                           " ranks)"));
    }
    if (bytes / 4 > INT_MAX) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("message size ", bytes, " bytes is ", bytes / 4,
                           " floats; MPI counts stop at ", INT_MAX));
    }
  }
  return ok_status();
}

}  // namespace

Expected<std::vector<CommBenchRow>> bench_collectives(const MpiSession& session,
                                                      const CommBenchOptions& options) {
  FSDP_RETURN_IF_ERROR(check_options(session, options));
  const std::int64_t n = session.size();
  std::vector<MeshAxis> axes(1);
  axes[0].name = "world";
  axes[0].size = n;
  FSDP_TRY(DeviceMesh mesh, DeviceMesh::make(std::move(axes)));
  FSDP_TRY(std::unique_ptr<exec::CommunicatorSet> comms,
           make_mpi_communicators(session, mesh, options.timeout_s));
  exec::Communicator& comm = comms->axis(0);
  // The plain loop's own communicator, freed on every return.
  MPI_Comm plain = MPI_COMM_NULL;
  if (const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &plain); rc != MPI_SUCCESS) {
    return internal::mpi_error(rc, "MPI_Comm_dup");
  }
  std::unique_ptr<MPI_Comm, void (*)(MPI_Comm*)> plain_owner(&plain,
                                                             [](MPI_Comm* c) { MPI_Comm_free(c); });
  std::vector<CommBenchRow> rows;
  CpuDevice device("bench");
  for (std::int64_t bytes : options.total_bytes) {
    const std::int64_t per_rank = bytes / 4 / n;
    const std::vector<std::int64_t> counts(static_cast<std::size_t>(n), per_rank);
    const std::vector<int> icounts(static_cast<std::size_t>(n), static_cast<int>(per_rank));
    std::vector<int> displs;
    for (std::int64_t r = 0; r < n; ++r) {
      displs.push_back(static_cast<int>(r * per_rank));
    }
    std::vector<float> full(static_cast<std::size_t>(per_rank * n), 1.0F);
    std::vector<float> part(static_cast<std::size_t>(per_rank), 1.0F);
    // All-to-all: every block of this rank's send holds rank + 1 (exact), so block k of the
    // receive must hold k + 1.
    const std::vector<float> a2a_send(full.size(), static_cast<float>(session.rank() + 1));
    std::vector<float> a2a_recv(full.size(), 0.0F);
    for (OpKind kind : {OpKind::kAllGather, OpKind::kReduceScatter, OpKind::kAllToAll}) {
      const bool gather = kind == OpKind::kAllGather;
      auto backend_call = [&]() -> Status {
        if (kind == OpKind::kAllToAll) {
          return comm.all_to_all(StreamKind::kAllGather, DType::kFp32, a2a_send.data(), per_rank,
                                 a2a_recv.data());
        }
        return gather ? comm.all_gather_v(StreamKind::kAllGather, DType::kFp32, part.data(),
                                          counts, full.data())
                      : comm.reduce_scatter_v(StreamKind::kAllGather, DType::kFp32,
                                              full.data(), counts, part.data());
      };
      auto plain_call = [&] {
        if (kind == OpKind::kAllToAll) {
          MPI_Alltoall(a2a_send.data(), icounts[0], MPI_FLOAT, a2a_recv.data(), icounts[0],
                       MPI_FLOAT, plain);
        } else if (gather) {
          MPI_Allgatherv(part.data(), icounts[0], MPI_FLOAT, full.data(), icounts.data(),
                         displs.data(), MPI_FLOAT, plain);
        } else {
          MPI_Reduce_scatter(full.data(), part.data(), icounts.data(), MPI_FLOAT, MPI_SUM, plain);
        }
      };
      // Backend: tasks on the all-gather stream of a CpuDevice, as the executor issues them.
      // Each block starts at a barrier with the --timeout deadline (MpiSession::arrive), so a
      // rank that stalls is named instead of hanging the others (issue 16, class 5).
      auto backend_block = [&](std::int64_t calls) -> Expected<double> {
        FSDP_RETURN_IF_ERROR(session.arrive("a backend block of commbench", options.timeout_s));
        const double t0 = now_s();
        for (std::int64_t i = 0; i < calls; ++i) {
          device.submit(StreamKind::kAllGather, {}, backend_call);
        }
        FSDP_RETURN_IF_ERROR(device.synchronize());
        return slowest(now_s() - t0);
      };
      auto plain_block = [&](std::int64_t calls) -> Expected<double> {
        FSDP_RETURN_IF_ERROR(session.arrive("a plain MPI block of commbench", options.timeout_s));
        const double t0 = now_s();
        for (std::int64_t i = 0; i < calls; ++i) {
          plain_call();
        }
        return slowest(now_s() - t0);
      };
      FSDP_TRY(double warm, backend_block(1));
      (void)warm;
      FSDP_TRY(double plain_warm, plain_block(1));
      (void)plain_warm;
      std::vector<double> backend;
      std::vector<double> plain_times;
      for (std::int64_t r = 0; r < options.repeats; ++r) {
        if (r % 2 == 1) {
          FSDP_TRY(double p, plain_block(options.iters));
          plain_times.push_back(p);
        }
        FSDP_TRY(double b, backend_block(options.iters));
        backend.push_back(b);
        if (r % 2 == 0) {
          FSDP_TRY(double p, plain_block(options.iters));
          plain_times.push_back(p);
        }
      }
      // Both sides computed the same thing from all-ones inputs: the gather is all ones, the
      // reduce-scatter n everywhere (exact in fp32).
      if (kind == OpKind::kAllToAll) {
        for (std::size_t i = 0; i < a2a_recv.size(); ++i) {
          const auto want = static_cast<float>(static_cast<std::int64_t>(i) / per_rank + 1);
          if (a2a_recv[i] != want) {
            return Error(
                ErrorCode::kInternal,
                str_cat("all-to-all of ", bytes, " bytes gave a wrong result on rank ",
                        session.rank(), ": element ", i, " is ", a2a_recv[i], "; expected ", want,
                        " (the block of rank ", static_cast<std::int64_t>(i) / per_rank, ")"));
          }
        }
      } else {
        const std::vector<float>& out = gather ? full : part;
        const float want = gather ? 1.0F : static_cast<float>(n);
        if (std::any_of(out.begin(), out.end(), [&](float v) { return v != want; })) {
          return Error(
              ErrorCode::kInternal,
              str_cat(to_string(kind), " of ", bytes, " bytes gave a wrong result on rank ",
                      session.rank(), "; expected every element ", want));
        }
      }
      CommBenchRow row;
      row.kind = kind;
      row.total_bytes = per_rank * n * 4;
      row.backend_seconds = median(backend) / static_cast<double>(options.iters);
      row.plain_seconds = median(plain_times) / static_cast<double>(options.iters);
      const double factor = static_cast<double>(n - 1) / static_cast<double>(n);
      row.backend_busbw_gbps = factor * static_cast<double>(row.total_bytes) /
                               row.backend_seconds / 1e9;
      row.plain_busbw_gbps = factor * static_cast<double>(row.total_bytes) /
                             row.plain_seconds / 1e9;
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace fsdp::cpu

// SPDX-License-Identifier: Apache-2.0
// The Open MPI side of the CPU backend: MpiSession initialises MPI with MPI_THREAD_MULTIPLE when
// the process was started by mpirun and finalises it; make_mpi_communicators splits
// MPI_COMM_WORLD into one communicator per mesh axis (MPI_Comm_split: ranks sharing every other
// coordinate) and duplicates each once per stream (MPI_Comm_dup), so each stream's worker thread
// issues on its own communicator. Collectives are MPI_Allgatherv, MPI_Reduce_scatter and
// MPI_Allreduce (sum, fp32). A watchdog thread aborts every rank (MPI_Abort) with a one-line
// message naming the collective when one runs longer than the timeout. No MPI header leaks.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/exec/communicator.h"
#include "core/base/expected.h"
#include "core/mesh/device_mesh.h"

namespace fsdp::cpu {

// Whether mpirun (Open MPI, or a PMI/PMIx launcher) started this process (environment probe).
bool launched_by_mpi();

class MpiSession {
 public:
  // MPI_Init_thread(MPI_THREAD_MULTIPLE) unless MPI is already initialised (then the session does
  // not finalise). Errors (kUnavailable): the library provides less than MPI_THREAD_MULTIPLE.
  static Expected<std::unique_ptr<MpiSession>> init();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  std::int64_t rank() const { return rank_; }
  std::int64_t size() const { return size_; }

 private:
  MpiSession() = default;
  bool owns_ = false;
  std::int64_t rank_ = 0;
  std::int64_t size_ = 1;
};

// The communicators of this MPI rank on `mesh` (world size must equal the mesh size:
// kInvalidArgument otherwise). timeout_s bounds every collective (the watchdog).
Expected<std::unique_ptr<exec::CommunicatorSet>> make_mpi_communicators(const MpiSession& session,
                                                                        const DeviceMesh& mesh,
                                                                        double timeout_s);

}  // namespace fsdp::cpu

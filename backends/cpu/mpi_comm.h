// SPDX-License-Identifier: Apache-2.0
// The Open MPI communicators of the CPU backend: make_mpi_communicators splits MPI_COMM_WORLD
// into one communicator per mesh axis (MPI_Comm_split: ranks sharing every other coordinate) and
// duplicates each once per stream (MPI_Comm_dup), so each stream's worker thread issues on its
// own communicator. Collectives are MPI_Allgatherv, MPI_Reduce_scatter and MPI_Allreduce (sum,
// fp32) straight on the caller's buffers: no staging copy, no allocation per call. A watchdog
// thread aborts every rank (MPI_Abort) with a one-line message naming the collective and the
// ranks that did not arrive when one runs longer than the timeout (docs/design/backends.md,
// "The executor and the CPU backend"). No MPI header leaks. The session is cpu::MpiSession.
#pragma once

#include <memory>

#include "backends/cpu/mpi_session.h"
#include "backends/exec/communicator.h"
#include "core/base/expected.h"
#include "core/mesh/device_mesh.h"

namespace fsdp::cpu {

// The communicators of this MPI rank on `mesh`; timeout_s bounds every collective (the
// watchdog). Call it before the device whose stream threads will issue the collectives starts
// allocating: it also makes threads that have no malloc arena yet share the process heap
// (mallopt(M_ARENA_MAX, 1)), so MPI's temporaries land where a main-thread caller's would (see
// docs/design/backends.md, "Collective overhead"). Errors: kFailedPrecondition when not launched
// by mpirun; kUnavailable without MPI_THREAD_MULTIPLE or when an MPI call fails;
// kInvalidArgument when the world size differs from the mesh size or the mesh has more than 21
// axes. Testing only: with FSDP_TEST_STALL_COLLECTIVE=R:N in the environment, MPI rank R sleeps
// past the timeout before its N-th collective (counted over every axis and stream from 1).
Expected<std::unique_ptr<exec::CommunicatorSet>> make_mpi_communicators(const MpiSession& session,
                                                                        const DeviceMesh& mesh,
                                                                        double timeout_s);

}  // namespace fsdp::cpu

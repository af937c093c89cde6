// SPDX-License-Identifier: Apache-2.0
// MpiSession: MPI for the commands that spread independent work over a cluster (`fsdpsim sweep`).
// MPI is initialised only when the process was started by an MPI launcher (the probe is
// cpu::launched_by_mpi, shared with `fsdpsim train`: OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE or
// PMI_RANK set); otherwise the session is one process of rank 0 and every operation is local. One
// session per process, initialised on first use and finalised at exit. Not thread-safe: call it
// from the main thread only (MPI_THREAD_FUNNELED).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/base/expected.h"

namespace fsdp::cli {

class MpiSession {
 public:
  // The process's session. On the first call under a launcher, runs MPI_Init_thread; an error
  // (kUnavailable) when that fails, and the same error on every later call.
  static Expected<MpiSession*> get();

  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  bool distributed() const { return distributed_; }  // launched by mpirun: MPI is in use
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  // Collective: every rank passes its bytes; rank 0 gets all of them in rank order, the others
  // an empty vector. One process: {local}. Error (kUnavailable) when an MPI call fails.
  Expected<std::vector<std::string>> gather_to_root(std::string_view local) const;

  // Collective: every rank passes a flag; all get the logical AND. One process: `value`.
  Expected<bool> all_true(bool value) const;

 private:
  MpiSession() = default;
  ~MpiSession();  // MPI_Finalize, when initialised
  Status init();

  bool distributed_ = false;
  bool initialized_ = false;  // by us, so we finalise
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace fsdp::cli

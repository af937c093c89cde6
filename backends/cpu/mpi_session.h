// SPDX-License-Identifier: Apache-2.0
// MpiSession: the one MPI session of an fsdpsim process, shared by every command that uses MPI
// (`fsdpsim train`, `commbench`, `calibrate` and `sweep`). MPI is initialised, on first use, only
// when an MPI launcher started the process (launched_by_mpi); otherwise the session is one local
// process of rank 0 and its collectives are local. It requests MPI_THREAD_MULTIPLE (the CPU
// backend issues collectives from one worker thread per stream) and records what the library
// provides: a library without it still serves main-thread users (sweep), while
// require_thread_multiple() gives the backend a clear error. Finalised after main returns.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/expected.h"

namespace fsdp::cpu {

// Whether mpirun (Open MPI, or a PMI/PMIx launcher) started this process (environment probe:
// OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_SIZE or PMI_RANK set).
bool launched_by_mpi();

class MpiSession {
 public:
  // The process's session. Under a launcher the first call runs MPI_Init_thread (unless MPI is
  // already initialised, which the session then leaves to its owner to finalise); when that
  // fails, an error (kUnavailable), and the same error on every later call.
  static Expected<MpiSession*> get();

  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  bool distributed() const { return distributed_; }  // launched by mpirun: MPI is in use
  std::int64_t rank() const { return rank_; }
  std::int64_t size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  // Ok when collectives may be issued from several threads at once (MPI_THREAD_MULTIPLE, or no
  // MPI at all); otherwise kUnavailable naming the level the library provides.
  Status require_thread_multiple() const;

  // Collective: every rank passes its bytes; rank 0 gets all of them in rank order, the others
  // an empty vector. One process: {local}. Errors: kOutOfRange past MPI's int counts,
  // kUnavailable when an MPI call fails.
  Expected<std::vector<std::string>> gather_to_root(std::string_view local) const;

  // Collective: every rank passes a flag; all get the logical AND. One process: `value`.
  Expected<bool> all_true(bool value) const;

  // Collective with a deadline (issue 16, class 5): every rank passes a few bytes and gets every
  // rank's bytes, indexed by rank; `what` names the meeting point ("the sweep's setup"). It is
  // point-to-point messages on the session's own communicator, polled, so a rank that does not
  // arrive within timeout_s is known by number: the job then ends (MPI_Abort, exit 1) with
  // "fsdpsim: error: rank(s) R did not reach <what> within T s", printed once, by the lowest
  // rank that did arrive. One process: {local}. Test-only fault injection: the rank named by the
  // environment variable FSDP_TEST_STALL_RANK never arrives (it sleeps past every timeout).
  Expected<std::vector<std::string>> exchange(std::string_view local, std::string_view what,
                                              double timeout_s) const;
  // exchange with no bytes: a barrier with a deadline that names the ranks that did not arrive.
  Status arrive(std::string_view what, double timeout_s) const;

 private:
  MpiSession() = default;
  ~MpiSession();  // MPI_Finalize, when this session initialised MPI
  Status init();

  bool distributed_ = false;
  bool owns_ = false;  // this session initialised MPI, so it finalises it
  int provided_ = 0;   // thread level the library provides (MPI_THREAD_*)
  int multiple_ = 0;   // MPI_THREAD_MULTIPLE's value (the header stays in the .cc)
  std::int64_t rank_ = 0;
  std::int64_t size_ = 1;
};

}  // namespace fsdp::cpu

// SPDX-License-Identifier: Apache-2.0
// Verdicts every rank reaches alike under an MPI launcher (issue 16, class 5: "errors under
// mpirun are printed once"). Every rank parses the same command line and validates the same
// options, so every rank reaches the same verdict on them; only the launcher's rank 0 prints it.
// mpirun ends the job when the first rank exits non-zero, and must not kill rank 0 before it has
// printed: the quiet ranks of a refusal linger until it has (mpirun then ends them). No MPI call
// is made: the verdict may come before MPI is initialised, or in a process that only looks
// launched (a test's environment).
#pragma once

#include <ostream>
#include <streambuf>

#include "cli/command.h"

namespace fsdp::cli {

// This process's rank as the MPI launcher set it (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK);
// 0 without a launcher or when the variable cannot be read.
long long launcher_rank();

// The Io a rank prints its verdicts on: the caller's on launcher rank 0 (and without a
// launcher), a sink that discards everything on the other ranks. Holds the sink; not movable.
class VerdictIo {
 public:
  explicit VerdictIo(Io& io);
  VerdictIo(const VerdictIo&) = delete;
  VerdictIo& operator=(const VerdictIo&) = delete;

  Io& io() { return root_ ? io_ : quiet_; }
  bool root() const { return root_; }

 private:
  class NullBuffer : public std::streambuf {
   protected:
    int_type overflow(int_type ch) override { return traits_type::not_eof(ch); }
  };
  Io& io_;
  bool root_;
  NullBuffer null_buffer_;
  std::ostream null_stream_;
  Io quiet_;
};

// Returns `code`, an exit status. Under an MPI launcher, a rank other than 0 refusing (code != 0)
// first waits up to `linger_s` seconds, the time rank 0 has to print the verdict and exit (which
// ends the job).
int refuse_together(int code, double linger_s = 10.0);

}  // namespace fsdp::cli

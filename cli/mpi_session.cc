// SPDX-License-Identifier: Apache-2.0
// The session object is a function-local static: initialised on first use, destroyed (and MPI
// finalised) after main returns, once every command is done with it.
#include "cli/mpi_session.h"

#include <limits>

#include "backends/cpu/mpi_comm.h"
#include "core/base/strings.h"

#include <mpi.h>

namespace fsdp::cli {
namespace {

Error mpi_error(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return Error(ErrorCode::kUnavailable, str_cat(call, " failed: ", text));
}

}  // namespace

Expected<MpiSession*> MpiSession::get() {
  static MpiSession session;
  static const Status status = session.init();
  if (!status) {
    return status.error();
  }
  return &session;
}

Status MpiSession::init() {
  if (!cpu::launched_by_mpi()) {
    return ok_status();
  }
  int already = 0;
  MPI_Initialized(&already);
  if (already == 0) {
    int provided = 0;
    if (const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
        rc != MPI_SUCCESS) {
      return mpi_error("MPI_Init_thread", rc);
    }
    initialized_ = true;
  }
  distributed_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  return ok_status();
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initialized_ && finalized == 0) {
    MPI_Finalize();
  }
}

Expected<std::vector<std::string>> MpiSession::gather_to_root(std::string_view local) const {
  if (!distributed_ || size_ == 1) {
    return std::vector<std::string>{std::string(local)};
  }
  if (local.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("rank ", rank_, " has ", local.size(),
                         " bytes to gather; MPI counts stop at 2^31 - 1"));
  }
  const int length = static_cast<int>(local.size());
  std::vector<int> lengths(is_root() ? static_cast<std::size_t>(size_) : 0);
  if (const int rc = MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0,
                                MPI_COMM_WORLD);
      rc != MPI_SUCCESS) {
    return mpi_error("MPI_Gather", rc);
  }
  std::vector<int> offsets(lengths.size());
  std::int64_t total = 0;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    if (total > std::numeric_limits<int>::max() - lengths[r]) {
      return Error(ErrorCode::kOutOfRange, "gathered results exceed 2^31 - 1 bytes");
    }
    offsets[r] = static_cast<int>(total);
    total += lengths[r];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  if (const int rc = MPI_Gatherv(local.data(), length, MPI_CHAR, all.data(), lengths.data(),
                                 offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
      rc != MPI_SUCCESS) {
    return mpi_error("MPI_Gatherv", rc);
  }
  std::vector<std::string> parts;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    parts.push_back(all.substr(static_cast<std::size_t>(offsets[r]),
                               static_cast<std::size_t>(lengths[r])));
  }
  return parts;
}

Expected<bool> MpiSession::all_true(bool value) const {
  if (!distributed_ || size_ == 1) {
    return value;
  }
  int local = value ? 1 : 0;
  int global = 0;
  if (const int rc = MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
      rc != MPI_SUCCESS) {
    return mpi_error("MPI_Allreduce", rc);
  }
  return global != 0;
}

}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
// The session object is a function-local static: initialised on first use, destroyed (and MPI
// finalised) after main returns, once every command is done with it and has freed its
// communicators.
#include "backends/cpu/mpi_session.h"

#include <mpi.h>

#include <array>
#include <cstdlib>
#include <limits>

#include "backends/cpu/internal/mpi_error.h"
#include "core/base/strings.h"

namespace fsdp {
namespace internal {

Error mpi_error(int code, std::string_view call) {
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int length = 0;
  MPI_Error_string(code, text.data(), &length);
  return Error(ErrorCode::kUnavailable,
               str_cat(call, " failed: ",
                       std::string_view(text.data(), static_cast<std::size_t>(length))));
}

}  // namespace internal

namespace cpu {

using internal::mpi_error;

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"}) {
    if (std::getenv(var) != nullptr) {
      return true;
    }
  }
  return false;
}

Expected<MpiSession*> MpiSession::get() {
  static MpiSession session;
  static const Status status = session.init();
  if (!status) {
    return status.error();
  }
  return &session;
}

Status MpiSession::init() {
  multiple_ = MPI_THREAD_MULTIPLE;
  if (!launched_by_mpi()) {
    provided_ = MPI_THREAD_MULTIPLE;  // no MPI: nothing to race on
    return ok_status();
  }
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised == 0) {
    if (const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided_);
        rc != MPI_SUCCESS) {
      return mpi_error(rc, "MPI_Init_thread");
    }
    owns_ = true;
  } else {
    MPI_Query_thread(&provided_);
  }
  distributed_ = true;
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  rank_ = rank;
  size_ = size;
  return ok_status();
}

MpiSession::~MpiSession() {
  if (!owns_) {
    return;
  }
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised == 0) {
    MPI_Finalize();
  }
}

Status MpiSession::require_thread_multiple() const {
  if (provided_ < multiple_) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("the MPI library provides thread level ", provided_,
                         "; the CPU backend issues collectives from one thread per stream and "
                         "needs MPI_THREAD_MULTIPLE (",
                         multiple_, ")"));
  }
  return ok_status();
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
  if (const int rc =
          MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
      rc != MPI_SUCCESS) {
    return mpi_error(rc, "MPI_Gather");
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
    return mpi_error(rc, "MPI_Gatherv");
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
    return mpi_error(rc, "MPI_Allreduce");
  }
  return global != 0;
}

}  // namespace cpu
}  // namespace fsdp

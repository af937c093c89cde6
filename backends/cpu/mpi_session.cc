// SPDX-License-Identifier: Apache-2.0
// The session object is a function-local static: initialised on first use, destroyed (and MPI
// finalised) after main returns, once every command is done with it and has freed its
// communicators.
#include "backends/cpu/mpi_session.h"

#include <mpi.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <thread>

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

namespace {

// The session's own communicator for exchange(): its messages never match the commands' own.
MPI_Comm g_exchange_comm = MPI_COMM_NULL;

// FSDP_TEST_STALL_RANK, or -1.
std::int64_t test_stall_rank() {
  const char* text = std::getenv("FSDP_TEST_STALL_RANK");
  if (text == nullptr) {
    return -1;
  }
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  return end != text && *end == '\0' ? v : -1;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    out += str_cat(i == 0 ? "" : ", ", ranks[i]);
  }
  return out;
}

}  // namespace

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
  if (const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &g_exchange_comm); rc != MPI_SUCCESS) {
    return mpi_error(rc, "MPI_Comm_dup");
  }
  return ok_status();
}

MpiSession::~MpiSession() {
  if (!owns_) {
    return;
  }
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised == 0) {
    if (g_exchange_comm != MPI_COMM_NULL) {
      MPI_Comm_free(&g_exchange_comm);
    }
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

Expected<std::vector<std::string>> MpiSession::exchange(std::string_view local,
                                                         std::string_view what,
                                                         double timeout_s) const {
  if (!(std::isfinite(timeout_s) && timeout_s > 0.0)) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("the timeout of ", what, " is ", timeout_s, "; expected > 0 seconds"));
  }
  if (!distributed_ || size_ == 1) {
    return std::vector<std::string>{std::string(local)};
  }
  if (local.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("rank ", rank_, " has ", local.size(), " bytes for ", what,
                         "; MPI counts stop at 2^31 - 1"));
  }
  if (rank_ == test_stall_rank()) {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(10.0 * timeout_s, 3600.0)));
  }
  // Every exchange has its own tag, so a late message of one never matches the next.
  static int round = 0;
  const int tag = round++ % 32000;
  const auto n = static_cast<std::size_t>(size_);
  const auto me = static_cast<std::size_t>(rank_);
  std::vector<std::string> parts(n);
  std::vector<bool> arrived(n, false);
  parts[me] = std::string(local);
  arrived[me] = true;
  std::vector<MPI_Request> sends;
  for (std::size_t r = 0; r < n; ++r) {
    if (r != me) {
      MPI_Request request = MPI_REQUEST_NULL;
      if (const int rc = MPI_Isend(local.data(), static_cast<int>(local.size()), MPI_CHAR,
                                   static_cast<int>(r), tag, g_exchange_comm, &request);
          rc != MPI_SUCCESS) {
        return mpi_error(rc, "MPI_Isend");
      }
      sends.push_back(request);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::size_t missing = n - 1;
  int sent = 0;
  while (missing > 0 || sent == 0) {
    for (std::size_t r = 0; r < n; ++r) {
      if (arrived[r]) {
        continue;
      }
      int flag = 0;
      MPI_Status status;
      MPI_Iprobe(static_cast<int>(r), tag, g_exchange_comm, &flag, &status);
      if (flag != 0) {
        int count = 0;
        MPI_Get_count(&status, MPI_CHAR, &count);
        parts[r].resize(static_cast<std::size_t>(count));
        MPI_Recv(parts[r].data(), count, MPI_CHAR, static_cast<int>(r), tag, g_exchange_comm,
                 MPI_STATUS_IGNORE);
        arrived[r] = true;
        --missing;
      }
    }
    MPI_Testall(static_cast<int>(sends.size()), sends.data(), &sent, MPI_STATUSES_IGNORE);
    if (missing == 0 && sent != 0) {
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::vector<int> absent;
      for (std::size_t r = 0; r < n; ++r) {
        if (!arrived[r]) {
          absent.push_back(static_cast<int>(r));
        }
      }
      // The lowest rank that arrived speaks for all; the others give it time to, then abort.
      std::size_t speaker = 0;
      while (speaker < n && !arrived[speaker]) {
        ++speaker;
      }
      if (speaker == me) {
        std::fprintf(stderr,
                     "fsdpsim: error: rank%s %s did not reach %.*s within %g s (stalled or lost); "
                     "aborting every rank\n",
                     absent.size() == 1 ? "" : "s", rank_list(absent).c_str(),
                     static_cast<int>(what.size()), what.data(), timeout_s);
        std::fflush(stderr);
      } else {
        std::this_thread::sleep_for(std::chrono::seconds(2));
      }
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return parts;
}

Status MpiSession::arrive(std::string_view what, double timeout_s) const {
  FSDP_TRY(const std::vector<std::string> parts, exchange({}, what, timeout_s));
  return ok_status();
}

}  // namespace cpu
}  // namespace fsdp

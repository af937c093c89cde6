// SPDX-License-Identifier: Apache-2.0
// MPI communicators. Open MPI 4.1 has no asynchronous progress, so each stream's collectives are
// blocking calls on that stream's worker thread (backend-notes §5.2), on its own MPI_Comm_dup
// (§5.3: two threads must never race on one communicator).
#include "backends/cpu/mpi_comm.h"

#include <mpi.h>

#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/base/strings.h"

namespace fsdp::cpu {
namespace {

std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

Error mpi_error(int code, std::string_view call) {
  std::array<char, MPI_MAX_ERROR_STRING> text{};
  int len = 0;
  MPI_Error_string(code, text.data(), &len);
  return Error(ErrorCode::kUnavailable,
               str_cat(call, " failed: ", std::string_view(text.data(), idx(len))));
}

// Aborts every rank when a registered collective outlives the timeout.
class Watchdog {
 public:
  explicit Watchdog(double timeout_s) : timeout_(timeout_s), thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void begin(std::size_t slot, std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    active_[slot] = Active{true, std::chrono::steady_clock::now(), std::move(what)};
  }
  void end(std::size_t slot) {
    std::lock_guard<std::mutex> lock(mu_);
    active_[slot].on = false;
  }

 private:
  struct Active {
    bool on = false;
    std::chrono::steady_clock::time_point since;
    std::string what;
  };
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      const auto now = std::chrono::steady_clock::now();
      for (const Active& a : active_) {
        if (a.on && std::chrono::duration<double>(now - a.since).count() > timeout_) {
          int rank = 0;
          MPI_Comm_rank(MPI_COMM_WORLD, &rank);
          std::fprintf(stderr,
                       "fsdpsim: error: rank %d: MPI %s did not complete within %g s; aborting "
                       "every rank\n",
                       rank, a.what.c_str(), timeout_);
          std::fflush(stderr);
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
      }
    }
  }
  double timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::array<Active, 64> active_{};
  std::thread thread_;
};

Expected<std::vector<int>> int_counts(std::span<const std::int64_t> counts,
                                      std::vector<int>* displs) {
  std::vector<int> out;
  std::int64_t off = 0;
  for (std::int64_t c : counts) {
    if (c > INT_MAX || off > INT_MAX) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("MPI counts are int: ", c, " elements at offset ", off, " do not fit"));
    }
    out.push_back(static_cast<int>(c));
    if (displs != nullptr) {
      displs->push_back(static_cast<int>(off));
    }
    off += c;
  }
  return out;
}

class MpiComm final : public exec::Communicator {
 public:
  MpiComm(std::string axis_name, std::array<MPI_Comm, kNumStreams> comms, std::int64_t rank,
          std::int64_t size, Watchdog* watchdog, std::size_t slot_base)
      : axis_name_(std::move(axis_name)),
        comms_(comms),
        rank_(rank),
        size_(size),
        watchdog_(watchdog),
        slot_base_(slot_base) {}
  ~MpiComm() override {
    for (MPI_Comm& c : comms_) {
      MPI_Comm_free(&c);
    }
  }
  std::int64_t rank() const override { return rank_; }
  std::int64_t size() const override { return size_; }
  const std::string& axis_name() const override { return axis_name_; }

  Status all_gather_v(StreamKind stream, DType dtype, const void* send,
                      std::span<const std::int64_t> counts, void* recv) override {
    FSDP_RETURN_IF_ERROR(check(dtype, counts));
    std::vector<int> displs;
    FSDP_TRY(std::vector<int> c, int_counts(counts, &displs));
    const void* in = send;
    if (static_cast<const char*>(send) ==
        static_cast<char*>(recv) + static_cast<std::ptrdiff_t>(displs[idx(rank_)]) * 4) {
      in = MPI_IN_PLACE;
    }
    Guard g(this, stream, "all-gather");
    const int rc = MPI_Allgatherv(in, c[idx(rank_)], MPI_FLOAT, recv, c.data(), displs.data(),
                                  MPI_FLOAT, comm(stream));
    return rc == MPI_SUCCESS ? ok_status() : Status(mpi_error(rc, "MPI_Allgatherv"));
  }
  Status reduce_scatter_v(StreamKind stream, DType dtype, const void* send,
                          std::span<const std::int64_t> counts, void* recv) override {
    FSDP_RETURN_IF_ERROR(check(dtype, counts));
    FSDP_TRY(std::vector<int> c, int_counts(counts, nullptr));
    Guard g(this, stream, "reduce-scatter");
    const int rc =
        MPI_Reduce_scatter(send, recv, c.data(), MPI_FLOAT, MPI_SUM, comm(stream));
    return rc == MPI_SUCCESS ? ok_status() : Status(mpi_error(rc, "MPI_Reduce_scatter"));
  }
  Status all_reduce(StreamKind stream, DType dtype, void* buf, std::int64_t count) override {
    const std::int64_t counts[] = {count};
    FSDP_RETURN_IF_ERROR(check(dtype, std::span<const std::int64_t>()));
    FSDP_TRY(std::vector<int> c, int_counts(counts, nullptr));
    Guard g(this, stream, "all-reduce");
    const int rc =
        MPI_Allreduce(MPI_IN_PLACE, buf, c[0], MPI_FLOAT, MPI_SUM, comm(stream));
    return rc == MPI_SUCCESS ? ok_status() : Status(mpi_error(rc, "MPI_Allreduce"));
  }

 private:
  struct Guard {
    Guard(MpiComm* c, StreamKind stream, const char* what)
        : comm(c), slot(c->slot_base_ + static_cast<std::size_t>(stream)) {
      comm->watchdog_->begin(slot, str_cat(what, " on mesh axis '", comm->axis_name_, "' (",
                                           to_string(stream), " stream)"));
    }
    ~Guard() { comm->watchdog_->end(slot); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    MpiComm* comm;
    std::size_t slot;
  };
  Status check(DType dtype, std::span<const std::int64_t> counts) const {
    if (dtype != DType::kFp32) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("MPI collectives support fp32 only; got ", to_string(dtype)));
    }
    if (!counts.empty() && static_cast<std::int64_t>(counts.size()) != size_) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("collective on mesh axis '", axis_name_, "' has ", counts.size(),
                           " counts; the axis has ", size_, " members"));
    }
    return ok_status();
  }
  MPI_Comm comm(StreamKind stream) const { return comms_[static_cast<std::size_t>(stream)]; }

  std::string axis_name_;
  std::array<MPI_Comm, kNumStreams> comms_;
  std::int64_t rank_;
  std::int64_t size_;
  Watchdog* watchdog_;
  std::size_t slot_base_;
};

class MpiSet final : public exec::CommunicatorSet {
 public:
  explicit MpiSet(double timeout_s) : watchdog_(timeout_s) {}
  std::int64_t num_axes() const override { return static_cast<std::int64_t>(comms_.size()); }
  exec::Communicator& axis(std::int64_t mesh_axis) override { return *comms_.at(idx(mesh_axis)); }
  void abort(const Error& error) override {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "fsdpsim: error: rank %d: %s; aborting every rank\n", rank,
                 error.message().c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  Watchdog watchdog_;
  std::vector<std::unique_ptr<MpiComm>> comms_;
};

}  // namespace

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"}) {
    if (std::getenv(var) != nullptr) {
      return true;
    }
  }
  return false;
}

Expected<std::unique_ptr<MpiSession>> MpiSession::init() {
  std::unique_ptr<MpiSession> s(new MpiSession());
  int initialised = 0;
  MPI_Initialized(&initialised);
  int provided = 0;
  if (initialised == 0) {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      return mpi_error(rc, "MPI_Init_thread");
    }
    s->owns_ = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("the MPI library provides thread level ", provided,
                         "; the CPU backend needs MPI_THREAD_MULTIPLE (", MPI_THREAD_MULTIPLE,
                         ")"));
  }
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  s->rank_ = rank;
  s->size_ = size;
  return s;
}

MpiSession::~MpiSession() {
  if (owns_) {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (finalised == 0) {
      MPI_Finalize();
    }
  }
}

Expected<std::unique_ptr<exec::CommunicatorSet>> make_mpi_communicators(const MpiSession& session,
                                                                        const DeviceMesh& mesh,
                                                                        double timeout_s) {
  if (session.size() != mesh.size()) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("mpirun started ", session.size(), " ranks; the mesh ", to_string(mesh),
                         " has ", mesh.size()));
  }
  if (mesh.ndim() * kNumStreams > 64) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("the MPI backend supports at most 21 mesh axes; got ", mesh.ndim()));
  }
  auto set = std::make_unique<MpiSet>(timeout_s);
  FSDP_TRY(MeshCoordinate coord, mesh.coordinate(session.rank()));
  for (std::int64_t a = 0; a < mesh.ndim(); ++a) {
    MeshCoordinate c = coord;
    c.local_ranks[idx(a)] = 0;
    FSDP_TRY(std::int64_t color, mesh.rank_of(c.local_ranks));
    MPI_Comm split = MPI_COMM_NULL;
    int rc = MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(color),
                            static_cast<int>(coord.local_ranks[idx(a)]), &split);
    if (rc != MPI_SUCCESS) {
      return mpi_error(rc, "MPI_Comm_split");
    }
    std::array<MPI_Comm, kNumStreams> dups{};
    for (std::size_t s = 0; s < dups.size(); ++s) {
      rc = MPI_Comm_dup(split, &dups[s]);
      if (rc != MPI_SUCCESS) {
        return mpi_error(rc, "MPI_Comm_dup");
      }
    }
    MPI_Comm_free(&split);
    set->comms_.push_back(std::make_unique<MpiComm>(
        mesh.axis_name(a), dups, coord.local_ranks[idx(a)], mesh.axis_size(a), &set->watchdog_,
        idx(a) * kNumStreams));
  }
  return std::unique_ptr<exec::CommunicatorSet>(std::move(set));
}

}  // namespace fsdp::cpu

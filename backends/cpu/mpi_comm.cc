// SPDX-License-Identifier: Apache-2.0
// MPI communicators. Open MPI 4.1 has no asynchronous progress, so each stream's collectives are
// blocking calls on that stream's worker thread, on its own MPI_Comm_dup (two threads must
// never race on one communicator; docs/design/backends.md, "CPU backend"). The per-call path is an int
// conversion of the counts into per-stream scratch (reused, so no allocation after the first
// call), two relaxed-cost atomic stores for the watchdog and the MPI call itself.
#include "backends/cpu/mpi_comm.h"

#include <mpi.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/internal/mpi_error.h"
#include "core/base/strings.h"

namespace fsdp::cpu {
namespace {

using internal::mpi_error;

std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

constexpr std::size_t kStreams = static_cast<std::size_t>(kNumStreams);

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Aborts every rank when a registered collective outlives the timeout. A slot is one (mesh axis,
// stream): its thread marks a collective's start and end with atomic stores (no lock, no
// allocation); the watchdog thread polls every 50 ms and builds the message only on a timeout.
class Watchdog {
 public:
  static constexpr std::size_t kSlots = 64;

  explicit Watchdog(double timeout_s)
      : timeout_ns_(static_cast<std::int64_t>(timeout_s * 1e9)), thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Where slot `slot` issues ("mesh axis 'dp' (all-gather stream)"); set before any collective
  // of the slot (the device's task hand-off orders it before begin()).
  void name(std::size_t slot, std::string where) { where_[slot] = std::move(where); }
  void begin(std::size_t slot, const char* what) {
    what_[slot].store(what, std::memory_order_relaxed);
    since_ns_[slot].store(steady_ns(), std::memory_order_release);
  }
  void end(std::size_t slot) { since_ns_[slot].store(0, std::memory_order_release); }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      const std::int64_t now = steady_ns();
      for (std::size_t s = 0; s < kSlots; ++s) {
        const std::int64_t since = since_ns_[s].load(std::memory_order_acquire);
        if (since != 0 && now - since > timeout_ns_) {
          int rank = 0;
          MPI_Comm_rank(MPI_COMM_WORLD, &rank);
          std::fprintf(stderr,
                       "fsdpsim: error: rank %d: MPI %s on %s did not complete within %g s; "
                       "aborting every rank\n",
                       rank, what_[s].load(std::memory_order_relaxed), where_[s].c_str(),
                       static_cast<double>(timeout_ns_) / 1e9);
          std::fflush(stderr);
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
      }
    }
  }

  std::int64_t timeout_ns_;
  std::array<std::atomic<std::int64_t>, kSlots> since_ns_{};  // 0: idle
  std::array<std::atomic<const char*>, kSlots> what_{};
  std::array<std::string, kSlots> where_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

class MpiComm final : public exec::Communicator {
 public:
  MpiComm(std::string axis_name, std::array<MPI_Comm, kNumStreams> comms, std::int64_t rank,
          std::int64_t size, Watchdog* watchdog, std::size_t slot_base)
      : axis_name_(std::move(axis_name)),
        comms_(comms),
        rank_(rank),
        size_(size),
        watchdog_(watchdog),
        slot_base_(slot_base) {
    for (std::size_t s = 0; s < kStreams; ++s) {
      watchdog_->name(slot_base_ + s, str_cat("mesh axis '", axis_name_, "' (",
                                              to_string(static_cast<StreamKind>(s)),
                                              " stream)"));
      scratch_[s].counts.reserve(idx(size_));
      scratch_[s].displs.reserve(idx(size_));
    }
  }
  ~MpiComm() override {
    for (MPI_Comm& c : comms_) {
      MPI_Comm_free(&c);
    }
  }
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  std::int64_t rank() const override { return rank_; }
  std::int64_t size() const override { return size_; }
  const std::string& axis_name() const override { return axis_name_; }

  Status all_gather_v(StreamKind stream, DType dtype, const void* send,
                      std::span<const std::int64_t> counts, void* recv) override {
    FSDP_RETURN_IF_ERROR(check(dtype, counts));
    Scratch& s = scratch(stream);
    FSDP_RETURN_IF_ERROR(to_int(counts, s));
    const std::ptrdiff_t mine = s.displs[idx(rank_)];
    const void* in =
        static_cast<const float*>(send) == static_cast<float*>(recv) + mine ? MPI_IN_PLACE : send;
    Guard g(this, stream, "all-gather");
    const int rc = MPI_Allgatherv(in, s.counts[idx(rank_)], MPI_FLOAT, recv, s.counts.data(),
                                  s.displs.data(), MPI_FLOAT, comm(stream));
    return rc == MPI_SUCCESS ? ok_status() : Status(mpi_error(rc, "MPI_Allgatherv"));
  }
  Status reduce_scatter_v(StreamKind stream, DType dtype, const void* send,
                          std::span<const std::int64_t> counts, void* recv) override {
    FSDP_RETURN_IF_ERROR(check(dtype, counts));
    Scratch& s = scratch(stream);
    FSDP_RETURN_IF_ERROR(to_int(counts, s));
    Guard g(this, stream, "reduce-scatter");
    const int rc =
        MPI_Reduce_scatter(send, recv, s.counts.data(), MPI_FLOAT, MPI_SUM, comm(stream));
    return rc == MPI_SUCCESS ? ok_status() : Status(mpi_error(rc, "MPI_Reduce_scatter"));
  }
  Status all_reduce(StreamKind stream, DType dtype, void* buf, std::int64_t count) override {
    FSDP_RETURN_IF_ERROR(check(dtype, std::span<const std::int64_t>()));
    if (count < 0 || count > INT_MAX) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("all-reduce on mesh axis '", axis_name_, "' of ", count,
                           " elements; MPI counts are int, in [0, ", INT_MAX, "]"));
    }
    Guard g(this, stream, "all-reduce");
    const int rc = MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                                 comm(stream));
    return rc == MPI_SUCCESS ? ok_status() : Status(mpi_error(rc, "MPI_Allreduce"));
  }

 private:
  // MPI's int counts and displacements of one stream's current call.
  struct Scratch {
    std::vector<int> counts;
    std::vector<int> displs;
  };
  struct Guard {
    Guard(MpiComm* c, StreamKind stream, const char* what)
        : comm(c), slot(c->slot_base_ + static_cast<std::size_t>(stream)) {
      comm->watchdog_->begin(slot, what);
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
  // Fills s (resize within the reserved capacity: no allocation); kOutOfRange when a count or an
  // offset does not fit MPI's int.
  Status to_int(std::span<const std::int64_t> counts, Scratch& s) const {
    s.counts.resize(counts.size());
    s.displs.resize(counts.size());
    std::int64_t off = 0;
    for (std::size_t i = 0; i < counts.size(); ++i) {
      const std::int64_t c = counts[i];
      if (c < 0 || c > INT_MAX || off > INT_MAX) {
        return Error(ErrorCode::kOutOfRange,
                     str_cat("collective on mesh axis '", axis_name_, "': member ", i, " has ", c,
                             " elements at offset ", off, "; MPI counts are int, in [0, ",
                             INT_MAX, "]"));
      }
      s.counts[i] = static_cast<int>(c);
      s.displs[i] = static_cast<int>(off);
      off += c;
    }
    return ok_status();
  }
  Scratch& scratch(StreamKind stream) { return scratch_[static_cast<std::size_t>(stream)]; }
  MPI_Comm comm(StreamKind stream) const { return comms_[static_cast<std::size_t>(stream)]; }

  std::string axis_name_;
  std::array<MPI_Comm, kNumStreams> comms_;
  std::int64_t rank_;
  std::int64_t size_;
  Watchdog* watchdog_;
  std::size_t slot_base_;
  std::array<Scratch, kNumStreams> scratch_;  // each used by its stream's thread only
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
  std::vector<std::unique_ptr<MpiComm>> comms_;  // destroyed before the watchdog
};

}  // namespace

Expected<std::unique_ptr<exec::CommunicatorSet>> make_mpi_communicators(const MpiSession& session,
                                                                        const DeviceMesh& mesh,
                                                                        double timeout_s) {
  if (!session.distributed()) {
    return Error(ErrorCode::kFailedPrecondition,
                 "MPI communicators need a process started by mpirun (e.g. mpirun -np 4 ...)");
  }
  FSDP_RETURN_IF_ERROR(session.require_thread_multiple());
  if (session.size() != mesh.size()) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("mpirun started ", session.size(), " ranks; the mesh ", to_string(mesh),
                         " has ", mesh.size()));
  }
  if (idx(mesh.ndim()) * kStreams > Watchdog::kSlots) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("the MPI backend supports at most ", Watchdog::kSlots / kStreams,
                         " mesh axes; got ", mesh.ndim()));
  }
#if defined(__GLIBC__)
  // Stream threads would otherwise each get a fresh glibc arena whose layout is the same on every
  // rank, so Open MPI's temporaries (the ring reduce-scatter's accumulation and receive buffers)
  // sit at the same page offsets on every rank: the receive buffer starts 16 bytes past the
  // peer's send block, the offset at which the kernel's `rep movsb` (the CMA copy) runs ~3x
  // slower on AMD Zen. One shared arena places them as for a main-thread caller.
  mallopt(M_ARENA_MAX, 1);
#endif
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
        idx(a) * kStreams));
  }
  return std::unique_ptr<exec::CommunicatorSet>(std::move(set));
}

}  // namespace fsdp::cpu

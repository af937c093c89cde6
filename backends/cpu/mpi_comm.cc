// SPDX-License-Identifier: Apache-2.0
// MPI communicators. Open MPI 4.1 has no asynchronous progress, so each stream's collectives are
// blocking calls on that stream's worker thread, on its own MPI_Comm_dup (two threads must
// never race on one communicator; docs/design/backends.md, "CPU backend"). The per-call path is an int
// conversion of the counts into per-stream scratch (reused, so no allocation after the first
// call), three relaxed-cost atomic stores for the watchdog and the MPI call itself.
#include "backends/cpu/mpi_comm.h"

#include <mpi.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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

// Test-only fault injection (FSDP_TEST_STALL_COLLECTIVE=R:N): MPI rank R sleeps, past every
// timeout, before its N-th collective (counted from 1 over every axis and stream of the process),
// so the others are left inside a running collective. Off (null) unless the variable is set.
struct CollectiveStall {
  std::int64_t rank = -1;
  std::int64_t at = 0;
  double sleep_s = 0.0;
  std::atomic<std::int64_t> issued{0};
  void maybe_stall() {
    if (issued.fetch_add(1, std::memory_order_relaxed) + 1 == at) {
      std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
    }
  }
};

// FSDP_TEST_STALL_COLLECTIVE for this rank, or null.
std::unique_ptr<CollectiveStall> test_collective_stall(std::int64_t my_rank, double timeout_s) {
  const char* text = std::getenv("FSDP_TEST_STALL_COLLECTIVE");
  if (text == nullptr) {
    return nullptr;
  }
  char* colon = nullptr;
  const long long rank = std::strtoll(text, &colon, 10);
  if (colon == text || *colon != ':') {
    return nullptr;
  }
  char* end = nullptr;
  const long long at = std::strtoll(colon + 1, &end, 10);
  if (end == colon + 1 || *end != '\0' || rank != my_rank || at < 1) {
    return nullptr;
  }
  auto stall = std::make_unique<CollectiveStall>();
  stall->rank = rank;
  stall->at = at;
  stall->sleep_s = std::min(10.0 * timeout_s, 3600.0);
  return stall;
}

// Aborts every rank when a registered collective outlives the timeout, naming the ranks that did
// not arrive. A slot is one (mesh axis, stream): its thread marks a collective's start and end
// with atomic stores and counts the collectives it began (no lock, no allocation); the watchdog
// thread polls every 50 ms and answers the other ranks' questions on its own communicator.
//
// Naming the missing ranks (docs/design/backends.md, "The executor and the CPU backend"): on a
// timeout the watchdog asks every other member of the slot's axis group how many collectives it
// has begun on that slot (one small message each; their watchdogs answer within a poll). A
// member that has begun fewer than this rank, or does not answer within a second, did not
// arrive. Every member that did arrive times out too; the lowest of them prints the one line and
// aborts the job, the others wait until it has had time to (and print only if it did not). A
// rank missing from groups of several axes has a speaker in each: they claim the missing rank's
// watchdog (when it answers) and only the first claim prints.
class Watchdog {
 public:
  static constexpr std::size_t kSlots = 64;

  // probe: a communicator over MPI_COMM_WORLD that only watchdogs use; freed by the destructor.
  Watchdog(double timeout_s, MPI_Comm probe)
      : timeout_ns_(static_cast<std::int64_t>(timeout_s * 1e9)),
        probe_(probe),
        world_rank_(world_rank()),
        thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    MPI_Comm_free(&probe_);
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Where slot `slot` issues ("mesh axis 'dp' (all-gather stream)") and the MPI_COMM_WORLD ranks
  // of its axis group; set before any collective of the slot (the device's task hand-off orders
  // it before begin()).
  void name(std::size_t slot, std::string where, std::vector<int> members) {
    where_[slot] = std::move(where);
    members_[slot] = std::move(members);
  }
  void begin(std::size_t slot, const char* what) {
    what_[slot].store(what, std::memory_order_relaxed);
    begun_[slot].store(begun_[slot].load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);
    since_ns_[slot].store(steady_ns(), std::memory_order_release);
  }
  void end(std::size_t slot) { since_ns_[slot].store(0, std::memory_order_release); }

 private:
  static constexpr int kQueryTag = 1;
  static constexpr int kReplyTag = 2;
  // A speaker's claim to print the one line for a missing rank, sent to that rank's watchdog,
  // and its answer (1: granted, the first claim it received; 0: another speaker has it).
  static constexpr int kClaimTag = 3;
  static constexpr int kGrantTag = 4;
  // A reply: {slot, collectives begun on it, ns inside the current one or -1 when idle, another
  // slot the rank is inside a collective of or -1}.
  using Reply = std::array<std::int64_t, 4>;

  static int world_rank() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      answer_queries();
      const std::int64_t now = steady_ns();
      for (std::size_t s = 0; s < kSlots; ++s) {
        const std::int64_t since = since_ns_[s].load(std::memory_order_acquire);
        if (since != 0 && now - since > timeout_ns_) {
          report_and_abort(s);
        }
      }
    }
  }

  // Answers every pending question of another rank's watchdog about one of our slots, and
  // every claim to speak for this rank (the first claim is granted, later ones are not).
  void answer_queries() {
    for (;;) {
      int claim = 0;
      MPI_Status claim_status;
      MPI_Iprobe(MPI_ANY_SOURCE, kClaimTag, probe_, &claim, &claim_status);
      if (claim == 0) {
        break;
      }
      std::int64_t ignored = 0;
      MPI_Recv(&ignored, 1, MPI_INT64_T, claim_status.MPI_SOURCE, kClaimTag, probe_,
               MPI_STATUS_IGNORE);
      const std::int64_t grant = granted_ ? 0 : 1;
      granted_ = true;
      MPI_Send(&grant, 1, MPI_INT64_T, claim_status.MPI_SOURCE, kGrantTag, probe_);
    }
    for (;;) {
      int flag = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, probe_, &flag, &status);
      if (flag == 0) {
        return;
      }
      std::int64_t slot = 0;
      MPI_Recv(&slot, 1, MPI_INT64_T, status.MPI_SOURCE, kQueryTag, probe_, MPI_STATUS_IGNORE);
      Reply reply{slot, -1, -1, -1};
      if (slot >= 0 && slot < static_cast<std::int64_t>(kSlots)) {
        const std::size_t s = idx(slot);
        const std::int64_t since = since_ns_[s].load(std::memory_order_acquire);
        reply[1] = begun_[s].load(std::memory_order_relaxed);
        reply[2] = since == 0 ? -1 : steady_ns() - since;
        for (std::size_t other = 0; other < kSlots && reply[3] < 0; ++other) {
          if (other != s && since_ns_[other].load(std::memory_order_acquire) != 0) {
            reply[3] = static_cast<std::int64_t>(other);
          }
        }
      }
      // A few bytes: sent eagerly, so this never waits on the asker.
      MPI_Send(reply.data(), 4, MPI_INT64_T, status.MPI_SOURCE, kReplyTag, probe_);
    }
  }

  // Serves questions for `ns` nanoseconds (the other members' watchdogs may be asking ours).
  void serve_for(std::int64_t ns) {
    const std::int64_t until = steady_ns() + ns;
    while (steady_ns() < until) {
      answer_queries();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  // A rank missing from several groups (an HSDP rank is in one per axis) is named by each
  // group's speaker. The missing rank's watchdog, when it answers, is the arbiter: the first
  // speaker to claim it prints. True when `absent`'s watchdog granted an earlier claim; false
  // when this claim is granted, when there is no such rank (-1) or when it does not answer
  // within a second (then the staggered waits above are all that orders the speakers).
  bool claim_denied(int absent) {
    if (absent < 0) {
      return false;
    }
    const std::int64_t claim = 1;
    MPI_Send(&claim, 1, MPI_INT64_T, absent, kClaimTag, probe_);
    const std::int64_t answer_by = steady_ns() + 1'000'000'000;
    while (steady_ns() < answer_by) {
      answer_queries();
      int flag = 0;
      MPI_Iprobe(absent, kGrantTag, probe_, &flag, MPI_STATUS_IGNORE);
      if (flag != 0) {
        std::int64_t grant = 0;
        MPI_Recv(&grant, 1, MPI_INT64_T, absent, kGrantTag, probe_, MPI_STATUS_IGNORE);
        return grant == 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

  [[noreturn]] void report_and_abort(std::size_t slot) {
    const std::int64_t mine = begun_[slot].load(std::memory_order_relaxed);
    const std::vector<int>& members = members_[slot];
    const std::int64_t query = static_cast<std::int64_t>(slot);
    for (int m : members) {
      if (m != world_rank_) {
        MPI_Send(&query, 1, MPI_INT64_T, m, kQueryTag, probe_);
      }
    }
    // Replies, by member index; a member's begun count, or -1 when it has not answered.
    std::vector<std::int64_t> begun(members.size(), -1);
    std::vector<std::int64_t> inside_ns(members.size(), -1);
    std::vector<std::int64_t> busy_slot(members.size(), -1);
    std::size_t waiting = members.size() - 1;
    const std::int64_t answer_by = steady_ns() + 1'000'000'000;
    while (waiting > 0 && steady_ns() < answer_by) {
      answer_queries();
      int flag = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, kReplyTag, probe_, &flag, &status);
      if (flag == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      Reply reply{};
      MPI_Recv(reply.data(), 4, MPI_INT64_T, status.MPI_SOURCE, kReplyTag, probe_,
               MPI_STATUS_IGNORE);
      for (std::size_t i = 0; i < members.size(); ++i) {
        if (members[i] == status.MPI_SOURCE && reply[0] == query && begun[i] < 0) {
          begun[i] = reply[1];
          inside_ns[i] = reply[2];
          busy_slot[i] = reply[3];
          --waiting;
        }
      }
    }
    std::string absent;
    std::string silent;
    std::string elsewhere;
    std::int64_t absent_count = 0;
    std::int64_t busy_count = 0;
    int speaker = world_rank_;
    std::int64_t speaker_inside_ns = timeout_ns_;
    int first_alive_absent = -1;  // the lowest missing rank whose watchdog answered
    for (std::size_t i = 0; i < members.size(); ++i) {
      const int m = members[i];
      const bool arrived = m == world_rank_ || begun[i] >= mine;
      if (arrived) {
        if (m < speaker) {
          speaker = m;
          speaker_inside_ns = inside_ns[i];
        }
        continue;
      }
      absent += str_cat(absent_count++ == 0 ? "" : ", ", m);
      if (begun[i] >= 0 && (first_alive_absent < 0 || m < first_alive_absent)) {
        first_alive_absent = m;
      }
      if (begun[i] < 0) {
        silent += str_cat(silent.empty() ? "" : ", ", m);
      } else if (busy_slot[i] >= 0 && busy_slot[i] < static_cast<std::int64_t>(kSlots)) {
        ++busy_count;
        elsewhere += str_cat(elsewhere.empty() ? "" : "; ", "rank ", m,
                             " waits in a collective on ", where_[idx(busy_slot[i])]);
      }
    }
    std::int64_t wait_ns = 0;
    if (speaker != world_rank_) {
      // The speaker's own watchdog fires once its collective is timeout_ns_ old; give it that
      // plus two seconds to print and abort the job.
      const std::int64_t left = std::max<std::int64_t>(0, timeout_ns_ - speaker_inside_ns);
      wait_ns += std::min(left, timeout_ns_) + 2'000'000'000;
    }
    if (absent_count > 0 && busy_count == absent_count) {
      // Every missing rank is itself stuck in another collective, which it entered before this
      // one timed out: that collective's own watchdogs name its missing ranks, the cause, within
      // one more timeout. This line is only the fallback.
      wait_ns += timeout_ns_ + 2'000'000'000;
    }
    // A rank missing from several groups (an HSDP rank is in one per axis) is named by each
    // group's speaker, usually at about the same moment: a lower rank speaks first, and the
    // abort it starts ends the others before they print.
    wait_ns += std::min<std::int64_t>(world_rank_, 16) * 250'000'000;
    if (wait_ns > 0) {
      serve_for(wait_ns);
    }
    if (claim_denied(first_alive_absent)) {
      // Another group's speaker names the same missing rank, and prints the one line: wait for
      // the abort it starts (and speak only if it never comes).
      serve_for(2 * timeout_ns_ + 5'000'000'000);
    }
    const std::string who =
        absent_count == 0
            ? std::string("every rank of the group arrived")
            : str_cat(absent_count == 1 ? "rank " : "ranks ", absent, " did not arrive",
                      silent.empty() ? "" : str_cat(" (no answer from ", silent, ")"),
                      elsewhere.empty() ? "" : str_cat(" (", elsewhere, ")"));
    std::fprintf(stderr,
                 "fsdpsim: error: rank %d: MPI %s on %s did not complete within %g s: %s; "
                 "aborting every rank\n",
                 world_rank_, what_[slot].load(std::memory_order_relaxed), where_[slot].c_str(),
                 static_cast<double>(timeout_ns_) / 1e9, who.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();  // MPI_Abort does not return
  }

  std::int64_t timeout_ns_;
  MPI_Comm probe_;
  int world_rank_;
  std::array<std::atomic<std::int64_t>, kSlots> since_ns_{};  // 0: idle
  std::array<std::atomic<std::int64_t>, kSlots> begun_{};     // written by the slot's thread
  std::array<std::atomic<const char*>, kSlots> what_{};
  std::array<std::string, kSlots> where_;
  std::array<std::vector<int>, kSlots> members_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool granted_ = false;  // a claim to speak for this rank was granted (watchdog thread only)
  std::thread thread_;
};

class MpiComm final : public exec::Communicator {
 public:
  // members: the MPI_COMM_WORLD rank of each member of this rank's group on the axis.
  MpiComm(std::string axis_name, std::array<MPI_Comm, kNumStreams> comms, std::int64_t rank,
          std::int64_t size, const std::vector<int>& members, Watchdog* watchdog,
          std::size_t slot_base, CollectiveStall* stall)
      : axis_name_(std::move(axis_name)),
        comms_(comms),
        rank_(rank),
        size_(size),
        watchdog_(watchdog),
        slot_base_(slot_base),
        stall_(stall) {
    for (std::size_t s = 0; s < kStreams; ++s) {
      watchdog_->name(slot_base_ + s,
                      str_cat("mesh axis '", axis_name_, "' (",
                              to_string(static_cast<StreamKind>(s)), " stream)"),
                      members);
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
    // In place (recv = send + this member's displacement): MPI_IN_PLACE takes the input from
    // recvbuf, whole, and leaves the result at its start; it is then moved to its own offset.
    const std::ptrdiff_t mine = s.displs[idx(rank_)];
    const bool in_place = static_cast<const float*>(send) + mine == static_cast<float*>(recv);
    Guard g(this, stream, "reduce-scatter");
    float* base = static_cast<float*>(recv) - (in_place ? mine : 0);
    const int rc = MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : send, base, s.counts.data(),
                                      MPI_FLOAT, MPI_SUM, comm(stream));
    if (rc != MPI_SUCCESS) {
      return mpi_error(rc, "MPI_Reduce_scatter");
    }
    if (in_place && mine > 0 && s.counts[idx(rank_)] > 0) {
      std::memmove(recv, base, idx(s.counts[idx(rank_)]) * sizeof(float));
    }
    return ok_status();
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
  Status all_to_all(StreamKind stream, DType dtype, const void* send, std::int64_t count,
                    void* recv) override {
    FSDP_RETURN_IF_ERROR(check(dtype, std::span<const std::int64_t>()));
    if (count < 0 || count > INT_MAX / std::max<std::int64_t>(size_, 1)) {
      return Error(
          ErrorCode::kOutOfRange,
          str_cat("all-to-all on mesh axis '", axis_name_, "' of ", count,
                  " elements per member; MPI counts are int, in [0, ",
                  INT_MAX / std::max<std::int64_t>(size_, 1), "] for ", size_, " members"));
    }
    Guard g(this, stream, "all-to-all");
    const int rc = MPI_Alltoall(send, static_cast<int>(count), MPI_FLOAT, recv,
                                static_cast<int>(count), MPI_FLOAT, comm(stream));
    return rc == MPI_SUCCESS ? ok_status() : Status(mpi_error(rc, "MPI_Alltoall"));
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
      if (comm->stall_ != nullptr) {
        comm->stall_->maybe_stall();  // testing only; before begin(): this rank never arrives
      }
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
  CollectiveStall* stall_;  // null unless FSDP_TEST_STALL_COLLECTIVE names this rank
  std::array<Scratch, kNumStreams> scratch_;  // each used by its stream's thread only
};

class MpiSet final : public exec::CommunicatorSet {
 public:
  MpiSet(double timeout_s, MPI_Comm probe, std::unique_ptr<CollectiveStall> stall)
      : stall_(std::move(stall)), watchdog_(timeout_s, probe) {}
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
  std::unique_ptr<CollectiveStall> stall_;
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
  // The watchdogs' own communicator: their questions never match a collective's messages.
  MPI_Comm probe = MPI_COMM_NULL;
  if (const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &probe); rc != MPI_SUCCESS) {
    return mpi_error(rc, "MPI_Comm_dup");
  }
  // A question to a rank that is gone must not end the job before the watchdog has said which.
  MPI_Comm_set_errhandler(probe, MPI_ERRORS_RETURN);
  auto set = std::make_unique<MpiSet>(timeout_s, probe,
                                      test_collective_stall(session.rank(), timeout_s));
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
    std::vector<int> members(idx(mesh.axis_size(a)));
    for (std::int64_t i = 0; i < mesh.axis_size(a); ++i) {
      c.local_ranks[idx(a)] = i;
      FSDP_TRY(std::int64_t member, mesh.rank_of(c.local_ranks));
      members[idx(i)] = static_cast<int>(member);
    }
    set->comms_.push_back(std::make_unique<MpiComm>(
        mesh.axis_name(a), dups, coord.local_ranks[idx(a)], mesh.axis_size(a), members,
        &set->watchdog_, idx(a) * kStreams, set->stall_.get()));
  }
  return std::unique_ptr<exec::CommunicatorSet>(std::move(set));
}

}  // namespace fsdp::cpu

// SPDX-License-Identifier: Apache-2.0
// Shared-memory collectives between threads. Two barriers per collective: after the first every
// member's buffers are posted and stable; after the second nobody reads them any more, so a
// member may then overwrite its own buffer (the in-place all-reduce and reduce-scatter write their
// results only then).
#include "backends/cpu/in_process_comm.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/base/check.h"
#include "core/base/strings.h"

namespace fsdp::cpu {
namespace {

std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

struct Slot {
  OpKind kind = OpKind::kAllGather;
  DType dtype = DType::kFp32;
  const void* send = nullptr;
  void* recv = nullptr;
  std::vector<std::int64_t> counts;
};

class World;

// The collectives of one axis group on one stream.
class Channel {
 public:
  Channel(World* world, std::string axis, StreamKind stream, std::vector<std::int64_t> ranks)
      : world_(world),
        axis_(std::move(axis)),
        stream_(stream),
        ranks_(std::move(ranks)),
        present_(ranks_.size(), 0),
        slots_(ranks_.size()) {}

  Status run(std::int64_t member, Slot mine);
  void wake() {
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_.notify_all();
  }

 private:
  // Waits for every member. An abortable barrier returns the world's error when another rank
  // aborts; the barrier that ends a collective's copy phase is not abortable: every member has
  // passed the first barrier and only copies from the others' buffers until it arrives, so
  // letting one leave early would let its thread free a buffer a peer is still reading.
  Status barrier(std::int64_t member, const char* what, bool abortable = true);
  Status validate(std::int64_t member) const;
  std::int64_t size() const { return static_cast<std::int64_t>(ranks_.size()); }

  World* world_;
  std::string axis_;
  StreamKind stream_;
  std::vector<std::int64_t> ranks_;  // global rank of each member
  std::mutex mu_;
  std::condition_variable cv_;
  std::int64_t arrived_ = 0;
  std::int64_t generation_ = 0;
  std::vector<char> present_;
  std::vector<Slot> slots_;
};

class World final : public InProcessWorld, public std::enable_shared_from_this<World> {
 public:
  World(DeviceMesh mesh, std::chrono::milliseconds timeout)
      : mesh_(std::move(mesh)), timeout_(timeout) {
    for (std::int64_t a = 0; a < mesh_.ndim(); ++a) {
      for (std::int64_t r = 0; r < mesh_.size(); ++r) {
        MeshCoordinate c = mesh_.coordinate(r).value();
        if (c.local_ranks[idx(a)] != 0) {
          continue;  // r is not the first member of its group on axis a
        }
        std::vector<std::int64_t> ranks;
        for (std::int64_t k = 0; k < mesh_.axis_size(a); ++k) {
          c.local_ranks[idx(a)] = k;
          ranks.push_back(mesh_.rank_of(c.local_ranks).value());
        }
        for (int s = 0; s < kNumStreams; ++s) {
          channels_.push_back(std::make_unique<Channel>(this, mesh_.axis_name(a),
                                                        static_cast<StreamKind>(s), ranks));
          for (std::int64_t k = 0; k < static_cast<std::int64_t>(ranks.size()); ++k) {
            lookup_[std::make_tuple(a, ranks[idx(k)], s)] = {channels_.back().get(), k};
          }
        }
      }
    }
  }

  std::unique_ptr<exec::CommunicatorSet> communicators(std::int64_t rank) override;

  void abort(const Error& error) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) {
        error_ = error;
      }
      aborted_.store(true);
    }
    for (auto& c : channels_) {
      c->wake();
    }
  }

  bool aborted() const { return aborted_.load(); }
  Error abort_error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_.value_or(Error(ErrorCode::kUnavailable, "aborted"));
  }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const DeviceMesh& mesh() const { return mesh_; }
  std::pair<Channel*, std::int64_t> channel(std::int64_t axis, std::int64_t rank, int stream) {
    return lookup_.at(std::make_tuple(axis, rank, stream));
  }

 private:
  DeviceMesh mesh_;
  std::chrono::milliseconds timeout_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::map<std::tuple<std::int64_t, std::int64_t, int>, std::pair<Channel*, std::int64_t>> lookup_;
  mutable std::mutex mu_;
  std::optional<Error> error_;
  std::atomic<bool> aborted_{false};
};

Status Channel::barrier(std::int64_t member, const char* what, bool abortable) {
  std::unique_lock<std::mutex> lock(mu_);
  const std::int64_t gen = generation_;
  present_[idx(member)] = 1;
  if (++arrived_ == size()) {
    arrived_ = 0;
    ++generation_;
    std::fill(present_.begin(), present_.end(), 0);
    cv_.notify_all();
    return ok_status();
  }
  const auto timeout = world_->timeout();
  const bool done = cv_.wait_until(lock, std::chrono::steady_clock::now() + timeout, [&] {
    return generation_ != gen || (abortable && world_->aborted());
  });
  if (generation_ != gen) {
    return ok_status();
  }
  if (done) {  // aborted
    return world_->abort_error();
  }
  std::string missing;
  for (std::size_t k = 0; k < present_.size(); ++k) {
    if (present_[k] == 0) {
      missing += str_cat(missing.empty() ? "" : ", ", ranks_[k]);
    }
  }
  Error e(ErrorCode::kUnavailable,
          str_cat("in-process ", what, " on mesh axis '", axis_, "' (", to_string(stream_),
                  " stream): rank ", ranks_[idx(member)], " waited ",
                  static_cast<double>(timeout.count()) / 1000.0, " s; rank(s) ", missing,
                  " did not join"));
  lock.unlock();
  world_->abort(e);
  return e;
}

Status Channel::validate(std::int64_t member) const {
  const Slot& mine = slots_[idx(member)];
  for (std::size_t k = 0; k < slots_.size(); ++k) {
    const Slot& other = slots_[k];
    if (other.kind != mine.kind || other.dtype != mine.dtype || other.counts != mine.counts) {
      return Error(ErrorCode::kFailedPrecondition,
                   str_cat("in-process collective mismatch on mesh axis '", axis_, "' (",
                           to_string(stream_), " stream): rank ", ranks_[idx(member)],
                           " issued a ", to_string(mine.kind), " of ", mine.counts.size(),
                           " counts, rank ", ranks_[k], " a ", to_string(other.kind), " of ",
                           other.counts.size()));
    }
  }
  if (mine.kind != OpKind::kAllGather && mine.kind != OpKind::kAllToAll &&
      mine.dtype != DType::kFp32) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("in-process reductions support fp32 only; got ", to_string(mine.dtype)));
  }
  return ok_status();
}

Status Channel::run(std::int64_t member, Slot mine) {
  if (world_->aborted()) {
    return world_->abort_error();
  }
  const char* what = mine.kind == OpKind::kAllGather       ? "all-gather"
                     : mine.kind == OpKind::kReduceScatter ? "reduce-scatter"
                     : mine.kind == OpKind::kAllToAll      ? "all-to-all"
                                                           : "all-reduce";
  {
    std::lock_guard<std::mutex> lock(mu_);
    slots_[idx(member)] = std::move(mine);
  }
  FSDP_RETURN_IF_ERROR(barrier(member, what));
  Status valid = validate(member);
  if (!valid.ok()) {
    world_->abort(valid.error());
    return valid;
  }
  const Slot& me = slots_[idx(member)];
  const std::int64_t es = dtype_bytes(me.dtype);
  std::vector<float> reduced;
  if (me.kind == OpKind::kAllToAll) {
    // Written before the second barrier while the others still read this member's send: safe
    // because an all-to-all's send and recv never overlap (Communicator::all_to_all).
    const std::int64_t n = me.counts[0] * es;  // bytes per member
    for (std::size_t k = 0; k < slots_.size() && n > 0; ++k) {
      std::memcpy(static_cast<char*>(me.recv) + static_cast<std::int64_t>(k) * n,
                  static_cast<const char*>(slots_[k].send) + member * n, idx(n));
    }
  } else if (me.kind == OpKind::kAllGather) {
    std::int64_t off = 0;
    for (std::size_t k = 0; k < slots_.size(); ++k) {
      auto* dst = static_cast<char*>(me.recv) + off * es;
      if (me.counts[k] > 0 && slots_[k].send != dst) {
        std::memmove(dst, slots_[k].send, idx(me.counts[k] * es));
      }
      off += me.counts[k];
    }
  } else if (me.kind == OpKind::kReduceScatter) {
    // Into a temporary, written after the second barrier: in place (recv = send + off) the
    // output overwrites this member's own input, which the sum still reads.
    std::int64_t off = 0;
    for (std::int64_t k = 0; k < member; ++k) {
      off += me.counts[idx(k)];
    }
    const std::int64_t n = me.counts[idx(member)];
    reduced.assign(idx(n), 0.0F);
    for (const Slot& s : slots_) {
      const float* in = static_cast<const float*>(s.send) + off;
      for (std::int64_t j = 0; j < n; ++j) {
        reduced[idx(j)] += in[j];
      }
    }
  } else {
    const std::int64_t n = me.counts[0];
    reduced.assign(idx(n), 0.0F);
    for (const Slot& s : slots_) {
      const float* in = static_cast<const float*>(s.send);
      for (std::int64_t j = 0; j < n; ++j) {
        reduced[idx(j)] += in[j];
      }
    }
  }
  FSDP_RETURN_IF_ERROR(barrier(member, what, /*abortable=*/false));
  if (me.kind == OpKind::kAllReduce || me.kind == OpKind::kReduceScatter) {
    std::copy(reduced.begin(), reduced.end(), static_cast<float*>(me.recv));
  }
  return ok_status();
}

class InProcessComm final : public exec::Communicator {
 public:
  InProcessComm(World* world, std::int64_t axis, std::int64_t rank)
      : axis_name_(world->mesh().axis_name(axis)),
        size_(world->mesh().axis_size(axis)) {
    for (int s = 0; s < kNumStreams; ++s) {
      auto [channel, member] = world->channel(axis, rank, s);
      channels_[idx(s)] = channel;
      member_ = member;
    }
  }
  std::int64_t rank() const override { return member_; }
  std::int64_t size() const override { return size_; }
  const std::string& axis_name() const override { return axis_name_; }

  Status all_gather_v(StreamKind stream, DType dtype, const void* send,
                      std::span<const std::int64_t> counts, void* recv) override {
    return post(stream, Slot{OpKind::kAllGather, dtype, send, recv,
                             std::vector<std::int64_t>(counts.begin(), counts.end())});
  }
  Status reduce_scatter_v(StreamKind stream, DType dtype, const void* send,
                          std::span<const std::int64_t> counts, void* recv) override {
    return post(stream, Slot{OpKind::kReduceScatter, dtype, send, recv,
                             std::vector<std::int64_t>(counts.begin(), counts.end())});
  }
  Status all_reduce(StreamKind stream, DType dtype, void* buf, std::int64_t count) override {
    return post(stream, Slot{OpKind::kAllReduce, dtype, buf, buf, {count}});
  }
  Status all_to_all(StreamKind stream, DType dtype, const void* send, std::int64_t count,
                    void* recv) override {
    if (count < 0) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("all-to-all on mesh axis '", axis_name_, "' of ", count,
                           " elements per member; expected >= 0"));
    }
    return post(stream, Slot{OpKind::kAllToAll, dtype, send, recv, {count}});
  }

 private:
  Status post(StreamKind stream, Slot slot) {
    if (slot.kind != OpKind::kAllReduce && slot.kind != OpKind::kAllToAll &&
        static_cast<std::int64_t>(slot.counts.size()) != size_) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("collective on mesh axis '", axis_name_, "' has ", slot.counts.size(),
                           " counts; the axis has ", size_, " members"));
    }
    return channels_[static_cast<std::size_t>(stream)]->run(member_, std::move(slot));
  }

  std::string axis_name_;
  std::int64_t size_;
  std::int64_t member_ = 0;
  std::array<Channel*, kNumStreams> channels_{};
};

class InProcessSet final : public exec::CommunicatorSet {
 public:
  InProcessSet(std::shared_ptr<World> world, std::int64_t rank) : world_(std::move(world)) {
    for (std::int64_t a = 0; a < world_->mesh().ndim(); ++a) {
      comms_.push_back(std::make_unique<InProcessComm>(world_.get(), a, rank));
    }
  }
  std::int64_t num_axes() const override { return static_cast<std::int64_t>(comms_.size()); }
  exec::Communicator& axis(std::int64_t mesh_axis) override { return *comms_.at(idx(mesh_axis)); }
  void abort(const Error& error) override { world_->abort(error); }

 private:
  std::shared_ptr<World> world_;
  std::vector<std::unique_ptr<InProcessComm>> comms_;
};

std::unique_ptr<exec::CommunicatorSet> World::communicators(std::int64_t rank) {
  FSDP_CHECK(rank >= 0 && rank < mesh_.size()) << "rank " << rank << " outside the mesh";
  return std::make_unique<InProcessSet>(shared_from_this(), rank);
}

}  // namespace

Expected<std::shared_ptr<InProcessWorld>> InProcessWorld::make(const DeviceMesh& mesh,
                                                               std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("collective timeout is ", timeout.count(), " ms; expected > 0"));
  }
  return std::shared_ptr<InProcessWorld>(std::make_shared<World>(mesh, timeout));
}

}  // namespace fsdp::cpu

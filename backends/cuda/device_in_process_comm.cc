// SPDX-License-Identifier: Apache-2.0
// DeviceInProcessWorld on top of the host in-process world (backends/cpu/in_process_comm.h):
// its byte all-gathers are the barriers, and they carry each member's post (buffers, the counts'
// fingerprint and its two events), so timeouts, aborts and "rank(s) ... did not join" messages are
// the host world's. Why two exchanges are enough: a member re-records `ready` only after the
// second exchange of the previous collective, by which time every peer has issued its wait on the
// old `ready`; it re-records `done` only after the next first exchange, by which time every peer
// has issued its wait on the old `done` (cudaStreamWaitEvent captures the event when called).
#include "backends/cuda/device_in_process_comm.h"

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/in_process_comm.h"
#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_buffer.h"
#include "core/base/check.h"
#include "core/base/strings.h"

namespace fsdp::cuda {
namespace {

std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

// What a member tells its peers about one collective (plain bytes; pointers are process-wide).
struct Post {
  OpKind kind = OpKind::kAllGather;
  DType dtype = DType::kFp32;
  std::uint64_t counts_hash = 0;  // FNV-1a of the counts: every member must issue the same
  std::int64_t num_counts = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  cudaEvent_t ready = nullptr;
  cudaEvent_t done = nullptr;
};

std::uint64_t fnv1a(std::span<const std::int64_t> counts) {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::int64_t c : counts) {
    h = (h ^ static_cast<std::uint64_t>(c)) * 1099511628211ULL;
  }
  return h;
}

class DeviceComm final : public exec::Communicator {
 public:
  DeviceComm(exec::Communicator* host, CudaDevice* device) : host_(host), device_(device) {}
  ~DeviceComm() override {
    for (const auto& e : events_) {
      if (e.first != nullptr) (void)cudaEventDestroy(e.first);
      if (e.second != nullptr) (void)cudaEventDestroy(e.second);
    }
  }
  DeviceComm(const DeviceComm&) = delete;
  DeviceComm& operator=(const DeviceComm&) = delete;

  std::int64_t rank() const override { return host_->rank(); }
  std::int64_t size() const override { return host_->size(); }
  const std::string& axis_name() const override { return host_->axis_name(); }

  Status all_gather_v(StreamKind stream, DType dtype, const void* send,
                      std::span<const std::int64_t> counts, void* recv) override {
    return run(stream, OpKind::kAllGather, dtype, send, counts, recv);
  }
  Status reduce_scatter_v(StreamKind stream, DType dtype, const void* send,
                          std::span<const std::int64_t> counts, void* recv) override {
    return run(stream, OpKind::kReduceScatter, dtype, send, counts, recv);
  }
  Status all_reduce(StreamKind stream, DType dtype, void* buf, std::int64_t count) override {
    const std::array<std::int64_t, 1> counts = {count};
    return run(stream, OpKind::kAllReduce, dtype, buf, counts, buf);
  }
  Status all_to_all(StreamKind stream, DType dtype, const void* send, std::int64_t count,
                    void* recv) override {
    const std::array<std::int64_t, 1> counts = {count};
    return run(stream, OpKind::kAllToAll, dtype, send, counts, recv);
  }

 private:
  // The host world's all-gather of one Post per member (also the barrier).
  Status exchange(StreamKind stream, const Post& mine, std::vector<Post>& all) {
    all.assign(idx(size()), Post{});
    const std::vector<std::int64_t> bytes(idx(size()), sizeof(Post));
    return host_->all_gather_v(stream, DType::kFp8, &mine, bytes, all.data());
  }

  Status check(const Post& mine, const std::vector<Post>& all) const {
    for (std::size_t k = 0; k < all.size(); ++k) {
      const Post& p = all[k];
      if (p.kind != mine.kind || p.dtype != mine.dtype || p.counts_hash != mine.counts_hash ||
          p.num_counts != mine.num_counts) {
        return Error(ErrorCode::kFailedPrecondition,
                     str_cat("device in-process collective mismatch on mesh axis '", axis_name(),
                             "': member ", rank(), " issued a ", to_string(mine.kind), " of ",
                             mine.num_counts, " counts, member ", k, " a ", to_string(p.kind),
                             " of ", p.num_counts, " (or other counts)"));
      }
    }
    return ok_status();
  }

  Status wait_all(cudaStream_t s, const std::vector<Post>& all, bool done) const {
    for (std::size_t k = 0; k < all.size(); ++k) {
      if (static_cast<std::int64_t>(k) != rank()) {
        FSDP_CUDA_TRY(cudaStreamWaitEvent(s, done ? all[k].done : all[k].ready, 0));
      }
    }
    return ok_status();
  }

  // This member's share of the work, after every peer's inputs are ready.
  Status share(cudaStream_t s, const Post& me, std::span<const std::int64_t> counts,
               const std::vector<Post>& all, DeviceBuffer& scratch) const {
    const std::int64_t es = dtype_bytes(me.dtype);
    if (me.kind == OpKind::kAllToAll) {  // block rank() of every member's send
      const std::int64_t n = counts[0] * es;
      for (std::size_t k = 0; k < all.size(); ++k) {
        if (n > 0) {
          FSDP_CUDA_TRY(
              cudaMemcpyAsync(static_cast<char*>(me.recv) + static_cast<std::int64_t>(k) * n,
                              static_cast<const char*>(all[k].send) + rank() * n, idx(n),
                              cudaMemcpyDeviceToDevice, s));
        }
      }
      return ok_status();
    }
    if (me.kind == OpKind::kAllGather) {
      std::int64_t off = 0;
      for (std::size_t k = 0; k < all.size(); ++k) {
        char* dst = static_cast<char*>(me.recv) + off * es;
        if (counts[k] > 0 && all[k].send != dst) {
          FSDP_CUDA_TRY(cudaMemcpyAsync(dst, all[k].send, idx(counts[k] * es),
                                        cudaMemcpyDeviceToDevice, s));
        }
        off += counts[k];
      }
      return ok_status();
    }
    std::int64_t off = 0;
    std::int64_t n = counts[0];
    auto* out = static_cast<float*>(me.recv);
    if (me.kind == OpKind::kReduceScatter) {
      for (std::int64_t k = 0; k < rank(); ++k) {
        off += counts[idx(k)];
      }
      n = counts[idx(rank())];
      // In place (recv = send + off) the output is this member's own input. The peers read only
      // their own chunks of it, but the reduction runs in launches of at most 64 members, and
      // a later launch would read the input an earlier one overwrote: reduce into scratch,
      // copied out after the second exchange as the all-reduce is.
      if (n > 0 && static_cast<const float*>(me.send) + off == out) {
        FSDP_TRY(scratch, DeviceBuffer::make(n * 4, s));
        out = scratch.as<float>();
      }
    } else {
      FSDP_TRY(scratch, DeviceBuffer::make(n * 4, s));
      out = scratch.as<float>();
    }
    std::vector<const float*> ins;
    for (const Post& p : all) {
      ins.push_back(static_cast<const float*>(p.send) + off);
    }
    FSDP_CUDA_TRY(launch_reduce_members(out, ins.data(), static_cast<int>(ins.size()), n, s));
    return ok_status();
  }

  Status run(StreamKind stream, OpKind kind, DType dtype, const void* send,
             std::span<const std::int64_t> counts, void* recv) {
    if (kind != OpKind::kAllReduce && kind != OpKind::kAllToAll &&
        static_cast<std::int64_t>(counts.size()) != size()) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("collective on mesh axis '", axis_name(), "' has ", counts.size(),
                           " counts; the axis has ", size(), " members"));
    }
    if (std::any_of(counts.begin(), counts.end(), [](std::int64_t c) { return c < 0; }) ||
        (kind != OpKind::kAllGather && kind != OpKind::kAllToAll && dtype != DType::kFp32)) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("device in-process ", to_string(kind), " on mesh axis '", axis_name(),
                           "': negative count, or a reduction of ", to_string(dtype),
                           " (fp32 only)"));
    }
    FSDP_RETURN_IF_ERROR(device_->make_current());
    cudaStream_t s = device_->stream(stream);
    auto& [ready, done] = events_[static_cast<std::size_t>(stream)];
    if (ready == nullptr) {
      FSDP_CUDA_TRY(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
      FSDP_CUDA_TRY(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    }
    const Post mine{kind, dtype, fnv1a(counts), static_cast<std::int64_t>(counts.size()),
                    send, recv, ready, done};
    std::vector<Post> all;
    FSDP_CUDA_TRY(cudaEventRecord(ready, s));
    FSDP_RETURN_IF_ERROR(exchange(stream, mine, all));
    DeviceBuffer scratch;
    Status work = check(mine, all);
    if (work.ok()) {
      work = [&]() -> Status {
        FSDP_RETURN_IF_ERROR(wait_all(s, all, /*done=*/false));
        FSDP_RETURN_IF_ERROR(share(s, mine, counts, all, scratch));
        FSDP_CUDA_TRY(cudaEventRecord(done, s));
        return ok_status();
      }();
    }
    // Peers wait in the second exchange whatever happened here: tell them instead.
    std::vector<Post> second;
    const Status met = exchange(stream, mine, second);
    FSDP_RETURN_IF_ERROR(work);
    FSDP_RETURN_IF_ERROR(met);
    FSDP_RETURN_IF_ERROR(wait_all(s, all, /*done=*/true));
    if (scratch.data() != nullptr && scratch.bytes() > 0) {  // all-reduce, in-place RS
      FSDP_CUDA_TRY(cudaMemcpyAsync(recv, scratch.data(), idx(scratch.bytes()),
                                    cudaMemcpyDeviceToDevice, s));
    }
    return ok_status();
  }

  exec::Communicator* host_;
  CudaDevice* device_;
  std::array<std::pair<cudaEvent_t, cudaEvent_t>, kNumStreams> events_{};  // ready, done
};

class DeviceSet final : public exec::CommunicatorSet {
 public:
  DeviceSet(std::unique_ptr<exec::CommunicatorSet> host, CudaDevice* device)
      : host_(std::move(host)) {
    for (std::int64_t a = 0; a < host_->num_axes(); ++a) {
      comms_.push_back(std::make_unique<DeviceComm>(&host_->axis(a), device));
    }
  }
  std::int64_t num_axes() const override { return static_cast<std::int64_t>(comms_.size()); }
  exec::Communicator& axis(std::int64_t mesh_axis) override { return *comms_.at(idx(mesh_axis)); }
  void abort(const Error& error) override { host_->abort(error); }

 private:
  std::unique_ptr<exec::CommunicatorSet> host_;
  std::vector<std::unique_ptr<DeviceComm>> comms_;
};

class World final : public DeviceInProcessWorld {
 public:
  explicit World(std::shared_ptr<cpu::InProcessWorld> host) : host_(std::move(host)) {}
  std::unique_ptr<exec::CommunicatorSet> communicators(std::int64_t rank,
                                                       CudaDevice* device) override {
    FSDP_CHECK(device != nullptr) << "device in-process communicators of rank " << rank
                                  << " need a device";
    return std::make_unique<DeviceSet>(host_->communicators(rank), device);
  }
  void abort(const Error& error) override { host_->abort(error); }

 private:
  std::shared_ptr<cpu::InProcessWorld> host_;
};

}  // namespace

Expected<std::shared_ptr<DeviceInProcessWorld>> DeviceInProcessWorld::make(
    const DeviceMesh& mesh, std::chrono::milliseconds timeout) {
  FSDP_TRY(std::shared_ptr<cpu::InProcessWorld> host, cpu::InProcessWorld::make(mesh, timeout));
  return std::shared_ptr<DeviceInProcessWorld>(std::make_shared<World>(std::move(host)));
}

}  // namespace fsdp::cuda

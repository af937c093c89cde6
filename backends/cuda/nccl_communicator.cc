// SPDX-License-Identifier: Apache-2.0
// NcclCommunicator. Strategy notes and measurements: docs/design/backends.md, "CUDA backend".
#include "backends/cuda/nccl_communicator.h"

#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_buffer.h"
#include "backends/store/rendezvous.h"
#include "core/base/strings.h"

namespace fsdp::cuda {
namespace {

std::size_t idx(std::int64_t v) { return static_cast<std::size_t>(v); }

Expected<ncclDataType_t> nccl_reduction_type(DType dtype) {
  switch (dtype) {
    case DType::kFp32:
      return ncclFloat32;
    case DType::kBf16:
      return ncclBfloat16;
    case DType::kFp16:
      return ncclFloat16;
    case DType::kFp8:
      break;
  }
  return Error(ErrorCode::kInvalidArgument,
               str_cat("nccl reductions support fp32, bf16 and fp16; got ", to_string(dtype)));
}

// The largest count and whether every count equals it.
std::pair<std::int64_t, bool> shape_of(std::span<const std::int64_t> counts) {
  const std::int64_t max = *std::max_element(counts.begin(), counts.end());
  return {max, std::all_of(counts.begin(), counts.end(), [&](std::int64_t c) { return c == max; })};
}

std::vector<std::int64_t> scaled(std::span<const std::int64_t> counts, std::int64_t factor) {
  std::vector<std::int64_t> out(counts.begin(), counts.end());
  for (std::int64_t& v : out) {
    v *= factor;
  }
  return out;
}

// Polls `comm` until it leaves ncclInProgress (a non-blocking creation, split, finalize or a
// call that answered ncclInProgress), at most `timeout` (0: forever).
Status settle(ncclComm_t comm, std::chrono::milliseconds timeout, const char* call) {
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    FSDP_NCCL_TRY(comm, ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) {
      return ok_status();
    }
    if (state != ncclInProgress) {
      return nccl_error(state, comm, call, __FILE__, __LINE__);
    }
    if (timeout.count() > 0 && std::chrono::steady_clock::now() - start > timeout) {
      return Error(ErrorCode::kUnavailable,
                   str_cat(call, " did not complete within ", timeout.count(),
                           " ms (members that never joined?)"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
}

}  // namespace

// One communicator per stream of one axis member. poll and abort come from the device's host
// waits, possibly on another thread than the calls: one mutex orders them with destruction.
struct NcclCommunicator::Comms final : AsyncWatch {
  int ordinal = 0;
  std::chrono::milliseconds timeout{0};
  std::array<ncclComm_t, kNumStreams> comm{};
  std::mutex mu;
  bool aborted = false;

  ~Comms() override {
    std::lock_guard<std::mutex> lock(mu);
    if (aborted) {
      return;  // ncclCommAbort released them
    }
    (void)cudaSetDevice(ordinal);
    // A destructor must end: without a run timeout, finalizing gets 30 s before it aborts.
    const auto bound = timeout.count() > 0 ? timeout : std::chrono::milliseconds(30000);
    for (ncclComm_t& c : comm) {
      if (c == nullptr) {
        continue;
      }
      // Non-blocking: finalize (flushes the pending work) may answer ncclInProgress.
      const ncclResult_t f = ncclCommFinalize(c);
      if ((f == ncclSuccess || f == ncclInProgress) && settle(c, bound, "ncclCommFinalize").ok()) {
        (void)ncclCommDestroy(c);
      } else {
        (void)ncclCommAbort(c);
      }
      c = nullptr;
    }
  }

  Status poll() override {
    std::lock_guard<std::mutex> lock(mu);
    if (aborted) {
      return Error(ErrorCode::kUnavailable, "nccl communicator aborted");
    }
    for (ncclComm_t c : comm) {
      if (c == nullptr) {
        continue;
      }
      ncclResult_t state = ncclSuccess;
      FSDP_NCCL_TRY(c, ncclCommGetAsyncError(c, &state));
      if (state != ncclSuccess && state != ncclInProgress) {
        return nccl_error(state, c, "asynchronous NCCL error (ncclCommGetAsyncError)", __FILE__,
                          __LINE__);
      }
    }
    return ok_status();
  }

  void abort() override {
    std::lock_guard<std::mutex> lock(mu);
    if (aborted) {
      return;
    }
    (void)cudaSetDevice(ordinal);
    for (ncclComm_t& c : comm) {
      if (c != nullptr) {
        (void)ncclCommAbort(c);
      }
    }
    aborted = true;
  }

  bool is_aborted() {
    std::lock_guard<std::mutex> lock(mu);
    return aborted;
  }

  // An NCCL call's result: ncclInProgress is polled until the call completed.
  Status issued(ncclResult_t r, ncclComm_t c, const char* call) {
    if (r == ncclSuccess) {
      return ok_status();
    }
    if (r != ncclInProgress) {
      return nccl_error(r, c, call, __FILE__, __LINE__);
    }
    return settle(c, timeout, call);
  }
};

int nccl_runtime_version() {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

UnevenAllGather resolve_uneven_all_gather(UnevenAllGather requested, int runtime_version) {
  if (requested != UnevenAllGather::kAuto) {
    return requested;
  }
  return runtime_version >= kNcclAllGatherVVersion ? UnevenAllGather::kGroupedBroadcast
                                                   : UnevenAllGather::kPadToMax;
}

Expected<NcclId> make_nccl_id() {
  ncclUniqueId id;
  FSDP_NCCL_TRY(nullptr, ncclGetUniqueId(&id));
  NcclId out;
  static_assert(sizeof(id.internal) == sizeof(out.bytes));
  std::memcpy(out.bytes.data(), id.internal, out.bytes.size());
  return out;
}

NcclCommunicator::NcclCommunicator(CudaDevice* device, std::string axis_name, int size, int rank,
                                   UnevenAllGather uneven, std::chrono::milliseconds timeout)
    : device_(device),
      axis_name_(std::move(axis_name)),
      size_(size),
      rank_(rank),
      uneven_(uneven),
      comms_(std::make_shared<Comms>()) {
  comms_->ordinal = device->ordinal();
  comms_->timeout = timeout;
}

NcclCommunicator::~NcclCommunicator() = default;  // Comms finalizes (or was aborted)

Expected<std::unique_ptr<NcclCommunicator>> NcclCommunicator::make(CudaDevice* device,
                                                                   std::string axis_name,
                                                                   int size, int rank,
                                                                   const NcclId& id,
                                                                   NcclOptions options) {
  if (device == nullptr || size < 1 || rank < 0 || rank >= size) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("nccl communicator on mesh axis '", axis_name, "': rank ", rank,
                         " outside [0, ", size, ") or no device"));
  }
  const UnevenAllGather uneven =
      resolve_uneven_all_gather(options.uneven_all_gather, nccl_runtime_version());
  std::unique_ptr<NcclCommunicator> c(
      new NcclCommunicator(device, std::move(axis_name), size, rank, uneven, options.timeout));
  FSDP_RETURN_IF_ERROR(device->make_current());
  Comms& comms = *c->comms_;
  auto fail = [&](const Error& e) {
    comms.abort();  // members already created must not linger half-joined
    return Error(e).with_context(str_cat("nccl communicator on mesh axis '", c->axis_name_,
                                         "', rank ", rank, " of ", size, " on ",
                                         device->name()));
  };
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclUniqueId uid;
  std::memcpy(uid.internal, id.bytes.data(), id.bytes.size());
  ncclComm_t& first = comms.comm[0];
  if (Status s = comms.issued(ncclCommInitRankConfig(&first, size, uid, rank, &config), first,
                              "ncclCommInitRankConfig");
      !s.ok()) {
    return fail(s.error());
  }
  // The other streams' communicators: the same members split off the first (color 0, key rank).
  for (std::size_t k = 1; k < comms.comm.size(); ++k) {
    ncclConfig_t split_config = NCCL_CONFIG_INITIALIZER;
    split_config.blocking = 0;
    const ncclResult_t r = ncclCommSplit(first, 0, rank, &comms.comm[k], &split_config);
    Status s = comms.issued(r, first, "ncclCommSplit");
    if (s.ok() && comms.comm[k] != nullptr) {
      s = settle(comms.comm[k], options.timeout, "ncclCommSplit");
    }
    if (!s.ok()) {
      return fail(s.error());
    }
  }
  device->add_watch(c->comms_);
  return c;
}

void NcclCommunicator::abort() { comms_->abort(); }

Status NcclCommunicator::check_counts(const char* what,
                                      std::span<const std::int64_t> counts) const {
  if (static_cast<std::int64_t>(counts.size()) != size_) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("nccl ", what, " on mesh axis '", axis_name_, "' has ", counts.size(),
                         " counts; the axis has ", size_, " members"));
  }
  for (std::int64_t c : counts) {
    if (c < 0) {
      return Error(ErrorCode::kInvalidArgument, str_cat("nccl ", what, " on mesh axis '",
                                                        axis_name_, "': negative count ", c));
    }
  }
  if (comms_->is_aborted()) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("nccl ", what, " on mesh axis '", axis_name_, "': communicator aborted"));
  }
  return ok_status();
}

Status NcclCommunicator::all_gather_v(StreamKind kind, DType dtype, const void* send,
                                      std::span<const std::int64_t> counts, void* recv) {
  FSDP_RETURN_IF_ERROR(check_counts("all-gather", counts));
  FSDP_RETURN_IF_ERROR(device_->make_current());
  ncclComm_t comm = comms_->comm[static_cast<std::size_t>(kind)];
  cudaStream_t stream = device_->stream(kind);
  const std::int64_t es = dtype_bytes(dtype);
  const auto [max, even] = shape_of(counts);
  auto* out = static_cast<char*>(recv);
  if (max == 0) {
    return ok_status();
  }
  if (even) {
    return comms_->issued(ncclAllGather(send, out, idx(max * es), ncclInt8, comm, stream), comm,
                          "ncclAllGather");
  }
  if (uneven_ == UnevenAllGather::kGroupedBroadcast) {
    FSDP_NCCL_TRY(comm, ncclGroupStart());
    std::int64_t off = 0;
    ncclResult_t first = ncclSuccess;
    for (int k = 0; k < size_; ++k) {
      const std::int64_t n = counts[idx(k)];
      if (n > 0 && first == ncclSuccess) {
        first = ncclBroadcast(k == rank_ ? send : out + off * es, out + off * es, idx(n * es),
                              ncclInt8, k, comm, stream);
      }
      off += n;
    }
    const ncclResult_t end = ncclGroupEnd();
    if (first != ncclSuccess && first != ncclInProgress) {
      return nccl_error(first, comm, "ncclBroadcast", __FILE__, __LINE__);
    }
    return comms_->issued(end, comm, "ncclGroupEnd (grouped ncclBroadcast)");
  }
  // Pad to max: this member's shard into its slot, all-gather the slots in place, unpack.
  FSDP_TRY(DeviceBuffer staging, DeviceBuffer::make(size_ * max * es, stream));
  char* slot = staging.as<char>() + rank_ * max * es;
  const std::int64_t mine = counts[idx(rank_)];
  if (mine > 0) {
    FSDP_CUDA_TRY(cudaMemcpyAsync(slot, send, idx(mine * es), cudaMemcpyDeviceToDevice, stream));
  }
  FSDP_RETURN_IF_ERROR(comms_->issued(
      ncclAllGather(slot, staging.data(), idx(max * es), ncclInt8, comm, stream), comm,
      "ncclAllGather"));
  const std::vector<std::int64_t> bytes = scaled(counts, es);
  FSDP_CUDA_TRY(launch_unpack_padded(out, staging.data(), bytes.data(), size_, max * es, stream));
  return ok_status();
}

Status NcclCommunicator::reduce_scatter_v(StreamKind kind, DType dtype, const void* send,
                                          std::span<const std::int64_t> counts, void* recv) {
  FSDP_RETURN_IF_ERROR(check_counts("reduce-scatter", counts));
  FSDP_TRY(ncclDataType_t type, nccl_reduction_type(dtype));
  FSDP_RETURN_IF_ERROR(device_->make_current());
  ncclComm_t comm = comms_->comm[static_cast<std::size_t>(kind)];
  cudaStream_t stream = device_->stream(kind);
  const std::int64_t es = dtype_bytes(dtype);
  const auto [max, even] = shape_of(counts);
  if (max == 0) {
    return ok_status();
  }
  // In place (recv = send + the counts before this member) needs nothing of its own: with even
  // counts that is NCCL's in-place reduce-scatter (recvbuff = sendbuff + rank x recvcount);
  // uneven, the input is packed into `padded` before the collective and `recv` written only
  // after it, in the stream's order.
  if (even) {
    return comms_->issued(ncclReduceScatter(send, recv, idx(max), type, ncclSum, comm, stream),
                          comm, "ncclReduceScatter");
  }
  FSDP_TRY(DeviceBuffer padded, DeviceBuffer::make(size_ * max * es, stream));
  FSDP_TRY(DeviceBuffer reduced, DeviceBuffer::make(max * es, stream));
  FSDP_CUDA_TRY(cudaMemsetAsync(padded.data(), 0, idx(padded.bytes()), stream));
  const std::vector<std::int64_t> bytes = scaled(counts, es);
  FSDP_CUDA_TRY(launch_pack_padded(padded.data(), send, bytes.data(), size_, max * es, stream));
  FSDP_RETURN_IF_ERROR(comms_->issued(ncclReduceScatter(padded.data(), reduced.data(), idx(max),
                                                        type, ncclSum, comm, stream),
                                      comm, "ncclReduceScatter"));
  const std::int64_t mine = counts[idx(rank_)];
  if (mine > 0) {
    FSDP_CUDA_TRY(cudaMemcpyAsync(recv, reduced.data(), idx(mine * es), cudaMemcpyDeviceToDevice,
                                  stream));
  }
  return ok_status();
}

Status NcclCommunicator::all_reduce(StreamKind kind, DType dtype, void* buf, std::int64_t count) {
  if (count < 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("nccl all-reduce on mesh axis '", axis_name_, "': count ", count));
  }
  FSDP_TRY(ncclDataType_t type, nccl_reduction_type(dtype));
  FSDP_RETURN_IF_ERROR(device_->make_current());
  if (count == 0) {
    return ok_status();
  }
  ncclComm_t comm = comms_->comm[static_cast<std::size_t>(kind)];
  return comms_->issued(ncclAllReduce(buf, buf, idx(count), type, ncclSum, comm,
                                      device_->stream(kind)),
                        comm, "ncclAllReduce");
}

Status NcclCommunicator::all_to_all(StreamKind kind, DType dtype, const void* send,
                                    std::int64_t count, void* recv) {
  if (count < 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("nccl all-to-all on mesh axis '", axis_name_, "': count ", count));
  }
  FSDP_RETURN_IF_ERROR(device_->make_current());
  if (count == 0) {
    return ok_status();
  }
  ncclComm_t comm = comms_->comm[static_cast<std::size_t>(kind)];
  cudaStream_t stream = device_->stream(kind);
  const std::int64_t bytes = count * dtype_bytes(dtype);
  FSDP_NCCL_TRY(comm, ncclGroupStart());
  ncclResult_t first = ncclSuccess;
  for (int k = 0; k < size_ && first == ncclSuccess; ++k) {
    first =
        ncclSend(static_cast<const char*>(send) + k * bytes, idx(bytes), ncclInt8, k, comm, stream);
    if (first == ncclSuccess) {
      first = ncclRecv(static_cast<char*>(recv) + k * bytes, idx(bytes), ncclInt8, k, comm, stream);
    }
  }
  const ncclResult_t end = ncclGroupEnd();
  if (first != ncclSuccess && first != ncclInProgress) {
    return nccl_error(first, comm, "ncclSend/ncclRecv", __FILE__, __LINE__);
  }
  return comms_->issued(end, comm, "ncclGroupEnd (grouped ncclSend/ncclRecv)");
}

// --- bootstrap (MPI or store) --------------------------------------------------------------------
namespace {

class NcclSet final : public exec::CommunicatorSet {
 public:
  explicit NcclSet(std::vector<std::unique_ptr<NcclCommunicator>> comms)
      : comms_(std::move(comms)) {}
  std::int64_t num_axes() const override { return static_cast<std::int64_t>(comms_.size()); }
  exec::Communicator& axis(std::int64_t mesh_axis) override { return *comms_.at(idx(mesh_axis)); }
  void abort(const Error& /*error*/) override {
    for (auto& c : comms_) {
      c->abort();
    }
  }

 private:
  std::vector<std::unique_ptr<NcclCommunicator>> comms_;
};

}  // namespace

Expected<std::vector<NcclGroup>> nccl_groups_of(const DeviceMesh& mesh, std::int64_t rank) {
  FSDP_TRY(MeshCoordinate coord, mesh.coordinate(rank));
  std::vector<NcclGroup> groups;
  for (std::int64_t a = 0; a < mesh.ndim(); ++a) {
    NcclGroup g;
    g.axis = a;
    g.axis_name = mesh.axis_name(a);
    for (std::int64_t b = 0; b < mesh.ndim(); ++b) {
      if (b != a) {
        g.index = g.index * mesh.axis_size(b) + coord.local_ranks[idx(b)];
      }
    }
    std::vector<std::int64_t> first = coord.local_ranks;
    first[idx(a)] = 0;
    FSDP_TRY(g.first_rank, mesh.rank_of(first));
    g.member = static_cast<int>(coord.local_ranks[idx(a)]);
    g.size = static_cast<int>(mesh.axis_size(a));
    groups.push_back(std::move(g));
  }
  return groups;
}

Expected<NcclId> mpi_nccl_id_exchange(const NcclGroup& group, const Expected<NcclId>& mine) {
  MPI_Comm sub = MPI_COMM_NULL;
  if (MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(group.first_rank), group.member, &sub) !=
      MPI_SUCCESS) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("nccl bootstrap over MPI: MPI_Comm_split for mesh axis '", group.axis_name,
                         "' failed"));
  }
  // Member 0 joins the broadcast even when it has no id, so its peers do not hang; they get zeros
  // and fail in ncclCommInitRankConfig, member 0 with its own error.
  NcclId id = group.member == 0 && mine.has_value() ? *mine : NcclId{};
  const int bcast = MPI_Bcast(id.bytes.data(), static_cast<int>(id.bytes.size()), MPI_BYTE, 0, sub);
  MPI_Comm_free(&sub);
  if (group.member == 0 && !mine.has_value()) {
    return mine.error();
  }
  if (bcast != MPI_SUCCESS) {
    return Error(ErrorCode::kUnavailable, str_cat("nccl bootstrap over MPI: MPI_Bcast of the "
                                                  "unique id for mesh axis '",
                                                  group.axis_name, "' failed"));
  }
  return id;
}

NcclIdExchange store_nccl_id_exchange(store::Store& store, std::chrono::milliseconds timeout) {
  return [&store, timeout](const NcclGroup& group,
                           const Expected<NcclId>& mine) -> Expected<NcclId> {
    const std::string key = str_cat(group.axis_name, "/", group.index, "/nccl-id");
    Expected<std::string> bytes = std::string();
    if (group.member == 0) {
      bytes = mine.has_value() ? std::string(mine->bytes.data(), mine->bytes.size())
                               : Expected<std::string>(mine.error());
    }
    FSDP_TRY(std::string got,
             store::share_from_first(store, key, group.member == 0, bytes, timeout));
    NcclId id;
    if (got.size() != id.bytes.size()) {
      return Error(ErrorCode::kInternal,
                   str_cat("nccl bootstrap over store ", store.name(), ": key '", key, "' holds ",
                           got.size(), " bytes; expected ", id.bytes.size()));
    }
    std::memcpy(id.bytes.data(), got.data(), id.bytes.size());
    return id;
  };
}

Expected<std::unique_ptr<exec::CommunicatorSet>> bootstrap_nccl_communicators(
    const DeviceMesh& mesh, std::int64_t rank, CudaDevice* device, const NcclIdExchange& exchange,
    NcclOptions options) {
  FSDP_TRY(std::vector<NcclGroup> groups, nccl_groups_of(mesh, rank));
  std::vector<std::unique_ptr<NcclCommunicator>> comms;
  for (const NcclGroup& g : groups) {
    const Expected<NcclId> mine = g.member == 0 ? make_nccl_id() : Expected<NcclId>(NcclId{});
    FSDP_TRY(NcclId id, exchange(g, mine));
    FSDP_TRY(std::unique_ptr<NcclCommunicator> c,
             NcclCommunicator::make(device, g.axis_name, g.size, g.member, id, options));
    comms.push_back(std::move(c));
  }
  return std::unique_ptr<exec::CommunicatorSet>(std::make_unique<NcclSet>(std::move(comms)));
}

Expected<std::unique_ptr<exec::CommunicatorSet>> make_nccl_communicators_mpi(
    const DeviceMesh& mesh, CudaDevice* device, NcclOptions options) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised == 0) {
    return Error(ErrorCode::kFailedPrecondition, "nccl bootstrap over MPI: MPI is not initialised");
  }
  int world_rank = 0;
  int world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_size != mesh.size()) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("nccl bootstrap over MPI: ", world_size, " MPI ranks for a mesh of ",
                         mesh.size(), " ranks"));
  }
  return bootstrap_nccl_communicators(mesh, world_rank, device, mpi_nccl_id_exchange, options);
}

Expected<std::unique_ptr<exec::CommunicatorSet>> make_nccl_communicators_store(
    const DeviceMesh& mesh, std::int64_t rank, CudaDevice* device, store::Store& store,
    std::chrono::milliseconds timeout, NcclOptions options) {
  return bootstrap_nccl_communicators(mesh, rank, device, store_nccl_id_exchange(store, timeout),
                                      options);
}

}  // namespace fsdp::cuda

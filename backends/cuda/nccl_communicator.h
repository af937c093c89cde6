// SPDX-License-Identifier: Apache-2.0
// NcclCommunicator: exec::Communicator over one ncclComm_t per (mesh axis, stream), enqueuing on
// the CudaDevice's stream of each call. NCCL runs a communicator's kernels one after another in
// launch order, so a single communicator per axis would serialise all-gathers behind
// reduce-scatters (no overlap, which the simulator's three-stream model assumes) and could
// deadlock rank classes whose cross-stream interleavings differ. Per stream, every member issues
// the same collectives in the same order (the verifier's collective-order check), which is what
// NCCL asks of concurrent communicators (docs/design/backends.md, "CUDA backend"). The first
// communicator of an axis comes from ncclCommInitRankConfig, the others from ncclCommSplit of
// it; all are non-blocking (config.blocking = 0): creation, every call that answers
// ncclInProgress and destruction are polled with ncclCommGetAsyncError up to the timeout, and
// the communicator is an AsyncWatch of its device, whose host waits poll its asynchronous errors
// and abort it past the timeout. The destructor uses only the GPU ordinal, never the device, so
// the two may be destroyed in either order.
// * Equal counts: ncclAllGather / ncclReduceScatter (in place when send aliases recv).
// * Uneven all-gather: a group of ncclBroadcast (one per root) when the RUNTIME NCCL is >= 2.29.2
//   (it fuses them into one AllGatherV kernel), else pad-to-max: ncclAllGather of max(counts) per
//   member into a W x max staging buffer, then an unpack kernel.
// * Uneven reduce-scatter (NCCL has no ReduceScatterV): pack into W x max (zero padding),
//   ncclReduceScatter, copy this member's count out.
// * All-reduce: ncclAllReduce in place. Sums only; fp32, bf16 and fp16 reductions.
// Staging memory is stream-ordered (cudaMallocAsync) and freed after the collective on its stream.
// Errors carry ncclGetErrorString and ncclGetLastError. Bootstrap: a 128-byte unique id made by
// one member and handed to the others (MPI_Bcast, a Store for processes started without mpirun,
// or memory for ranks that are threads); only that id exchange differs between the paths.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_device.h"
#include "backends/exec/communicator.h"
#include "backends/store/store.h"
#include "core/base/expected.h"
#include "core/mesh/device_mesh.h"

namespace fsdp::cuda {

enum class UnevenAllGather : std::uint8_t {
  kAuto,              // grouped broadcasts if nccl_runtime_version() >= 22902, else pad-to-max
  kGroupedBroadcast,
  kPadToMax,
};

struct NcclOptions {
  UnevenAllGather uneven_all_gather = UnevenAllGather::kAuto;
  // How long creation and each ncclInProgress call may take (and the device's host waits, set
  // by the rank environments below); 0 waits forever.
  std::chrono::milliseconds timeout{0};
};

inline constexpr int kNcclAllGatherVVersion = 22902;  // NCCL 2.29.2: fused grouped broadcasts

// The strategy kAuto resolves to for a runtime version.
UnevenAllGather resolve_uneven_all_gather(UnevenAllGather requested, int runtime_version);

// ncclUniqueId as bytes (works without a GPU).
struct NcclId {
  std::array<char, 128> bytes{};
};
Expected<NcclId> make_nccl_id();

class NcclCommunicator final : public exec::Communicator {
 public:
  // The communicators of one mesh axis on `device`'s GPU, one per stream; returns once all
  // `size` members joined (members that are threads of one process call it concurrently), and
  // registers them as an AsyncWatch of `device`. Errors: rank outside [0, size)
  // (kInvalidArgument); NCCL's (kUnavailable), e.g. two members on one GPU; members that did
  // not join within options.timeout (kUnavailable, the communicators aborted).
  static Expected<std::unique_ptr<NcclCommunicator>> make(CudaDevice* device,
                                                          std::string axis_name, int size,
                                                          int rank, const NcclId& id,
                                                          NcclOptions options);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  std::int64_t rank() const override { return rank_; }
  std::int64_t size() const override { return size_; }
  const std::string& axis_name() const override { return axis_name_; }
  Status all_gather_v(StreamKind stream, DType dtype, const void* send,
                      std::span<const std::int64_t> counts, void* recv) override;
  Status reduce_scatter_v(StreamKind stream, DType dtype, const void* send,
                          std::span<const std::int64_t> counts, void* recv) override;
  Status all_reduce(StreamKind stream, DType dtype, void* buf, std::int64_t count) override;
  // Grouped ncclSend / ncclRecv with every member (NCCL has no all-to-all call of its own).
  Status all_to_all(StreamKind stream, DType dtype, const void* send, std::int64_t count,
                    void* recv) override;

  // ncclCommAbort of every stream's communicator: pending and later collectives of this member
  // fail instead of hanging.
  void abort();
  // The uneven all-gather strategy in use (kAuto resolved).
  UnevenAllGather uneven_all_gather() const { return uneven_; }

 private:
  NcclCommunicator(CudaDevice* device, std::string axis_name, int size, int rank,
                   UnevenAllGather uneven, std::chrono::milliseconds timeout);
  Status check_counts(const char* what, std::span<const std::int64_t> counts) const;

  CudaDevice* device_;  // for streams while in use; never touched by the destructor
  std::string axis_name_;
  int size_;
  int rank_;
  UnevenAllGather uneven_;
  struct Comms;                   // hides ncclComm_t; an AsyncWatch shared with the device
  std::shared_ptr<Comms> comms_;
};

// One mesh axis group of a rank: the ranks that share every other axis's coordinate.
struct NcclGroup {
  std::int64_t axis = 0;
  std::string axis_name;
  std::int64_t index = 0;       // dense over the axis's groups: the other axes' coordinates,
                                // row-major (last axis fastest)
  std::int64_t first_rank = 0;  // global rank of the group's member 0
  int member = 0;               // this rank's index in the group (its NCCL rank)
  int size = 1;
  friend bool operator==(const NcclGroup&, const NcclGroup&) = default;
};

// The groups of `rank`, one per mesh axis in axis order. Error (kOutOfRange): rank outside
// [0, mesh.size()).
Expected<std::vector<NcclGroup>> nccl_groups_of(const DeviceMesh& mesh, std::int64_t rank);

// Hands a group's unique id from its member 0 to every member. Member 0 passes the outcome of its
// make_nccl_id(); the others pass a placeholder they must not use. When member 0's outcome is an
// error, every member must get an error (never a hang). Each member calls it once per axis, in
// axis order, as the bootstrap below does.
using NcclIdExchange =
    std::function<Expected<NcclId>(const NcclGroup& group, const Expected<NcclId>& mine)>;

// The exchange over MPI: MPI_Comm_split of MPI_COMM_WORLD by first_rank, MPI_Bcast from member
// 0. MPI must be initialised (cpu::MpiSession).
Expected<NcclId> mpi_nccl_id_exchange(const NcclGroup& group, const Expected<NcclId>& mine);

// The exchange over a store (store must outlive the function): member 0 sets
// "<axis name>/<group index>/nccl-id", the others wait for it up to `timeout`
// (store::share_from_first; member 0's error reaches them at once).
NcclIdExchange store_nccl_id_exchange(store::Store& store, std::chrono::milliseconds timeout);

// The communicators of mesh rank `rank`, one per axis: for each group of nccl_groups_of, member 0
// makes a unique id, `exchange` hands it out, then NcclCommunicator::make. The one NCCL bootstrap
// that the MPI and store paths share. Errors: the exchange's, NCCL's (prefixed with the axis).
Expected<std::unique_ptr<exec::CommunicatorSet>> bootstrap_nccl_communicators(
    const DeviceMesh& mesh, std::int64_t rank, CudaDevice* device, const NcclIdExchange& exchange,
    NcclOptions options);

// This MPI process's communicators: bootstrap_nccl_communicators with mpi_nccl_id_exchange for
// the MPI world rank (one unique id per axis: the streams' communicators are split from it).
// MPI must be initialised (cpu::MpiSession) and its world size must equal mesh.size()
// (kInvalidArgument otherwise).
Expected<std::unique_ptr<exec::CommunicatorSet>> make_nccl_communicators_mpi(
    const DeviceMesh& mesh, CudaDevice* device, NcclOptions options);

// Member `rank` of a job started without mpirun: bootstrap_nccl_communicators with
// store_nccl_id_exchange.
Expected<std::unique_ptr<exec::CommunicatorSet>> make_nccl_communicators_store(
    const DeviceMesh& mesh, std::int64_t rank, CudaDevice* device, store::Store& store,
    std::chrono::milliseconds timeout, NcclOptions options);

}  // namespace fsdp::cuda

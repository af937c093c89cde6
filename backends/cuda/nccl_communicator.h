// SPDX-License-Identifier: Apache-2.0
// NcclCommunicator: exec::Communicator over one ncclComm_t per mesh axis, enqueuing on the
// CudaDevice's stream of each call (one communicator for all streams, as PyTorch does: NCCL
// serialises its kernels per communicator, and the executor issues every collective from one host
// thread in the schedule's order, identical on all ranks, so there is no deadlock).
// * Equal counts: ncclAllGather / ncclReduceScatter (in place when send aliases recv).
// * Uneven all-gather: a group of ncclBroadcast (one per root) when the RUNTIME NCCL is >= 2.29.2
//   (it fuses them into one AllGatherV kernel), else pad-to-max: ncclAllGather of max(counts) per
//   member into a W x max staging buffer, then an unpack kernel.
// * Uneven reduce-scatter (NCCL has no ReduceScatterV): pack into W x max (zero padding),
//   ncclReduceScatter, copy this member's count out.
// * All-reduce: ncclAllReduce in place. Sums only; fp32, bf16 and fp16 reductions.
// Staging memory is stream-ordered (cudaMallocAsync) and freed after the collective on its stream.
// Errors carry ncclGetErrorString and ncclGetLastError. Bootstrap: a 128-byte unique id made by
// one member and handed to the others (MPI_Bcast, or memory for ranks that are threads).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_device.h"
#include "backends/exec/communicator.h"
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
  // ncclCommInitRank(size, id, rank) on `device`'s GPU; blocks until all `size` members joined
  // (members that are threads of one process call it concurrently). Errors: rank outside
  // [0, size) (kInvalidArgument); NCCL's (kUnavailable), e.g. two members on one GPU.
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

  // ncclCommAbort: pending and later collectives of this member fail instead of hanging.
  void abort();
  // The uneven all-gather strategy in use (kAuto resolved).
  UnevenAllGather uneven_all_gather() const { return uneven_; }

 private:
  NcclCommunicator(CudaDevice* device, std::string axis_name, int size, int rank,
                   UnevenAllGather uneven);
  Status check_counts(const char* what, std::span<const std::int64_t> counts) const;

  CudaDevice* device_;
  std::string axis_name_;
  int size_;
  int rank_;
  UnevenAllGather uneven_;
  struct Comm;
  std::unique_ptr<Comm> comm_;  // hides ncclComm_t
};

// This MPI process's communicators, one per mesh axis: MPI_Comm_split of MPI_COMM_WORLD by the
// other axes' coordinates, ncclGetUniqueId on the axis's first member, MPI_Bcast of the id.
// MPI must be initialised (cpu::MpiSession) and its world size must equal mesh.size()
// (kInvalidArgument otherwise).
Expected<std::unique_ptr<exec::CommunicatorSet>> make_nccl_communicators_mpi(
    const DeviceMesh& mesh, CudaDevice* device, NcclOptions options);

}  // namespace fsdp::cuda

// SPDX-License-Identifier: Apache-2.0
// DeviceInProcessWorld: every rank of a mesh as a thread of one process, each with its own
// CudaDevice (usually all on one GPU, where NCCL 2.28 refuses two members of a communicator),
// with collectives done by the members themselves on device memory. The host side meets through
// the host in-process world (backends/cpu/in_process_comm.h: timed barriers, abort, messages
// naming missing ranks); the device side is ordered by events only:
//   1. each member records `ready` on its stream after the work that produced its send buffer,
//      and all members exchange their buffers and events (a host all-gather = barrier);
//   2. each member's stream waits on every peer's `ready`, then does its own share: all-gather =
//      cudaMemcpyAsync D2D of every member's shard into its recv, reduce-scatter = a kernel
//      summing the members' slices in rank order (the host world's order, so results are
//      bit-identical to it), all-reduce = the same into a scratch buffer; then records `done`;
//   3. a second exchange; each member's stream waits on every peer's `done` (nobody reads its
//      buffers any more), and the all-reduce copies its scratch into place.
// Never a host wait on the device. The members' devices must address each other's memory (one
// GPU, or peers with peer access enabled). Reductions are fp32.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "backends/cuda/cuda_device.h"
#include "backends/exec/communicator.h"
#include "core/base/expected.h"
#include "core/mesh/device_mesh.h"

namespace fsdp::cuda {

class DeviceInProcessWorld {
 public:
  // Error: timeout <= 0 (kInvalidArgument).
  static Expected<std::shared_ptr<DeviceInProcessWorld>> make(const DeviceMesh& mesh,
                                                              std::chrono::milliseconds timeout);
  virtual ~DeviceInProcessWorld() = default;
  // The communicators of `rank` (one per mesh axis), issuing on `device`'s streams. FSDP_CHECKs
  // the rank; `device` must outlive them.
  virtual std::unique_ptr<exec::CommunicatorSet> communicators(std::int64_t rank,
                                                               CudaDevice* device) = 0;
  virtual void abort(const Error& error) = 0;
};

}  // namespace fsdp::cuda

// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's vendor-free entry points: code outside backends/cuda (the CLI, the trainer)
// includes only this header, so no CUDA or NCCL header leaks. Everything here works on a machine
// without a GPU or driver: the probes return 0 and the factories return one-line errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/exec/communicator.h"
#include "backends/exec/device.h"
#include "backends/exec/trainer.h"
#include "backends/model/decoder.h"
#include "backends/store/store.h"
#include "core/base/expected.h"
#include "core/mesh/device_mesh.h"

namespace fsdp::cuda {

// OK when at least one CUDA device is usable; else (kUnavailable) "backend cuda: no usable GPU
// (cudaGetDeviceCount: <name> (<code>): <reason>)" or "... (cudaGetDeviceCount: 0 devices)".
Status check_cuda_usable();

// Number of usable CUDA devices; 0 when cudaGetDeviceCount fails for any reason (no driver gives
// cudaErrorInsufficientDriver, no device cudaErrorNoDevice), never an error.
int cuda_device_count();

// A CudaDevice (cuda_device.h) on GPU `ordinal`, named `name` in messages. Errors (kUnavailable,
// one line): no usable CUDA device (with the CUDA runtime's reason), ordinal out of range.
Expected<std::unique_ptr<exec::Device>> make_cuda_device(int ordinal, std::string name);

// The decoder on `device`'s compute stream (a device from make_cuda_device; kInvalidArgument
// otherwise): params and grads passed to it are device pointers.
Expected<std::unique_ptr<backend::HostDecoder>> make_cuda_decoder(
    const backend::DecoderConfig& config, std::int64_t num_microbatches, std::int64_t data_rank,
    std::int64_t data_world, exec::Device& device);

// exec::run_rank_threads with a CudaDevice per rank, all on GPU 0 (the device in-process
// communicators need every member's memory addressable), and DeviceInProcessWorld's
// communicators. Errors: check_cuda_usable's (for every rank, before any thread starts).
std::vector<Expected<exec::RankResult>> run_ranks_in_process_cuda(
    const exec::TrainSetup& setup, const exec::TrainSpec& spec,
    const std::function<bool(std::int64_t)>& skip_rank,
    const std::function<void(std::int64_t, double)>& on_step);

// This MPI process's environment for `rank` of `mesh` (MPI initialised, one process per rank):
// a CudaDevice on GPU rank % count and NCCL communicators (make_nccl_communicators), both
// giving up after `timeout` (creation, and every host wait on a stream: the communicators are
// then aborted, so a failed or stalled peer ends the job with an error instead of a hang).
// Errors: check_cuda_usable's; the device's; NCCL's.
Expected<exec::RankEnv> make_mpi_rank_env(const DeviceMesh& mesh, std::int64_t rank,
                                          std::chrono::milliseconds timeout);

// A process started without mpirun as `rank` of `mesh` (the store path of `fsdpsim train`): a
// CudaDevice on GPU rank % count and NCCL communicators whose unique ids travel through `store`
// (each wait at most `timeout`; see make_nccl_communicators_store), with the same timeout for
// the device and communicators as make_mpi_rank_env. Errors: check_cuda_usable's;
// the device's; the store's; NCCL's.
Expected<exec::RankEnv> make_store_rank_env(const DeviceMesh& mesh, std::int64_t rank,
                                            store::Store& store, std::chrono::milliseconds timeout);

// ncclGetVersion of the loaded NCCL library (e.g. 22809 for 2.28.9), 0 if it fails.
int nccl_runtime_version();

// NCCL communicators of this MPI process on `mesh` (MPI initialised, world size = mesh size),
// bootstrapped with MPI_Bcast of a unique id per axis; see nccl_communicator.h.
Expected<std::unique_ptr<exec::CommunicatorSet>> make_nccl_communicators(const DeviceMesh& mesh,
                                                                         exec::Device& device);

}  // namespace fsdp::cuda

// SPDX-License-Identifier: Apache-2.0
// The vendor-free entry points, forwarding to the CUDA types.
#include "backends/cuda/cuda_backend.h"

#include <chrono>
#include <utility>

#include "backends/cuda/cuda_decoder.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/device_in_process_comm.h"
#include "backends/cuda/nccl_communicator.h"
#include "core/base/strings.h"

namespace fsdp::cuda {
namespace {

Expected<CudaDevice*> as_cuda(exec::Device& device, const char* what) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  if (cuda == nullptr) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(what, " needs a CUDA device; got '", device.name(), "'"));
  }
  return cuda;
}

}  // namespace

Status check_cuda_usable() {
  Expected<int> n = probe_cuda_devices();
  if (!n.has_value()) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("backend cuda: no usable GPU (", n.error().message(), ")"));
  }
  if (*n < 1) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("backend cuda: no usable GPU (cudaGetDeviceCount: ", *n, " devices)"));
  }
  return ok_status();
}

std::vector<Expected<exec::RankResult>> run_ranks_in_process_cuda(
    const exec::TrainSetup& setup, const exec::TrainSpec& spec,
    const std::function<bool(std::int64_t)>& skip_rank,
    const std::function<void(std::int64_t, double)>& on_step) {
  const auto n = static_cast<std::size_t>(setup.config.mesh().size());
  if (Status s = check_cuda_usable(); !s.ok()) {
    return std::vector<Expected<exec::RankResult>>(n, s.error());
  }
  auto world = DeviceInProcessWorld::make(
      setup.config.mesh(),
      std::chrono::milliseconds(static_cast<std::int64_t>(spec.timeout_s * 1000.0)));
  if (!world) {
    return std::vector<Expected<exec::RankResult>>(n, world.error());
  }
  auto make_env = [&](std::int64_t r) -> Expected<exec::RankEnv> {
    Expected<std::unique_ptr<CudaDevice>> device = CudaDevice::make(0, str_cat("rank ", r));
    if (!device) {
      (*world)->abort(device.error());
      return device.error();
    }
    (*device)->set_timeout(std::chrono::milliseconds(
        static_cast<std::int64_t>(spec.timeout_s * 1000.0)));
    exec::RankEnv env;
    env.comms = (*world)->communicators(r, device->get());
    env.device = std::move(*device);
    return env;
  };
  return exec::run_rank_threads(setup, spec, make_env, skip_rank, on_step);
}

Expected<exec::RankEnv> make_mpi_rank_env(const DeviceMesh& mesh, std::int64_t rank,
                                          std::chrono::milliseconds timeout) {
  FSDP_RETURN_IF_ERROR(check_cuda_usable());
  const int ordinal = static_cast<int>(rank % cuda_device_count());
  FSDP_TRY(std::unique_ptr<CudaDevice> device, CudaDevice::make(ordinal, str_cat("rank ", rank)));
  device->set_timeout(timeout);
  NcclOptions options;
  options.timeout = timeout;
  exec::RankEnv env;
  FSDP_TRY(env.comms, make_nccl_communicators_mpi(mesh, device.get(), options));
  env.device = std::move(device);
  return env;
}

Expected<exec::RankEnv> make_store_rank_env(const DeviceMesh& mesh, std::int64_t rank,
                                            store::Store& store,
                                            std::chrono::milliseconds timeout) {
  FSDP_RETURN_IF_ERROR(check_cuda_usable());
  const int ordinal = static_cast<int>(rank % cuda_device_count());
  FSDP_TRY(std::unique_ptr<CudaDevice> device, CudaDevice::make(ordinal, str_cat("rank ", rank)));
  device->set_timeout(timeout);
  NcclOptions options;
  options.timeout = timeout;
  exec::RankEnv env;
  FSDP_TRY(env.comms,
           make_nccl_communicators_store(mesh, rank, device.get(), store, timeout, options));
  env.device = std::move(device);
  return env;
}

int cuda_device_count() {
  Expected<int> n = probe_cuda_devices();
  return n.has_value() ? *n : 0;
}

Expected<std::unique_ptr<exec::Device>> make_cuda_device(int ordinal, std::string name) {
  FSDP_TRY(std::unique_ptr<CudaDevice> device, CudaDevice::make(ordinal, std::move(name)));
  return std::unique_ptr<exec::Device>(std::move(device));
}

Expected<std::unique_ptr<backend::HostDecoder>> make_cuda_decoder(
    const backend::DecoderConfig& config, std::int64_t num_microbatches, std::int64_t data_rank,
    std::int64_t data_world, exec::Device& device) {
  FSDP_TRY(CudaDevice * cuda, as_cuda(device, "the cuda decoder"));
  FSDP_TRY(std::unique_ptr<CudaDecoder> decoder,
           CudaDecoder::make(config, num_microbatches, data_rank, data_world, cuda->ordinal(),
                             cuda->stream(StreamKind::kCompute)));
  return std::unique_ptr<backend::HostDecoder>(std::move(decoder));
}

Expected<std::unique_ptr<exec::CommunicatorSet>> make_nccl_communicators(const DeviceMesh& mesh,
                                                                         exec::Device& device) {
  FSDP_TRY(CudaDevice * cuda, as_cuda(device, "nccl communicators"));
  return make_nccl_communicators_mpi(mesh, cuda, NcclOptions{});
}

}  // namespace fsdp::cuda

// SPDX-License-Identifier: Apache-2.0
// The vendor-free entry points, forwarding to the CUDA types.
#include "backends/cuda/cuda_backend.h"

#include <utility>

#include "backends/cuda/cuda_decoder.h"
#include "backends/cuda/cuda_device.h"
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

// SPDX-License-Identifier: Apache-2.0
// CudaDecoder: backend::HostDecoder's interface on device pointers (params and grads are device
// memory), on one CUDA stream: cuBLAS sgemm (pedantic fp32 math, no TF32) for the matmuls and
// the kernels of cuda_kernels.h, which follow backends/model/kernels.cc's equations, so results
// match the host decoder within fp32 rounding. Activations live in stream-ordered device memory.
// Calls only enqueue work, except step_loss() (copies the row losses back and waits for the
// stream). A CUDA or cuBLAS failure is kept as status() (the interface returns void) and turns
// later calls into no-ops. Not thread-safe: the compute stream's issuer calls it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "backends/model/decoder.h"
#include "core/base/expected.h"

namespace fsdp::cuda {

class CudaDecoder : public backend::HostDecoder {
 public:
  // Errors: the host decoder's argument checks; cuBLAS handle creation (kUnavailable).
  static Expected<std::unique_ptr<CudaDecoder>> make(const backend::DecoderConfig& config,
                                                     std::int64_t num_microbatches,
                                                     std::int64_t data_rank,
                                                     std::int64_t data_world, int ordinal,
                                                     cudaStream_t stream);
  // The first CUDA/cuBLAS error of any call so far.
  Status status() const override = 0;
};

}  // namespace fsdp::cuda

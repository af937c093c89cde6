// SPDX-License-Identifier: Apache-2.0
// CudaDecoder: the decoder driver (backends/model/decoder_driver.h) over the CUDA kernel set, so
// params and grads are device memory: cuBLAS sgemm (pedantic fp32 math, no TF32) for the matmuls
// and the kernels of cuda_kernels.h, which follow backends/model/kernels.cc's equations, so results
// match the host decoder within fp32 rounding. Activations live in stream-ordered device memory
// (cudaMallocAsync on the compute stream). Calls only enqueue work on `stream`, except
// begin_step() (waits for its token uploads) and step_loss() (copies the row losses back). A CUDA
// or cuBLAS failure is kept as status() (the interface returns void) and turns later calls into
// no-ops. Not thread-safe: the compute stream's issuer calls it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "backends/model/decoder.h"
#include "backends/model/decoder_driver.h"
#include "backends/model/decoder_kernels.h"
#include "core/base/expected.h"

namespace fsdp::cuda {

// The CUDA kernel set alone (what CudaDecoder runs on), on device `ordinal` and `stream`; its
// pointers are device memory. Errors: cuBLAS handle creation (kUnavailable).
Expected<std::unique_ptr<backend::DecoderKernels>> make_cuda_kernels(int ordinal,
                                                                     cudaStream_t stream);

class CudaDecoder : public backend::DecoderDriver {
 public:
  // Errors: the host decoder's argument checks ("cuda decoder: ..."); cuBLAS handle creation
  // (kUnavailable).
  static Expected<std::unique_ptr<CudaDecoder>> make(const backend::DecoderConfig& config,
                                                     std::int64_t num_microbatches,
                                                     std::int64_t data_rank,
                                                     std::int64_t data_world, int ordinal,
                                                     cudaStream_t stream);

 private:
  CudaDecoder(const backend::DecoderConfig& config, std::int64_t num_microbatches,
              std::int64_t data_rank, std::int64_t data_world,
              std::unique_ptr<backend::DecoderKernels> kernels)
      : DecoderDriver(config, num_microbatches, data_rank, data_world, std::move(kernels)) {}
};

}  // namespace fsdp::cuda

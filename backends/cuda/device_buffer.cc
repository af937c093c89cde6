// SPDX-License-Identifier: Apache-2.0
// DeviceBuffer allocation (the rest is inline).
#include "backends/cuda/device_buffer.h"

#include <cstddef>

#include "backends/cuda/cuda_error.h"

namespace fsdp::cuda {

Expected<DeviceBuffer> DeviceBuffer::make(std::int64_t bytes, cudaStream_t stream) {
  DeviceBuffer b;
  b.stream_ = stream;
  if (bytes <= 0) {
    return b;
  }
  FSDP_CUDA_TRY(cudaMallocAsync(&b.ptr_, static_cast<std::size_t>(bytes), stream));
  b.bytes_ = bytes;
  return b;
}

}  // namespace fsdp::cuda

// SPDX-License-Identifier: Apache-2.0
// DeviceBuffer: stream-ordered device memory (cudaMallocAsync / cudaFreeAsync on one stream),
// for scratch space whose whole life is on that stream: the free is ordered after every earlier
// use on the stream, so no event bookkeeping is needed. Move-only; the stream must outlive it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "core/base/expected.h"

namespace fsdp::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `bytes` (>= 0) of uninitialised device memory on `stream`; 0 gives an empty buffer.
  // Errors: cudaMallocAsync's (kUnavailable).
  static Expected<DeviceBuffer> make(std::int64_t bytes, cudaStream_t stream);
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      stream_ = other.stream_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  void* data() const { return ptr_; }
  std::int64_t bytes() const { return bytes_; }
  bool empty() const { return ptr_ == nullptr; }
  // Frees (stream-ordered) and becomes empty.
  void reset() {
    if (ptr_ != nullptr) {
      (void)cudaFreeAsync(ptr_, stream_);
      ptr_ = nullptr;
      bytes_ = 0;
    }
  }

 private:
  void* ptr_ = nullptr;
  std::int64_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

}  // namespace fsdp::cuda

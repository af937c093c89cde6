// SPDX-License-Identifier: Apache-2.0
// Helpers of the CUDA backend tests: the GPU skip guard and host<->device copies that fail the
// test on a CUDA error.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_backend.h"

// Skips the test (one-line reason) when no CUDA device can be used.
#define FSDP_SKIP_WITHOUT_GPU()                    \
  do {                                             \
    if (::fsdp::cuda::cuda_device_count() == 0) {  \
      GTEST_SKIP() << "no CUDA device";            \
    }                                              \
  } while (false)

namespace fsdp::cuda::testing {

// Blocks `stream` until *open becomes true (a host function spinning on the flag).
inline void gate(cudaStream_t stream, std::atomic<bool>* open) {
  ASSERT_EQ(cudaLaunchHostFunc(
                stream,
                [](void* flag) {
                  while (!static_cast<std::atomic<bool>*>(flag)->load()) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                  }
                },
                open),
            cudaSuccess);
}

// Device memory freed at scope exit; uploads and downloads use the legacy default stream and
// wait for the whole device, so they are ordered with the backend's non-blocking streams.
template <class T>
class DeviceVector {
 public:
  explicit DeviceVector(std::size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(&p_, std::max<std::size_t>(n, 1) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemset(p_, 0, std::max<std::size_t>(n, 1) * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  explicit DeviceVector(const std::vector<T>& host) : DeviceVector(host.size()) { upload(host); }
  ~DeviceVector() { (void)cudaFree(p_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* get() const { return static_cast<T*>(p_); }
  std::size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    EXPECT_EQ(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
    // A pageable upload may return before its DMA lands; the backend's streams are
    // non-blocking, so nothing else orders them after it.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  void* p_ = nullptr;
  std::size_t n_;
};

// max_i |a_i - b_i| / max(max_i |b_i|, tiny): one relative error for a whole tensor.
inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0;
  double scale = 1e-30;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return a.size() == b.size() ? diff / scale : 1e30;
}

}  // namespace fsdp::cuda::testing

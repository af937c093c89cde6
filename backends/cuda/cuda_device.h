// SPDX-License-Identifier: Apache-2.0
// CudaDevice: one GPU as an exec::Device. One non-blocking cudaStream_t per StreamKind (the
// all-gather and reduce-scatter streams at priority -1, compute at the default), one cudaEvent_t
// (DisableTiming) per IR event, and a pair of timing events around every task for the timeline.
// A task runs on the host at submit time and may only enqueue device work on stream(kind); a
// task error poisons the device (later tasks, records and waits are skipped; synchronize()
// returns the first error). Transient buffers come from an Arena on cudaMalloc with
// stream-ordered reuse: a released block's fence is an event recorded on the releasing stream,
// and a user on another stream first waits on it (cudaStreamWaitEvent), so reuse never depends
// on host timing; blocks are zeroed with cudaMemsetAsync on the allocating stream. Resident
// buffers come from the same cudaMalloc resource. Every host wait (synchronize, upload,
// download) polls the streams instead of blocking in the driver, checks the asynchronous errors
// of the watches registered with it (NCCL communicators) and, past the timeout, aborts them and
// reports the stream that did not finish. All time stamps (tasks and memory records) are CUDA
// events, resolved to int64 nanoseconds at synchronize against an epoch event re-anchored to the
// host clock at every synchronize (so float milliseconds only ever span one step). Thread-safe:
// one mutex guards the bookkeeping (never held while a task runs, so a task may call fence()).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_kernels.h"
#include "backends/exec/arena.h"
#include "backends/exec/device.h"
#include "core/base/expected.h"

namespace fsdp::cuda {

// cudaGetDeviceCount, or the error it returned (no driver gives cudaErrorInsufficientDriver or
// cudaErrorNoDevice) as one line.
Expected<int> probe_cuda_devices();

// cudaMalloc'd memory of one device. zero() (resident buffers, before any stream uses them)
// uses cudaMemsetAsync on a private stream and waits for it, so the zeros are visible to every
// stream once it returns; zero_on() (arena blocks) enqueues cudaMemsetAsync on the user's stream
// of `streams`. A failed zero is reported through `on_error` (the owning device poisons itself).
class CudaMemory final : public exec::MemoryResource {
 public:
  CudaMemory(int ordinal, std::function<void(const Error&)> on_error,
             const std::array<cudaStream_t, kNumStreams>* streams);
  ~CudaMemory() override;
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;
  Expected<void*> allocate(std::int64_t bytes) override;
  void deallocate(void* ptr, std::int64_t bytes) override;
  void zero(void* ptr, std::int64_t bytes) override;
  void zero_on(void* ptr, std::int64_t bytes, StreamKind stream) override;

 private:
  int ordinal_;
  std::function<void(const Error&)> on_error_;
  const std::array<cudaStream_t, kNumStreams>* streams_;
  cudaStream_t zero_stream_ = nullptr;
};

// Work on a device's streams that can fail or stall asynchronously, outside any CUDA call's
// return value (an NCCL communicator: a peer's failure, a network error, a peer that never
// arrives). The device polls it while the host waits and aborts it when the wait gives up.
class AsyncWatch {
 public:
  virtual ~AsyncWatch() = default;
  // The first asynchronous error so far (ncclCommGetAsyncError), or OK.
  virtual Status poll() = 0;
  // Makes pending and later work fail instead of hanging (ncclCommAbort).
  virtual void abort() = 0;
};

// The kernel arguments of backend::optimizer_update's step `step` (>= 1): the kind's code and
// the bias corrections computed on the host in double, as the host update does.
OptimizerArgs optimizer_args(OptimizerKind kind, const backend::OptimizerHyper& hyper,
                             std::int64_t step);

class CudaDevice final : public exec::Device {
 public:
  // Errors (kUnavailable, one line naming `name` and the ordinal): no usable CUDA device (with
  // cudaGetDeviceCount's message), the ordinal outside [0, count), stream or event creation.
  static Expected<std::unique_ptr<CudaDevice>> make(int ordinal, std::string name);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::string name() const override { return name_; }
  void submit(StreamKind stream, exec::TaskTag tag, exec::Task task) override;
  void record(StreamKind stream, std::int32_t event, exec::TaskTag tag) override;
  void wait(StreamKind stream, std::int32_t event, exec::TaskTag tag) override;
  Status synchronize() override;
  void reset_events(std::int32_t num_events) override;
  void abort(const Error& error) override;
  exec::Fence fence(StreamKind stream) override;
  bool host_addressable() const override { return false; }  // cudaMalloc'd memory
  exec::Arena& arena() override { return arena_; }
  exec::MemoryResource& memory() override { return memory_; }
  // Data ops: cudaMemcpyAsync and the kernels of cuda_kernels.h on stream(kind); upload and
  // download also wait for that stream.
  Status copy(StreamKind stream, float* dst, const float* src, std::int64_t n) override;
  Status accumulate(StreamKind stream, float* dst, const float* src, std::int64_t n, float scale,
                    bool overwrite) override;
  Status optimizer_update(StreamKind stream, OptimizerKind kind,
                          const backend::OptimizerHyper& hyper, std::int64_t step, float* weights,
                          const float* grads, float* state, std::int64_t n) override;
  Status upload(StreamKind stream, float* dst, const float* host, std::int64_t n) override;
  Status download(StreamKind stream, float* host, const float* src, std::int64_t n) override;
  // A CudaDecoder on this device's compute stream.
  Expected<std::unique_ptr<backend::HostDecoder>> make_decoder(
      const backend::DecoderConfig& config, std::int64_t num_microbatches,
      std::int64_t data_rank, std::int64_t data_world) override;
  std::int64_t now_ns() const override;
  std::vector<exec::TaskTiming> timeline() const override;

  int ordinal() const { return ordinal_; }
  // How long a host wait (synchronize, upload, download) may take before the device aborts its
  // watches and fails with the stream that did not finish; 0 (the default) waits forever.
  void set_timeout(std::chrono::milliseconds timeout);
  // Registers `watch` for the host waits; the device keeps only a weak reference, so a watch
  // that is destroyed first simply drops out.
  void add_watch(std::weak_ptr<AsyncWatch> watch);
  cudaStream_t stream(StreamKind kind) const { return streams_[static_cast<std::size_t>(kind)]; }
  // Makes this device current on the calling host thread (CUDA's current device is per thread).
  Status make_current() const;
  // The first error so far, if any (the device is poisoned).
  std::optional<Error> error() const;

 private:
  struct Pending {  // timing events of one task, resolved at synchronize()
    StreamKind stream;
    exec::TaskTag tag;
    cudaEvent_t start;
    cudaEvent_t end;
  };
  CudaDevice(int ordinal, std::string name);
  Status init();
  void poison(const Error& error);
  bool poisoned() const;
  // Runs `enqueue` between two timing events on `stream`, unless the device is poisoned.
  void timed(StreamKind stream, exec::TaskTag tag, const std::function<Status()>& enqueue);
  Expected<cudaEvent_t> timing_event();  // from the pool, or new
  // A blocking copy of n floats on stream(kind) (upload / download).
  Status transfer(StreamKind kind, void* dst, const void* src, std::int64_t n,
                  cudaMemcpyKind direction);
  // Waits until the streams `mask` selects (bit s: StreamKind s) are idle, polling them and the
  // watches; past the timeout aborts the watches. `what` names the wait in errors.
  Status wait_streams(unsigned mask, const char* what);
  // A provisional stamp for the arena log: a timing event recorded on stream(kind), resolved by
  // resolve_timings (negative: -(index + 1) into stamps_; 0 when recording failed).
  std::int64_t stamp(StreamKind kind);
  Status resolve_timings();             // streams idle; re-anchors the epoch

  int ordinal_;
  std::string name_;
  std::chrono::steady_clock::time_point epoch_host_;
  std::array<cudaStream_t, kNumStreams> streams_{};
  CudaMemory memory_;
  exec::Arena arena_;
  cudaEvent_t epoch_ = nullptr;   // recorded on the compute stream when the streams were idle
  std::int64_t epoch_ns_ = 0;     // its time on the host clock (now_ns)
  std::chrono::milliseconds timeout_{0};
  std::vector<std::weak_ptr<AsyncWatch>> watches_;
  std::vector<cudaEvent_t> stamps_;  // arena stamps since the last resolve
  mutable std::mutex mu_;
  std::optional<Error> error_;
  std::vector<cudaEvent_t> events_;  // IR events, DisableTiming
  std::vector<char> recorded_;       // record() issued since reset_events
  std::vector<cudaEvent_t> timing_pool_;
  std::vector<Pending> pending_;
  std::vector<exec::TaskTiming> timeline_;
};

}  // namespace fsdp::cuda

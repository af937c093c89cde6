// SPDX-License-Identifier: Apache-2.0
// CudaDevice. Timing events come from a pool and are turned into TaskTimings and arena stamps
// only at synchronize(), when the streams are idle (reading them earlier would block the host):
// ns = epoch_ns_ + elapsed(epoch_, event), where epoch_ is recorded when the streams were last
// idle and epoch_ns_ is the host clock then, so elapsed times in float milliseconds never span
// more than one step (cudaEventElapsedTime resolves about 0.5 us).
#include "backends/cuda/cuda_device.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <thread>
#include <utility>

#include "backends/cuda/cuda_decoder.h"
#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_kernels.h"
#include "core/base/strings.h"

namespace fsdp::cuda {

Expected<int> probe_cuda_devices() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Error(ErrorCode::kUnavailable,
                 str_cat("cudaGetDeviceCount: ", cudaGetErrorName(e), " (", static_cast<int>(e),
                         "): ", cudaGetErrorString(e)));
  }
  return count;
}

// --- CudaMemory ----------------------------------------------------------------------------------

CudaMemory::CudaMemory(int ordinal, std::function<void(const Error&)> on_error,
                       const std::array<cudaStream_t, kNumStreams>* streams)
    : ordinal_(ordinal), on_error_(std::move(on_error)), streams_(streams) {}

CudaMemory::~CudaMemory() {
  if (zero_stream_ != nullptr) {
    (void)cudaStreamDestroy(zero_stream_);
  }
}

Expected<void*> CudaMemory::allocate(std::int64_t bytes) {
  FSDP_CUDA_TRY(cudaSetDevice(ordinal_));
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1)));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Error(ErrorCode::kUnavailable,
                 str_cat("cuda device ", ordinal_, ": cannot allocate ", bytes,
                         " bytes: cudaMalloc: ", cudaGetErrorString(e)));
  }
  return p;
}

void CudaMemory::deallocate(void* ptr, std::int64_t /*bytes*/) { (void)cudaFree(ptr); }

void CudaMemory::zero(void* ptr, std::int64_t bytes) {
  auto run = [&]() -> Status {
    FSDP_CUDA_TRY(cudaSetDevice(ordinal_));
    if (zero_stream_ == nullptr) {
      FSDP_CUDA_TRY(cudaStreamCreateWithFlags(&zero_stream_, cudaStreamNonBlocking));
    }
    FSDP_CUDA_TRY(cudaMemsetAsync(ptr, 0, static_cast<std::size_t>(bytes), zero_stream_));
    FSDP_CUDA_TRY(cudaStreamSynchronize(zero_stream_));
    return ok_status();
  };
  if (bytes <= 0) {
    return;
  }
  if (Status s = run(); !s.ok() && on_error_) {
    on_error_(s.error());
  }
}

void CudaMemory::zero_on(void* ptr, std::int64_t bytes, StreamKind stream) {
  if (bytes <= 0) {
    return;
  }
  const cudaStream_t s = (*streams_)[static_cast<std::size_t>(stream)];
  if (const cudaError_t e = cudaMemsetAsync(ptr, 0, static_cast<std::size_t>(bytes), s);
      e != cudaSuccess && on_error_) {
    on_error_(cuda_error(e, "cudaMemsetAsync", __FILE__, __LINE__));
  }
}

// --- CudaDevice ----------------------------------------------------------------------------------

CudaDevice::CudaDevice(int ordinal, std::string name)
    : ordinal_(ordinal),
      name_(std::move(name)),
      epoch_host_(std::chrono::steady_clock::now()),
      memory_(ordinal, [this](const Error& e) { poison(e); }, &streams_),
      arena_(&memory_) {
  arena_.set_clock([this](StreamKind kind) { return stamp(kind); });
}

Expected<std::unique_ptr<CudaDevice>> CudaDevice::make(int ordinal, std::string name) {
  Expected<int> count = probe_cuda_devices();
  if (!count.has_value()) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("cuda device ", ordinal, " for ", name, ": no usable CUDA device (",
                         count.error().message(), ")"));
  }
  if (ordinal < 0 || ordinal >= *count) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("cuda device ", ordinal, " for ", name, ": ordinal outside [0, ", *count,
                         ") (", *count, " CUDA device(s) visible)"));
  }
  std::unique_ptr<CudaDevice> device(new CudaDevice(ordinal, std::move(name)));
  if (Status s = device->init(); !s.ok()) {
    return Error(s.error()).with_context(str_cat("cuda device ", ordinal, " for ", device->name_));
  }
  return device;
}

Status CudaDevice::init() {
  FSDP_RETURN_IF_ERROR(make_current());
  int least = 0;
  int greatest = 0;
  FSDP_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  const int comm_priority = std::max(greatest, std::min(least, -1));
  for (int s = 0; s < kNumStreams; ++s) {
    const int priority = static_cast<StreamKind>(s) == StreamKind::kCompute ? least : comm_priority;
    FSDP_CUDA_TRY(cudaStreamCreateWithPriority(&streams_[static_cast<std::size_t>(s)],
                                               cudaStreamNonBlocking, priority));
  }
  // Staging buffers of the collectives (DeviceBuffer) come from the stream-ordered pool: keep
  // what it has reserved instead of returning it to the driver at every synchronisation.
  cudaMemPool_t pool = nullptr;
  FSDP_CUDA_TRY(cudaDeviceGetDefaultMemPool(&pool, ordinal_));
  std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
  FSDP_CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  FSDP_CUDA_TRY(cudaEventCreate(&epoch_));
  FSDP_CUDA_TRY(cudaEventRecord(epoch_, stream(StreamKind::kCompute)));
  FSDP_CUDA_TRY(cudaEventSynchronize(epoch_));
  epoch_host_ = std::chrono::steady_clock::now();
  epoch_ns_ = 0;
  return ok_status();
}

CudaDevice::~CudaDevice() {
  (void)cudaSetDevice(ordinal_);
  // Drain with the watchdog: a collective whose peers never arrive must not hang the exit (past
  // the timeout the communicators are aborted, and their kernels return).
  if (std::all_of(streams_.begin(), streams_.end(), [](cudaStream_t s) { return s != nullptr; })) {
    (void)wait_streams((1U << kNumStreams) - 1, "destruction");
  }
  for (cudaEvent_t e : events_) {
    (void)cudaEventDestroy(e);
  }
  for (cudaEvent_t e : timing_pool_) {
    (void)cudaEventDestroy(e);
  }
  for (const Pending& p : pending_) {
    (void)cudaEventDestroy(p.start);
    (void)cudaEventDestroy(p.end);
  }
  for (cudaEvent_t e : stamps_) {
    if (e != nullptr) {
      (void)cudaEventDestroy(e);
    }
  }
  if (epoch_ != nullptr) {
    (void)cudaEventDestroy(epoch_);
  }
  for (cudaStream_t s : streams_) {
    if (s != nullptr) {
      (void)cudaStreamDestroy(s);
    }
  }
}

Status CudaDevice::make_current() const {
  FSDP_CUDA_TRY(cudaSetDevice(ordinal_));
  return ok_status();
}

std::int64_t CudaDevice::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              epoch_host_)
      .count();
}

std::optional<Error> CudaDevice::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void CudaDevice::poison(const Error& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_) {
    error_ = error;
  }
}

bool CudaDevice::poisoned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_.has_value();
}

void CudaDevice::abort(const Error& error) { poison(error); }

void CudaDevice::set_timeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  timeout_ = timeout;
}

void CudaDevice::add_watch(std::weak_ptr<AsyncWatch> watch) {
  std::lock_guard<std::mutex> lock(mu_);
  watches_.push_back(std::move(watch));
}

Status CudaDevice::wait_streams(unsigned mask, const char* what) {
  std::chrono::milliseconds timeout{0};
  std::vector<std::shared_ptr<AsyncWatch>> watches;
  {
    std::lock_guard<std::mutex> lock(mu_);
    timeout = timeout_;
    for (const auto& w : watches_) {
      if (auto live = w.lock()) {
        watches.push_back(std::move(live));
      }
    }
  }
  auto abort_watches = [&] {
    for (auto& w : watches) {
      w->abort();
    }
  };
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    int busy = -1;
    for (int s = 0; s < kNumStreams; ++s) {
      if ((mask & (1U << s)) == 0) {
        continue;
      }
      const cudaError_t e = cudaStreamQuery(streams_[static_cast<std::size_t>(s)]);
      if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();  // not an error, but it stays the thread's last error
        busy = s;
        break;
      }
      if (e != cudaSuccess) {
        abort_watches();
        return cuda_error(e, "cudaStreamQuery", __FILE__, __LINE__)
            .with_context(str_cat(name_, ", ", to_string(static_cast<StreamKind>(s)),
                                  " stream, ", what));
      }
    }
    if (busy < 0) {
      return ok_status();
    }
    for (auto& w : watches) {
      if (Status st = w->poll(); !st.ok()) {
        abort_watches();
        return Error(st.error()).with_context(
            str_cat(name_, ", ", to_string(static_cast<StreamKind>(busy)), " stream, ", what));
      }
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    if (timeout.count() > 0 && waited > timeout) {
      abort_watches();
      return Error(ErrorCode::kUnavailable,
                   str_cat(name_, ": the ", to_string(static_cast<StreamKind>(busy)),
                           " stream did not finish within ", timeout.count(), " ms (", what,
                           "; a collective whose peers never arrived?); communicators aborted"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
}

std::int64_t CudaDevice::stamp(StreamKind kind) {
  Expected<cudaEvent_t> e = timing_event();
  if (!e.has_value()) {
    poison(e.error());
    return 0;
  }
  if (const cudaError_t r = cudaEventRecord(*e, stream(kind)); r != cudaSuccess) {
    poison(cuda_error(r, "cudaEventRecord", __FILE__, __LINE__));
    std::lock_guard<std::mutex> lock(mu_);
    timing_pool_.push_back(*e);
    return 0;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stamps_.push_back(*e);
  return -static_cast<std::int64_t>(stamps_.size());
}

Expected<cudaEvent_t> CudaDevice::timing_event() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!timing_pool_.empty()) {
      cudaEvent_t e = timing_pool_.back();
      timing_pool_.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  FSDP_CUDA_TRY(cudaEventCreate(&e));
  return e;
}

void CudaDevice::timed(StreamKind kind, exec::TaskTag tag,
                       const std::function<Status()>& enqueue) {
  if (poisoned()) {
    return;
  }
  auto run = [&]() -> Status {
    FSDP_RETURN_IF_ERROR(make_current());
    (void)cudaGetLastError();  // a stale error (e.g. a not-ready query) is not this task's
    FSDP_TRY(cudaEvent_t start, timing_event());
    FSDP_TRY(cudaEvent_t end, timing_event());
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(Pending{kind, tag, start, end});  // owned by pending_ from here on
    }
    FSDP_CUDA_TRY(cudaEventRecord(start, stream(kind)));
    FSDP_RETURN_IF_ERROR(enqueue());
    FSDP_CUDA_TRY(cudaEventRecord(end, stream(kind)));
    return ok_status();
  };
  if (Status s = run(); !s.ok()) {
    poison(Error(s.error()).with_context(str_cat(name_, ", ", to_string(kind), " stream")));
  }
}

void CudaDevice::submit(StreamKind stream, exec::TaskTag tag, exec::Task task) {
  timed(stream, tag, task);
}

void CudaDevice::record(StreamKind kind, std::int32_t event, exec::TaskTag tag) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event < 0 || static_cast<std::size_t>(event) >= events_.size() ||
        static_cast<std::size_t>(event) >= recorded_.size()) {
      if (!error_) {
        error_ = Error(ErrorCode::kOutOfRange, str_cat(name_, ": record of event ", event,
                                                       " outside [0, ", recorded_.size(), ")"));
      }
      return;
    }
    recorded_[static_cast<std::size_t>(event)] = 1;
  }
  cudaEvent_t e = events_[static_cast<std::size_t>(event)];
  timed(kind, tag, [&]() -> Status {
    FSDP_CUDA_TRY(cudaEventRecord(e, stream(kind)));
    return ok_status();
  });
}

void CudaDevice::wait(StreamKind kind, std::int32_t event, exec::TaskTag tag) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event < 0 || static_cast<std::size_t>(event) >= recorded_.size() ||
        recorded_[static_cast<std::size_t>(event)] == 0) {
      if (!error_) {
        error_ = Error(ErrorCode::kFailedPrecondition,
                       str_cat(name_, ": wait on event ", event, " issued before its record"));
      }
      return;
    }
  }
  cudaEvent_t e = events_[static_cast<std::size_t>(event)];
  timed(kind, tag, [&]() -> Status {
    FSDP_CUDA_TRY(cudaStreamWaitEvent(stream(kind), e, 0));
    return ok_status();
  });
}

void CudaDevice::reset_events(std::int32_t num_events) {
  const std::size_t n = static_cast<std::size_t>(std::max(num_events, 0));
  auto grow = [&]() -> Status {
    FSDP_RETURN_IF_ERROR(make_current());
    while (events_.size() < n) {
      cudaEvent_t e = nullptr;
      FSDP_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(e);
    }
    return ok_status();
  };
  if (Status s = grow(); !s.ok()) {
    poison(s.error());
  }
  std::lock_guard<std::mutex> lock(mu_);
  recorded_.assign(n, 0);
}

exec::Fence CudaDevice::fence(StreamKind kind) {
  auto make = [&]() -> Expected<exec::Fence> {
    FSDP_RETURN_IF_ERROR(make_current());
    cudaEvent_t raw = nullptr;
    FSDP_CUDA_TRY(cudaEventCreateWithFlags(&raw, cudaEventDisableTiming));
    // Destroying an event that is still pending is allowed: CUDA frees it once it completes.
    std::shared_ptr<CUevent_st> event(raw, [](cudaEvent_t e) { (void)cudaEventDestroy(e); });
    FSDP_CUDA_TRY(cudaEventRecord(raw, stream(kind)));
    // Stream-ordered reuse: the releasing stream may reuse at once; another stream waits on the
    // release event first (enqueued, never a host wait).
    return exec::Fence([this, event, kind](StreamKind user) {
      if (user == kind) {
        return true;
      }
      if (const cudaError_t e = cudaStreamWaitEvent(stream(user), event.get(), 0);
          e != cudaSuccess) {
        poison(cuda_error(e, "cudaStreamWaitEvent", __FILE__, __LINE__));
        return false;
      }
      return true;
    });
  };
  Expected<exec::Fence> f = make();
  if (!f.has_value()) {
    poison(f.error());
    return [](StreamKind) { return false; };  // never reuse a block whose last use is unknown
  }
  return std::move(f).value();
}

Status CudaDevice::resolve_timings() {
  std::vector<Pending> pending;
  std::vector<cudaEvent_t> stamps;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.swap(pending_);
    stamps.swap(stamps_);
  }
  // Nanoseconds of `event` on the host clock, or -1 when it was never recorded (a task that
  // failed before its end event).
  auto ns_of = [this](cudaEvent_t event) -> std::int64_t {
    float ms = 0.0F;
    if (cudaEventElapsedTime(&ms, epoch_, event) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;
    }
    return epoch_ns_ + std::llround(static_cast<double>(ms) * 1e6);
  };
  std::vector<exec::TaskTiming> resolved;
  resolved.reserve(pending.size());
  for (const Pending& p : pending) {
    const std::int64_t start = ns_of(p.start);
    const std::int64_t end = ns_of(p.end);
    if (start >= 0 && end >= 0) {
      resolved.push_back(exec::TaskTiming{p.stream, p.tag, start, end});
    }
  }
  arena_.resolve_times([&](std::int64_t t) -> std::int64_t {
    if (t >= 0) {
      return t;  // already nanoseconds (or 0: a stamp that failed)
    }
    const auto k = static_cast<std::size_t>(-t - 1);
    return k < stamps.size() ? std::max<std::int64_t>(ns_of(stamps[k]), 0) : 0;
  });
  // Re-anchor the epoch while the streams are idle: the next step's elapsed times start here.
  FSDP_CUDA_TRY(cudaEventRecord(epoch_, stream(StreamKind::kCompute)));
  FSDP_CUDA_TRY(cudaEventSynchronize(epoch_));
  epoch_ns_ = now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  for (const Pending& p : pending) {
    timing_pool_.push_back(p.start);
    timing_pool_.push_back(p.end);
  }
  timing_pool_.insert(timing_pool_.end(), stamps.begin(), stamps.end());
  timeline_.insert(timeline_.end(), resolved.begin(), resolved.end());
  return ok_status();
}

Status CudaDevice::synchronize() {
  auto drain = [&]() -> Status {
    FSDP_RETURN_IF_ERROR(make_current());
    FSDP_RETURN_IF_ERROR(wait_streams((1U << kNumStreams) - 1, "synchronize"));
    return resolve_timings();
  };
  if (Status s = drain(); !s.ok()) {
    poison(s.error());
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) {
    Error e = *error_;
    return e;
  }
  return ok_status();
}

std::vector<exec::TaskTiming> CudaDevice::timeline() const {
  std::lock_guard<std::mutex> lock(mu_);
  return timeline_;
}

}  // namespace fsdp::cuda

namespace fsdp::cuda {

// --- data ops ------------------------------------------------------------------------------------

namespace {

std::size_t float_bytes(std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); }

}  // namespace

OptimizerArgs optimizer_args(OptimizerKind kind, const backend::OptimizerHyper& hyper,
                             std::int64_t step) {
  // The kernel's codes are the enum's values.
  static_assert(static_cast<int>(OptimizerKind::kSgd) == 0 &&
                static_cast<int>(OptimizerKind::kSgdMomentum) == 1 &&
                static_cast<int>(OptimizerKind::kAdam) == 2);
  OptimizerArgs args;
  args.kind = static_cast<int>(kind);
  args.lr = hyper.lr;
  args.momentum = hyper.momentum;
  args.beta1 = hyper.beta1;
  args.beta2 = hyper.beta2;
  args.eps = hyper.eps;
  args.bias1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(step));
  args.bias2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(step));
  return args;
}

Status CudaDevice::copy(StreamKind kind, float* dst, const float* src, std::int64_t n) {
  if (n > 0) {
    FSDP_CUDA_TRY(
        cudaMemcpyAsync(dst, src, float_bytes(n), cudaMemcpyDeviceToDevice, stream(kind)));
  }
  return ok_status();
}

Status CudaDevice::accumulate(StreamKind kind, float* dst, const float* src, std::int64_t n,
                              float scale, bool overwrite) {
  FSDP_CUDA_TRY(launch_accumulate(dst, src, n, scale, overwrite, stream(kind)));
  return ok_status();
}

Status CudaDevice::optimizer_update(StreamKind kind, OptimizerKind optimizer,
                                    const backend::OptimizerHyper& hyper, std::int64_t step,
                                    float* weights, const float* grads, float* state,
                                    std::int64_t n) {
  if (step < 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(name_, ": optimizer step ", step, "; expected >= 1"));
  }
  FSDP_CUDA_TRY(launch_optimizer_update(optimizer_args(optimizer, hyper, step), n, weights, grads,
                                        state, stream(kind)));
  return ok_status();
}

Status CudaDevice::transfer(StreamKind kind, void* dst, const void* src, std::int64_t n,
                            cudaMemcpyKind direction) {
  FSDP_RETURN_IF_ERROR(make_current());
  if (n > 0) {
    (void)cudaGetLastError();
    FSDP_CUDA_TRY(cudaMemcpyAsync(dst, src, float_bytes(n), direction, stream(kind)));
    FSDP_RETURN_IF_ERROR(wait_streams(1U << static_cast<unsigned>(kind),
                                      direction == cudaMemcpyHostToDevice ? "upload"
                                                                          : "download"));
  }
  return ok_status();
}

Status CudaDevice::upload(StreamKind kind, float* dst, const float* host, std::int64_t n) {
  return transfer(kind, dst, host, n, cudaMemcpyHostToDevice);
}

Status CudaDevice::download(StreamKind kind, float* host, const float* src, std::int64_t n) {
  return transfer(kind, host, src, n, cudaMemcpyDeviceToHost);
}

Expected<std::unique_ptr<backend::HostDecoder>> CudaDevice::make_decoder(
    const backend::DecoderConfig& config, std::int64_t num_microbatches, std::int64_t data_rank,
    std::int64_t data_world) {
  FSDP_RETURN_IF_ERROR(make_current());
  FSDP_TRY(std::unique_ptr<CudaDecoder> decoder,
           CudaDecoder::make(config, num_microbatches, data_rank, data_world, ordinal_,
                             stream(StreamKind::kCompute)));
  return std::unique_ptr<backend::HostDecoder>(std::move(decoder));
}

}  // namespace fsdp::cuda

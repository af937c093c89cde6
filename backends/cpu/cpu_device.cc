// SPDX-License-Identifier: Apache-2.0
// CpuDevice: one mutex guards the queues, the events and the error, so a record that sets an
// event and the wait that reads it are ordered (and so are the buffers they publish).
#include "backends/cpu/cpu_device.h"

#include <algorithm>
#include <span>
#include <utility>

#include "core/base/strings.h"

namespace fsdp::cpu {

CpuDevice::CpuDevice(std::string name)
    : name_(std::move(name)), epoch_(std::chrono::steady_clock::now()), arena_(&memory_) {
  arena_.set_clock([this](StreamKind /*stream*/) { return now_ns(); });
  for (std::size_t s = 0; s < workers_.size(); ++s) {
    workers_[s] = std::thread([this, s] { worker(s); });
  }
}

CpuDevice::~CpuDevice() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) {
    t.join();
  }
}

std::int64_t CpuDevice::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              epoch_)
      .count();
}

void CpuDevice::submit(StreamKind stream, exec::TaskTag tag, exec::Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queues_[static_cast<std::size_t>(stream)].items.push_back(Item{tag, std::move(task)});
  }
  cv_.notify_all();
}

void CpuDevice::record(StreamKind stream, std::int32_t event, exec::TaskTag tag) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event < 0 || static_cast<std::size_t>(event) >= reached_.size()) {
      poison(Error(ErrorCode::kOutOfRange,
                   str_cat(name_, ": record of event ", event, " outside [0, ", reached_.size(),
                           ")")));
      return;
    }
    recorded_issued_[static_cast<std::size_t>(event)] = 1;
  }
  submit(stream, tag, [this, event]() -> Status {
    {
      std::lock_guard<std::mutex> lock(mu_);
      reached_[static_cast<std::size_t>(event)] = 1;
    }
    cv_.notify_all();
    return ok_status();
  });
}

void CpuDevice::wait(StreamKind stream, std::int32_t event, exec::TaskTag tag) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event < 0 || static_cast<std::size_t>(event) >= reached_.size() ||
        recorded_issued_[static_cast<std::size_t>(event)] == 0) {
      poison(Error(ErrorCode::kFailedPrecondition,
                   str_cat(name_, ": wait on event ", event, " issued before its record")));
      return;
    }
  }
  submit(stream, tag, [this, event]() -> Status {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return reached_[static_cast<std::size_t>(event)] != 0 || error_; });
    return ok_status();  // a poisoned device skips the rest anyway
  });
}

Status CpuDevice::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    for (const Queue& q : queues_) {
      if (!q.items.empty() || q.busy) {
        return false;
      }
    }
    return true;
  });
  if (error_) {
    Error e = *error_;
    return e;
  }
  return ok_status();
}

void CpuDevice::reset_events(std::int32_t num_events) {
  std::lock_guard<std::mutex> lock(mu_);
  recorded_issued_.assign(static_cast<std::size_t>(num_events), 0);
  reached_.assign(static_cast<std::size_t>(num_events), 0);
}

void CpuDevice::abort(const Error& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    poison(error);
  }
  cv_.notify_all();
}

void CpuDevice::poison(const Error& error) {
  if (!error_) {
    error_ = error;
  }
}

// The data ops run on the calling thread: a task runs on its stream's worker, in stream order.
Status CpuDevice::copy(StreamKind /*stream*/, float* dst, const float* src, std::int64_t n) {
  std::copy(src, src + n, dst);
  return ok_status();
}

Status CpuDevice::accumulate(StreamKind /*stream*/, float* dst, const float* src, std::int64_t n,
                             float scale, bool overwrite) {
  if (overwrite) {
    for (std::int64_t k = 0; k < n; ++k) {
      dst[k] = scale * src[k];
    }
  } else {
    for (std::int64_t k = 0; k < n; ++k) {
      dst[k] += scale * src[k];
    }
  }
  return ok_status();
}

Status CpuDevice::optimizer_update(StreamKind /*stream*/, OptimizerKind kind,
                                   const backend::OptimizerHyper& hyper, std::int64_t step,
                                   float* weights, const float* grads, float* state,
                                   std::int64_t n) {
  const auto count = static_cast<std::size_t>(n);
  const auto states = static_cast<std::size_t>(backend::optimizer_num_states(kind));
  backend::optimizer_update(kind, hyper, step, std::span<float>(weights, count),
                            std::span<const float>(grads, count),
                            std::span<float>(state, states == 0 ? 0 : states * count));
  return ok_status();
}

Status CpuDevice::upload(StreamKind stream, float* dst, const float* host, std::int64_t n) {
  return copy(stream, dst, host, n);
}

Status CpuDevice::download(StreamKind stream, float* host, const float* src, std::int64_t n) {
  return copy(stream, host, src, n);
}

Expected<std::unique_ptr<backend::HostDecoder>> CpuDevice::make_decoder(
    const backend::DecoderConfig& config, std::int64_t num_microbatches, std::int64_t data_rank,
    std::int64_t data_world) {
  return backend::HostDecoder::make(config, num_microbatches, data_rank, data_world);
}

std::vector<exec::TaskTiming> CpuDevice::timeline() const {
  std::lock_guard<std::mutex> lock(mu_);
  return timeline_;
}

void CpuDevice::worker(std::size_t stream) {
  Queue& q = queues_[stream];
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !q.items.empty(); });
    if (q.items.empty()) {
      return;  // stop_
    }
    Item item = std::move(q.items.front());
    q.items.pop_front();
    if (error_) {
      cv_.notify_all();  // a poisoned device drains without running anything
      continue;
    }
    q.busy = true;
    lock.unlock();
    const std::int64_t start = now_ns();
    Status s = item.task();
    const std::int64_t end = now_ns();
    lock.lock();
    q.busy = false;
    timeline_.push_back(
        exec::TaskTiming{static_cast<StreamKind>(stream), item.tag, start, end});
    if (!s.ok()) {
      poison(s.error());
    }
    cv_.notify_all();
  }
}

}  // namespace fsdp::cpu

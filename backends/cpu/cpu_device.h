// SPDX-License-Identifier: Apache-2.0
// CpuDevice: the host as an exec::Device. One worker thread per stream runs that stream's tasks in
// order; events are flags under one mutex and condition variable (a record task sets its flag, a
// wait task blocks until it is set or the device is poisoned). Host memory comes from
// exec::HostMemory (the Arena's and resident buffers); the data ops are plain host loops with
// the arithmetic of backend::optimizer_update, and the decoder is backend::HostDecoder.
// Thread-safe; the destructor drains and joins.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/exec/arena.h"
#include "backends/exec/device.h"

namespace fsdp::cpu {

class CpuDevice final : public exec::Device {
 public:
  // `name` appears in messages ("rank 3").
  explicit CpuDevice(std::string name);
  ~CpuDevice() override;
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  std::string name() const override { return name_; }
  void submit(StreamKind stream, exec::TaskTag tag, exec::Task task) override;
  void record(StreamKind stream, std::int32_t event, exec::TaskTag tag) override;
  void wait(StreamKind stream, std::int32_t event, exec::TaskTag tag) override;
  Status synchronize() override;
  void reset_events(std::int32_t num_events) override;
  void abort(const Error& error) override;
  exec::Fence fence(StreamKind /*stream*/) override { return {}; }
  bool host_addressable() const override { return true; }
  exec::Arena& arena() override { return arena_; }
  exec::MemoryResource& memory() override { return memory_; }
  Status copy(StreamKind stream, float* dst, const float* src, std::int64_t n) override;
  Status accumulate(StreamKind stream, float* dst, const float* src, std::int64_t n, float scale,
                    bool overwrite) override;
  Status optimizer_update(StreamKind stream, OptimizerKind kind,
                          const backend::OptimizerHyper& hyper, std::int64_t step, float* weights,
                          const float* grads, float* state, std::int64_t n) override;
  Status upload(StreamKind stream, float* dst, const float* host, std::int64_t n) override;
  Status download(StreamKind stream, float* host, const float* src, std::int64_t n) override;
  Expected<std::unique_ptr<backend::HostDecoder>> make_decoder(
      const backend::DecoderConfig& config, std::int64_t num_microbatches,
      std::int64_t data_rank, std::int64_t data_world) override;
  std::int64_t now_ns() const override;
  std::vector<exec::TaskTiming> timeline() const override;

 private:
  struct Item {
    exec::TaskTag tag;
    exec::Task task;
  };
  struct Queue {
    std::deque<Item> items;
    bool busy = false;
  };
  void worker(std::size_t stream);
  void poison(const Error& error);  // mu_ held

  std::string name_;
  std::chrono::steady_clock::time_point epoch_;
  exec::HostMemory memory_;
  exec::Arena arena_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // queues, events, idleness and poisoning
  std::array<Queue, kNumStreams> queues_;
  std::vector<char> recorded_issued_;  // host side: record() issued for the event
  std::vector<char> reached_;          // a record task ran
  std::optional<Error> error_;
  bool stop_ = false;
  std::vector<exec::TaskTiming> timeline_;
  std::array<std::thread, kNumStreams> workers_;
};

}  // namespace fsdp::cpu

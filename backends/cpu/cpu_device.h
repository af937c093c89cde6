// SPDX-License-Identifier: Apache-2.0
// CpuDevice: the host as an exec::Device. One worker thread per stream runs that stream's tasks in
// order; events are flags under one mutex and condition variable (a record task sets its flag, a
// wait task blocks until it is set or the device is poisoned). Host memory comes from
// exec::HostMemory through the device's Arena. Thread-safe; the destructor drains and joins.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
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
  exec::Arena& arena() override { return arena_; }
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

// SPDX-License-Identifier: Apache-2.0
// Device: the executor's view of one rank's hardware: kNumStreams in-order streams, events that
// order them, an Arena for transient buffers and a clock. The executor issues every op of the
// schedule IR in program order through submit/record/wait, exactly as a CUDA host thread would.
// No vendor types appear here: the CPU device runs tasks on one worker thread per stream; the CUDA
// device runs each task on the host at submit time, enqueuing asynchronous work on the stream's
// cudaStream_t (so a task may only enqueue, never wait for, device work, except the blocking
// upload/download below). The executor never dereferences buffer memory: every float* it holds
// is device memory (an Arena block or a ResidentBuffer) that only the data ops below touch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/exec/arena.h"
#include "backends/model/decoder.h"
#include "core/base/expected.h"
#include "core/policy/optimizer_policy.h"
#include "core/schedule/op.h"

namespace fsdp::exec {

// The work of one op on one stream. An error poisons the device: later tasks on every stream are
// skipped, waits return, and synchronize() reports the first error.
using Task = std::function<Status()>;

// What a task stands for, for the timeline (step and op index of the IR; -1 for extra work).
struct TaskTag {
  std::int64_t step = -1;
  std::int32_t op = -1;
};

// One task as it ran: its stream, tag and start/end on the device clock.
struct TaskTiming {
  StreamKind stream = StreamKind::kCompute;
  TaskTag tag;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;

  // Enqueues `task` on `stream` after everything enqueued there before.
  virtual void submit(StreamKind stream, TaskTag tag, Task task) = 0;
  // Event ids are [0, num_events) between two reset_events calls; each is recorded once.
  // record: the event is reached once every task enqueued on `stream` before it has finished.
  virtual void record(StreamKind stream, std::int32_t event, TaskTag tag) = 0;
  // wait: later tasks on `stream` start only after `event` is reached. A wait issued before its
  // record is an error (the IR issues records first).
  virtual void wait(StreamKind stream, std::int32_t event, TaskTag tag) = 0;
  // Blocks until every stream has drained; returns the first task error since the last call
  // (a device that saw an error stays poisoned).
  virtual Status synchronize() = 0;
  // Forgets every event and sets the id range; only when the streams are idle.
  virtual void reset_events(std::int32_t num_events) = 0;
  // Poisons the device from outside (e.g. a collective of another rank failed): running waits
  // return and later tasks are skipped; synchronize() returns `error`.
  virtual void abort(const Error& error) = 0;

  // A fence that completes once everything enqueued on `stream` so far has finished; called by
  // a task to release a buffer (the CPU device returns an empty, complete fence because its tasks
  // run in stream order; a CUDA device records an event).
  virtual Fence fence(StreamKind stream) = 0;

  // Whether the host may read buffer memory directly (the CPU device: yes; a GPU: no). An
  // ExecutorOptions::on_collective observer needs it.
  virtual bool host_addressable() const = 0;

  virtual Arena& arena() = 0;
  // The raw memory behind the arena, for resident buffers (exec::ResidentBuffer).
  virtual MemoryResource& memory() = 0;

  // --- data ops --------------------------------------------------------------------------------
  // Called from inside a task of `stream` (or, for upload/download, from the issuing thread while
  // the streams are idle). Pointers are this device's memory; n >= 0 elements of fp32. Each op is
  // ordered after the work enqueued on `stream` before it; errors are the vendor's (kInternal).
  // dst[i] = src[i].
  virtual Status copy(StreamKind stream, float* dst, const float* src, std::int64_t n) = 0;
  // The FSDP gradient accumulation, in fp32 with no fused multiply-add:
  // dst[i] = scale * src[i] when overwrite, else dst[i] += scale * src[i].
  virtual Status accumulate(StreamKind stream, float* dst, const float* src, std::int64_t n,
                            float scale, bool overwrite) = 0;
  // backend::optimizer_update on n weights: `state` holds num_states x n values; `step` >= 1.
  virtual Status optimizer_update(StreamKind stream, OptimizerKind kind,
                                  const backend::OptimizerHyper& hyper, std::int64_t step,
                                  float* weights, const float* grads, float* state,
                                  std::int64_t n) = 0;
  // Host <-> device copies that return once the copy is done (stream-ordered).
  virtual Status upload(StreamKind stream, float* dst, const float* host, std::int64_t n) = 0;
  virtual Status download(StreamKind stream, float* host, const float* src, std::int64_t n) = 0;

  // The decoder kernels for this device (params and grads passed to it are this device's memory),
  // issuing on the compute stream. Errors: backend::HostDecoder::make's; the vendor's.
  virtual Expected<std::unique_ptr<backend::HostDecoder>> make_decoder(
      const backend::DecoderConfig& config, std::int64_t num_microbatches,
      std::int64_t data_rank, std::int64_t data_world) = 0;

  // Monotonic nanoseconds since the device was made.
  virtual std::int64_t now_ns() const = 0;
  // Every task that ran, per stream in execution order (records and waits included).
  virtual std::vector<TaskTiming> timeline() const = 0;
};

}  // namespace fsdp::exec

// SPDX-License-Identifier: Apache-2.0
// Device: the executor's view of one rank's hardware: kNumStreams in-order streams, events that
// order them, an Arena for transient buffers and a clock. The executor issues every op of the
// schedule IR in program order through submit/record/wait, exactly as a CUDA host thread would.
// No vendor types appear here: the CPU device runs tasks on one worker thread per stream; a CUDA
// device would run each task on the host at submit time, enqueuing asynchronous work on the
// stream's cudaStream_t (so a task may only enqueue, never wait for, device work).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/exec/arena.h"
#include "core/base/expected.h"
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

  virtual Arena& arena() = 0;
  // Monotonic nanoseconds since the device was made.
  virtual std::int64_t now_ns() const = 0;
  // Every task that ran, per stream in execution order (records and waits included).
  virtual std::vector<TaskTiming> timeline() const = 0;
};

}  // namespace fsdp::exec

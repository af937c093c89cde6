// SPDX-License-Identifier: Apache-2.0
// Internal to sim/engine. EventLoop: the discrete-event loop over a compiled StreamProgram
// (docs/design/simulator.md, "Engine"). Per class each stream issues its steps until it blocks
// (alloc/free/record/wait at an instant, compute busy for its duration, a collective waiting for
// every class of its group type); events carry indices only and dispatch is one switch. The loop
// and everything it runs per event live in one translation unit (event_loop.cc, with the inline
// headers link_sharing.h and statistics.h), so nothing per event is a call across TUs.
#pragma once

#include <memory>

#include "core/base/expected.h"
#include "core/schedule/schedule.h"
#include "sim/engine/internal/program.h"
#include "sim/engine/rank_classes.h"
#include "sim/engine/sim_result.h"
#include "sim/engine/simulator.h"

namespace fsdp::sim::internal {

class EventLoop {
 public:
  // Owns `program`, compiled from `schedule` for `options` and `classes`; references those three,
  // which must outlive it.
  EventLoop(const Schedule& schedule, const SimOptions& options, const SimClasses& classes,
            StreamProgram program);
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  ~EventLoop();

  // One step from the compiled state (resident buffers allocated). Repeatable: every run returns
  // the same result. Errors: deadlocks, buffers allocated twice or freed while not allocated.
  Expected<SimResult> run();

 private:
  struct State;  // the loop's state (event_loop.cc)
  std::unique_ptr<State> state_;
};

}  // namespace fsdp::sim::internal

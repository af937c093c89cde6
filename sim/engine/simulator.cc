// SPDX-License-Identifier: Apache-2.0
// The public entry points (simulator.h): prepare_simulation builds the rank classes (refined by
// stragglers), compiles the schedule for them (program.cc) and sets up an event loop over the
// result (event_loop.cc), plus a second one without stragglers for the baseline step time;
// PreparedSimulation::run runs them; simulate is both.
#include "sim/engine/simulator.h"

#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "core/base/check.h"
#include "sim/engine/internal/event_loop.h"
#include "sim/engine/internal/program.h"
#include "sim/engine/rank_classes.h"

namespace fsdp::sim {
namespace {

// One simulation of the schedule's classes refined by `straggler` flags (empty: none). Holds the
// classes and options that the event loop references, at a stable address.
struct ClassSimulation {
  ClassSimulation(SimOptions opts, SimClasses cls)
      : options(std::move(opts)), classes(std::move(cls)) {}
  SimOptions options;
  SimClasses classes;
  std::optional<internal::EventLoop> loop;
};

Expected<std::unique_ptr<ClassSimulation>> prepare_classes(const Schedule& schedule,
                                                           const Hardware& hardware,
                                                           const SimOptions& options,
                                                           std::span<const char> straggler) {
  FSDP_TRY(SimClasses classes,
           make_sim_classes(schedule.mesh(), schedule.rank_class(),
                            static_cast<std::int32_t>(schedule.programs().size()), straggler));
  auto sim = std::make_unique<ClassSimulation>(options, std::move(classes));
  FSDP_TRY(internal::StreamProgram program,
           internal::compile_program(schedule, hardware, sim->options, sim->classes));
  sim->loop.emplace(schedule, sim->options, sim->classes, std::move(program));
  return sim;
}

}  // namespace

// With stragglers, `baseline` is the same schedule without them (step time only).
struct PreparedSimulation::Impl {
  std::unique_ptr<ClassSimulation> main;
  std::unique_ptr<ClassSimulation> baseline;
};

PreparedSimulation::PreparedSimulation(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreparedSimulation::PreparedSimulation(PreparedSimulation&&) noexcept = default;
PreparedSimulation& PreparedSimulation::operator=(PreparedSimulation&&) noexcept = default;
PreparedSimulation::~PreparedSimulation() = default;

Expected<SimResult> PreparedSimulation::run() {
  FSDP_CHECK(impl_ != nullptr) << "run() on a moved-from PreparedSimulation";
  FSDP_TRY(SimResult result, impl_->main->loop->run());
  if (impl_->baseline) {
    FSDP_TRY(SimResult baseline, impl_->baseline->loop->run());
    result.baseline_step_time = baseline.step_time;
  }
  return result;
}

Expected<PreparedSimulation> prepare_simulation(const Schedule& schedule, const Hardware& hardware,
                                                const SimOptions& options) {
  auto impl = std::make_unique<PreparedSimulation::Impl>();
  if (!options.straggler.active()) {
    FSDP_TRY(impl->main, prepare_classes(schedule, hardware, options, {}));
    return PreparedSimulation(std::move(impl));
  }
  FSDP_TRY(std::vector<char> flags,
           straggler_flags(options.straggler, schedule.mesh().size()));
  FSDP_TRY(impl->main, prepare_classes(schedule, hardware, options, flags));
  SimOptions baseline_options = options;
  baseline_options.straggler = Straggler();
  baseline_options.record_trace = false;
  baseline_options.record_ops = false;
  FSDP_TRY(impl->baseline, prepare_classes(schedule, hardware, baseline_options, {}));
  return PreparedSimulation(std::move(impl));
}

Expected<SimResult> simulate(const Schedule& schedule, const Hardware& hardware,
                             const SimOptions& options) {
  FSDP_TRY(PreparedSimulation prepared, prepare_simulation(schedule, hardware, options));
  return prepared.run();
}

}  // namespace fsdp::sim

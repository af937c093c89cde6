// SPDX-License-Identifier: Apache-2.0
// Executor: runs one rank's RankProgram of a verified Schedule for real, op for op in program
// order, and nothing else: every buffer an op touches is one of its operands (transient buffers
// in the device's Arena with the IR's byte counts, resident buffers as the IR lists them), every
// range a collective moves comes from the schedule's geometry (core/schedule/group_geometry.h),
// forward/backward/recompute run through a HostDecoder, gradients are accumulated with the
// schedule's gradient scale (grad_scale / |dp mesh|, the FSDP averaging rule), and the optimizer
// updates the sharded fp32 main weights. Real training needs fp32 compute, main params and grads.
// One executor per rank; not thread-safe (one host thread issues).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backends/exec/communicator.h"
#include "backends/exec/device.h"
#include "backends/exec/executor_state.h"
#include "backends/model/decoder.h"
#include "core/base/expected.h"
#include "core/layout/global_layout.h"
#include "core/policy/optimizer_policy.h"
#include "core/schedule/schedule.h"

namespace fsdp::exec {

// One executed op of the IR with its measured interval (device clock), for the comparison with
// the simulator (docs/design/fidelity.md): collectives carry the bytes this rank moved
// (Op::bytes).
struct OpTiming {
  std::int64_t step = 0;
  std::int32_t op = 0;  // index into the rank's RankProgram::ops
  StreamKind stream = StreamKind::kCompute;
  OpKind kind = OpKind::kRecord;
  std::int64_t bytes = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

// One collective of the IR as this rank completed it (ExecutorOptions::on_collective), for
// checks on real data. `in` and `out` are ranges of the group's GlobalLayout (Schedule::
// collectives()[collective] names the unit, group and leg); `input` and `output` hold the values
// of those elements. An all-reduce works in place: `input` is then empty and `output` holds the
// result. A reduce-scatter before the last of a multi-axis grad_reduce leg works in place in the
// partial buffer (its output overwrites part of its input): `input` is then a copy the executor
// took before the collective. A reduce-scatter with an accumulator operand (the last step of a
// grad_reduce leg) also shows the accumulator over `out` after the executor added the schedule's
// gradient scale times the output to it (`overwrote`: it was set, not added to; then `output` may
// alias it). The spans point into the device's memory (host memory on the CPU device) and are valid
// only during the call.
struct CollectiveObservation {
  std::int64_t rank = 0;
  std::int64_t step = 0;
  std::int32_t op = 0;          // index into the rank's RankProgram::ops
  std::int32_t collective = 0;  // index into Schedule::collectives()
  OpKind kind = OpKind::kAllGather;
  std::int64_t axis_rank = 0;   // this rank's index among the members of the collective's axis
  Range in;
  Range out;
  std::span<const float> input;
  std::span<const float> output;
  std::span<const float> accumulator;
  bool overwrote = false;
};

struct ExecutorOptions {
  OptimizerKind optimizer = OptimizerKind::kAdam;
  backend::OptimizerHyper hyper;
  // Called on the collective's stream worker (in stream order, possibly concurrently with other
  // streams) once its data is complete; empty = no observer.
  std::function<void(const CollectiveObservation&)> on_collective;
};

class Executor {
 public:
  // Checks what this executor implements before touching the device: the rank is in the mesh
  // and the communicators match it; every group is fp32 (compute, main params, grads, main
  // grads: "real training needs fp32 ...; got ..."); each redistribute leg has a shape the
  // executor implements; every collective names its geometry; initial values have the layouts'
  // tensor sizes ([unit][param] in Model order); an on_collective observer only on a device
  // whose memory the host can read (Device::host_addressable: the observation's spans point into
  // it). The schedule itself is trusted (it is verified).
  // Then allocates the schedule's resident buffers (main weights from `initial`).
  static Expected<std::unique_ptr<Executor>> make(const Schedule& schedule, std::int64_t rank,
                                                  const backend::ParamValues& initial,
                                                  backend::HostDecoder* decoder, Device* device,
                                                  CommunicatorSet* comms,
                                                  ExecutorOptions options);
  virtual ~Executor() = default;

  // Issues step `step` (0-based) and waits for it. On error the communicators are aborted so
  // peers stop too; the executor is then unusable.
  virtual Status run_step(std::int64_t step) = 0;
  // The mean over ranks and microbatches of the local losses of the last step.
  virtual double last_loss() const = 0;
  // Every parameter's current value, gathered from the shards of the main weights (a collective:
  // every rank must call it). [unit][param] in Model order.
  virtual Expected<backend::ParamValues> gather_parameters() = 0;
  // The ops executed so far, in execution order per stream (records and waits included).
  virtual std::vector<OpTiming> op_timeline() const = 0;

  // --- checkpoints (docs/design/backends.md, "Checkpoints"); only while the streams are idle,
  // after make or between run_step calls ---
  // Optimizer steps completed: 0 after make, step + 1 after a successful run_step(step), or what
  // import_state set. run_step(step) uses Adam step count step + 1, so a resumed run continues
  // with run_step(steps_done()).
  virtual std::int64_t steps_done() const = 0;
  // The optimizer state values per weight (0 SGD, 1 SGD momentum, 2 Adam).
  virtual std::int64_t num_states() const = 0;
  // Every tensor slice this rank holds under the optimizer extent (replicas included), groups in
  // order, tensors in layout order; empty slices left out.
  virtual std::vector<TensorSlice> local_slices() const = 0;
  // The main weights and optimizer states of the slices this rank owns: the parts of
  // local_slices() that no lower rank also holds (with replicated optimizer placements, HSDP,
  // no-shard, only the lowest rank holding a range exports it), so the union over ranks holds
  // every element of every tensor exactly once. Errors: the device's.
  virtual Expected<ExecutorState> export_state() = 0;
  // Writes `state` into this rank's main weights and optimizer states: every element of every
  // local slice must be covered by state.shards (which may hold more, and other tensors); layout
  // padding is zeroed, as make() leaves it. Sets steps_done(). Errors (kInvalidArgument, one line
  // naming the tensor by unit name and parameter index): num_states differs from the
  // optimizer's, a shard names no tensor or lies outside it, its value counts do not match its
  // range, an element not covered; the device's.
  virtual Status import_state(const ExecutorState& state) = 0;
  // The sum over every rank of the mesh of `value` (a collective, and so a barrier: every rank
  // must call it). fp32 arithmetic: exact for small integers. Errors: the communicators'.
  virtual Expected<double> sum_over_ranks(double value) = 0;
  // The members' `values` on mesh axis `mesh_axis`, concatenated in axis order (a collective:
  // every member calls it with as many values; only while the streams are idle). Errors: an axis
  // outside the mesh; the device's and the communicators'.
  virtual Expected<std::vector<float>> gather_over_axis(std::int64_t mesh_axis,
                                                        std::span<const float> values) = 0;
};

}  // namespace fsdp::exec

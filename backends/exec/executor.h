// SPDX-License-Identifier: Apache-2.0
// Executor: runs one rank's RankProgram of the schedule IR for real, op for op in program order
// (never a re-derived schedule): allocs and frees in the device's Arena with the IR's byte counts,
// records and waits, all-gathers of weight shards found at their GlobalLayout offsets (the
// core/schedule/shard_plan.h of the builder), forward/backward/recompute through a HostDecoder,
// grad copies, reduce-scatters and finalising all-reduces with the FSDP averaging rule
//   final grad = grad_scale / |dp mesh| * sum over ranks and microbatches of the local grads,
// the optimizer update on the sharded fp32 main weights. Real training needs fp32 compute, main
// params and grads. One executor per rank; not thread-safe (one host thread issues).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backends/exec/communicator.h"
#include "backends/exec/device.h"
#include "backends/model/decoder.h"
#include "core/base/expected.h"
#include "core/layout/global_layout.h"
#include "core/model/model.h"
#include "core/policy/fsdp_config.h"
#include "core/schedule/schedule.h"

namespace fsdp::exec {

// One executed op of the IR with its measured interval (device clock), for the comparison with
// the simulator (issue 7): collectives carry the bytes this rank moved (Op::bytes).
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
// result. A gradient reduce-scatter (leg grad_reduce) also shows the main-grad accumulator over
// `out` after the executor added grad_scale / |dp| times the output to it (`overwrote`: it was set,
// not added to; then `output` may alias it). The spans point into the device's memory (host
// memory on the CPU device) and are valid only during the call.
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
  // Checks everything before touching the device: the rank is in the mesh; every group is fp32
  // (compute, main params, grads, main grads: "real training needs fp32 ...; got ..."); each
  // redistribute leg has the shape this executor implements; the collectives table matches the
  // shard plan; initial values have the model's shapes. Then allocates the resident buffers
  // (main weights from `initial`, main grads, optimizer state) on the host.
  static Expected<std::unique_ptr<Executor>> make(const Model& model, const FsdpConfig& config,
                                                  const Schedule& schedule, std::int64_t rank,
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
};

}  // namespace fsdp::exec

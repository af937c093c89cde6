// SPDX-License-Identifier: Apache-2.0
// Training the decoder model (backends/model/decoder.h) with the executor: a TrainSpec names the
// model size, mesh, strategy, layout, microbatches, prefetch, optimizer and grad_scale;
// prepare_training validates all of it and builds the Model, FsdpConfig and Schedule before any
// device memory exists; train_rank runs one rank's steps on a Device with its communicators.
// Comparison helpers measure sharded against unsharded results (relative error).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/exec/checkpoint.h"
#include "backends/exec/communicator.h"
#include "backends/exec/device.h"
#include "backends/exec/executor.h"
#include "backends/model/decoder.h"
#include "core/base/expected.h"
#include "core/base/limits.h"
#include "core/mesh/device_mesh.h"
#include "core/mesh/strategy.h"
#include "core/model/model.h"
#include "core/policy/config_options.h"
#include "core/policy/fsdp_config.h"
#include "core/policy/recompute_policy.h"
#include "core/schedule/schedule.h"

namespace fsdp::exec {

struct TrainSpec {
  // Its tp and ep must be the mesh's tp and ep axis sizes (tensor_parallel_size,
  // expert_parallel_size); train_rank sets tp_rank and ep_rank.
  backend::DecoderConfig model;
  DeviceMesh mesh = one_axis_mesh(4);  // dp=4
  Strategy strategy = Strategy::kZero3;
  ShardLayout shard_layout = ShardLayout::kPadded;
  bool tensor_atomic = false;
  std::int64_t block_size = 1;
  std::int64_t microbatches = 1;
  SchedulePolicy schedule;
  // Which units recompute in backward (RecomputePolicy: none, full or full-all-units; the
  // decoder recomputes whole units only).
  RecomputePolicy recompute;
  DType main_params = DType::kFp32;  // real training needs fp32 (the executor says so otherwise)
  DType compute = DType::kFp32;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  backend::OptimizerHyper hyper;
  double grad_scale = 1.0;
  std::int64_t steps = 20;  // total: a run resumed at step N runs steps - N more
  double timeout_s = 60.0;  // per collective
  CheckpointOptions checkpoint;
};

// The ranges prepare_training accepts besides kMaxTimeoutSeconds (core/base/limits.h, issue 16):
// a learning rate or gradient scale beyond these trains infinities.
inline constexpr double kMaxLearningRate = 1e3;
inline constexpr double kMaxGradScale = 1e6;

// Everything derived from a TrainSpec that every rank shares.
struct TrainSetup {
  Model model;
  FsdpConfig config;
  Schedule schedule;
  backend::ParamValues initial;
};

// The spec's configuration as typed options for assemble_config (the mixed-precision and
// optimizer policies of its dtypes and optimizer kind; fp32 optimizer state). Errors: those
// policies' (e.g. fp8 main params).
Expected<ConfigOptions> config_options_of(const TrainSpec& spec);

// Errors (one line each): steps < 1; a timeout outside (0, kMaxTimeoutSeconds]; a learning rate
// or grad scale not in (0, kMaxLearningRate] / (0, kMaxGradScale], momentum or betas outside
// [0, 1), eps not positive and finite; the decoder config; config_options_of's;
// assemble_config's (the strategy on the mesh, the FsdpConfig checks); the schedule (a layout
// that rejects a shape stops here, before anything is allocated).
Expected<TrainSetup> prepare_training(const TrainSpec& spec);
// The same without the initial parameter values (`initial` empty): what a prediction of the
// configuration needs (its model, config and schedule), without generating every weight.
Expected<TrainSetup> prepare_plan(const TrainSpec& spec);

struct RankResult {
  std::int64_t rank = 0;
  std::int64_t first_step = 0;         // 0, or the step a resumed run continued at
  std::vector<double> losses;          // per step run, mean over ranks and microbatches
  backend::ParamValues final_params;   // gathered after the last step
  std::vector<OpTiming> timeline;
  std::vector<ArenaRecord> arena_log;
  std::array<std::int64_t, kNumBufferClasses> high_water{};
};

// What one rank of a run trains. Without a tp axis: spec.model, data rank = rank of the mesh's
// size, and `initial` empty (the setup's values are the rank's). With one (docs/design/
// parallelism.md, "Training it for real"): the model's tp_rank is the rank's tp coordinate, the
// data rank its place among the DP ranks (the mesh without tp, row-major; a tp group shares its
// samples), and `initial` its slice of setup.initial (when the setup has values). With an ep axis:
// the model's ep_rank is the rank's ep coordinate, the data rank the rank itself (ep is a DP axis
// of the dense parameters), and `initial` its experts beside the whole dense tensors.
struct RankModel {
  backend::DecoderConfig config;
  std::int64_t data_rank = 0;
  std::int64_t data_world = 1;
  bool split = false;
  backend::ParamValues initial;
};
Expected<RankModel> rank_model(const TrainSetup& setup, const TrainSpec& spec, std::int64_t rank);

// What the checkpoints of a run record and are checked against (checkpoint.h).
CheckpointContext checkpoint_context(const TrainSetup& setup, const TrainSpec& spec);

// Runs steps [first, spec.steps) of `rank` and gathers the final parameters: first is 0, or with
// spec.checkpoint.resume_from the checkpoint's step (load_checkpoint, resharded to this run's
// layout). With spec.checkpoint.save_dir it saves after every save_every steps and after the last
// one (save_checkpoint). on_step(step, loss) is called after each step (may be empty). Errors:
// the executor's, prefixed with the rank; the checkpoint's; a checkpoint past spec.steps.
// Sets `decoder`'s per-unit recomputation to the units the setup's recompute policy checkpoints
// (checkpoints_of over setup.model): under full the transformer blocks, under full-all-units
// every unit, the embedding and head included.
void set_decoder_recompute(const TrainSetup& setup, backend::HostDecoder& decoder);

Expected<RankResult> train_rank(const TrainSetup& setup, const TrainSpec& spec, std::int64_t rank,
                                Device& device, CommunicatorSet& comms,
                                const std::function<void(std::int64_t, double)>& on_step);

// One rank's device and communicators for run_rank_threads. The device is destroyed first (its
// stream workers may still be inside a collective; a CUDA device drains its streams under its
// timeout, aborting the communicators when they stall), then the communicators, which therefore
// must not use the device in their destructors (NcclCommunicator keeps only the GPU ordinal).
struct RankEnv {
  std::unique_ptr<CommunicatorSet> comms;
  std::unique_ptr<Device> device;
};
// Makes rank r's environment on the rank's own thread; on error it should abort the world it
// belongs to, so the peers stop instead of waiting for the timeout.
using RankEnvFactory = std::function<Expected<RankEnv>(std::int64_t rank)>;

// Every rank of the setup's mesh as a thread of this process, each training with train_rank on
// the environment `make_env` gives it (the CPU and CUDA in-process backends differ only there).
// Ranks with skip_rank(r) true never start (fault injection for tests) and get an error saying
// so. on_step is called by rank 0 only. Returns every rank's outcome in rank order.
std::vector<Expected<RankResult>> run_rank_threads(
    const TrainSetup& setup, const TrainSpec& spec, const RankEnvFactory& make_env,
    const std::function<bool(std::int64_t)>& skip_rank,
    const std::function<void(std::int64_t, double)>& on_step);

// The results of every rank, or first_failure's error.
Expected<std::vector<RankResult>> collect_ranks(std::vector<Expected<RankResult>> outcomes);

// The error to report for a failed world: the first rank's that is not kUnavailable (a rank that
// only heard of a peer's failure, e.g. "1 other rank(s) failed to load ..." from a checkpoint,
// or was aborted), else the first rank's. Null when every rank succeeded.
const Error* first_failure(const std::vector<Expected<RankResult>>& outcomes);

// max |a - b| / max(max |b|, tiny) over everything: losses, and every parameter of every unit.
// Infinity when the sizes differ or any value on either side is not finite.
double max_relative_error(const std::vector<double>& a, const std::vector<double>& b);
double max_relative_error(const backend::ParamValues& a, const backend::ParamValues& b);

// The unsharded reference for a spec: backend::train_unsharded with the spec's whole model
// (tp = ep = 1), optimizer, steps, microbatches, DP size (the mesh's size over its tp) and
// grad_scale.
Expected<backend::TrainResult> train_reference(const TrainSpec& spec);

// The size of the mesh's tp axis (kTensorParallelAxis), 1 without one.
std::int64_t tensor_parallel_size(const DeviceMesh& mesh);
// The size of the mesh's ep axis (kExpertParallelAxis), 1 without one.
std::int64_t expert_parallel_size(const DeviceMesh& mesh);

}  // namespace fsdp::exec

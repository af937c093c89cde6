// SPDX-License-Identifier: Apache-2.0
// prepare_training / train_rank: the glue between a TrainSpec, the core types and the executor.
#include "backends/exec/trainer.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "core/base/strings.h"
#include "core/mesh/placements.h"
#include "core/schedule/schedule_builder.h"

namespace fsdp::exec {

Expected<ConfigOptions> config_options_of(const TrainSpec& spec) {
  FSDP_TRY(MixedPrecisionPolicy mixed_precision,
           MixedPrecisionPolicy::make(spec.main_params, std::nullopt, spec.compute));
  FSDP_TRY(OptimizerPolicy optimizer, OptimizerPolicy::make(spec.optimizer, DType::kFp32));
  return ConfigOptions{.mesh = spec.mesh,
                       .strategy = spec.strategy,
                       .tensor_atomic = spec.tensor_atomic,
                       .shard_layout = spec.shard_layout,
                       .block_size = spec.block_size,
                       .microbatches = spec.microbatches,
                       .grad_scale = spec.grad_scale,
                       .recompute = spec.recompute,
                       .mixed_precision = std::move(mixed_precision),
                       .optimizer = std::move(optimizer),
                       .schedule = spec.schedule};
}

namespace {

// The whole model's parameters from this rank's tp or ep slices (`local`, gathered over the DP
// axes) and its group's: every member's values are gathered over the split's axis and joined.
Expected<backend::ParamValues> join_over_split(const backend::DecoderConfig& model,
                                               std::int64_t axis, const backend::ParamValues& local,
                                               Executor& executor) {
  std::vector<float> flat;
  for (const auto& unit : local) {
    for (const auto& param : unit) {
      flat.insert(flat.end(), param.begin(), param.end());
    }
  }
  FSDP_TRY(const std::vector<float> all, executor.gather_over_axis(axis, flat));
  std::vector<backend::ParamValues> slices(static_cast<std::size_t>(model.tp * model.ep), local);
  for (std::size_t r = 0; r < slices.size(); ++r) {
    std::size_t at = r * flat.size();
    for (auto& unit : slices[r]) {
      for (auto& param : unit) {
        std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(at), param.size(), param.begin());
        at += param.size();
      }
    }
  }
  return backend::join_parameters(model, slices);
}

}  // namespace

Expected<TrainSetup> prepare_training(const TrainSpec& spec) {
  FSDP_TRY(TrainSetup setup, prepare_plan(spec));
  setup.initial = backend::initial_parameters(spec.model);
  return setup;
}

Expected<TrainSetup> prepare_plan(const TrainSpec& spec) {
  if (spec.steps < 1) {
    return Error(ErrorCode::kInvalidArgument, str_cat("steps is ", spec.steps, "; expected >= 1"));
  }
  if (spec.checkpoint.save_every < 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("save every is ", spec.checkpoint.save_every, " steps; expected >= 0"));
  }
  if (!(spec.timeout_s > 0.0 && spec.timeout_s <= kMaxTimeoutSeconds)) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("timeout is ", spec.timeout_s, " s; expected a value in (0, ",
                         kMaxTimeoutSeconds, "]"));
  }
  // Non-finite or huge hyper-parameters train NaNs (issue 16); the ranges keep every update
  // finite in fp32 for finite gradients of the decoder.
  const auto out_of_range = [](std::string_view name, double v, double lo, double hi) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(name, " is ", v, "; expected a finite value in (", lo, ", ", hi, "]"));
  };
  if (!(spec.hyper.lr > 0.0 && spec.hyper.lr <= kMaxLearningRate)) {
    return out_of_range("learning rate", spec.hyper.lr, 0.0, kMaxLearningRate);
  }
  if (!(spec.grad_scale > 0.0 && spec.grad_scale <= kMaxGradScale)) {
    return out_of_range("grad scale", spec.grad_scale, 0.0, kMaxGradScale);
  }
  for (const auto& [name, v] : {std::pair<std::string_view, double>{"momentum", spec.hyper.momentum},
                                {"beta1", spec.hyper.beta1},
                                {"beta2", spec.hyper.beta2}}) {
    if (!(v >= 0.0 && v < 1.0)) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(name, " is ", v, "; expected a value in [0, 1)"));
    }
  }
  if (!(spec.hyper.eps > 0.0 && std::isfinite(spec.hyper.eps))) {
    return out_of_range("eps", spec.hyper.eps, 0.0, 1.0);
  }
  FSDP_RETURN_IF_ERROR(backend::validate(spec.model));
  FSDP_TRY(Model model, backend::decoder_model(spec.model));
  FSDP_TRY(const ConfigOptions options, config_options_of(spec));
  const std::int64_t tp = tensor_parallel_size(options.mesh);
  const std::int64_t ep = expert_parallel_size(options.mesh);
  const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> splits[] = {
      {"tp", {spec.model.tp, tp}}, {"ep", {spec.model.ep, ep}}};
  for (const auto& [axis, sizes] : splits) {
    if (sizes.first != sizes.second) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("the model is split for ", axis, "=", sizes.first, " but the mesh ",
                           to_string(options.mesh), " has ", axis, "=", sizes.second,
                           " (expected the decoder config's ", axis, " to be the mesh's ", axis,
                           " axis size)"));
    }
  }
  if ((tp > 1 || ep > 1) &&
      (!spec.checkpoint.save_dir.empty() || !spec.checkpoint.resume_from.empty())) {
    return Error(
        ErrorCode::kFailedPrecondition,
        str_cat("checkpoints of a tensor- or expert-parallel run (mesh ", to_string(options.mesh),
                ") are not implemented: expected no --save / --resume with a tp or ep "
                "axis"));
  }
  FSDP_TRY(FsdpConfig config, assemble_config(options));
  Workload workload;
  workload.seq_len = spec.model.seq_len;
  workload.micro_batch_size = spec.model.micro_batch_size;
  FSDP_TRY(Schedule schedule, build_schedule(model, config, workload));
  return TrainSetup{std::move(model), std::move(config), std::move(schedule), {}};
}

Expected<RankModel> rank_model(const TrainSetup& setup, const TrainSpec& spec, std::int64_t rank) {
  const DeviceMesh& mesh = setup.config.mesh();
  FSDP_TRY(const MeshCoordinate coord, mesh.coordinate(rank));
  RankModel out;
  out.config = spec.model;
  out.data_rank = rank;
  out.data_world = mesh.size();
  if (const std::optional<std::int64_t> ep_axis = mesh.axis_index(kExpertParallelAxis);
      ep_axis && mesh.axis_size(*ep_axis) > 1) {
    // Expert parallelism: every rank is a data rank (ep is a DP axis of the dense parameters)
    // and holds the experts of its ep coordinate (docs/design/parallelism.md, "Experts for
    // real").
    out.split = true;
    out.config.ep_rank = coord.local_ranks[static_cast<std::size_t>(*ep_axis)];
    if (!setup.initial.empty()) {
      out.initial = backend::split_parameters(out.config, setup.initial);
    }
    return out;
  }
  const std::optional<std::int64_t> tp_axis = mesh.axis_index(kTensorParallelAxis);
  if (!tp_axis || mesh.axis_size(*tp_axis) == 1) {
    return out;
  }
  // Ranks of one tensor-parallel group train on the same samples: the data rank is the rank's
  // place among the DP ranks (the mesh without its tp axis), and each rank holds slice tp_rank
  // of the split tensors (docs/design/parallelism.md, "Training it for real").
  out.split = true;
  out.config.tp_rank = coord.local_ranks[static_cast<std::size_t>(*tp_axis)];
  out.data_world = mesh.size() / mesh.axis_size(*tp_axis);
  out.data_rank = 0;
  for (std::int64_t a = 0; a < mesh.ndim(); ++a) {
    if (a != *tp_axis) {
      out.data_rank =
          out.data_rank * mesh.axis_size(a) + coord.local_ranks[static_cast<std::size_t>(a)];
    }
  }
  if (!setup.initial.empty()) {
    out.initial = backend::split_parameters(out.config, setup.initial);
  }
  return out;
}

void set_decoder_recompute(const TrainSetup& setup, backend::HostDecoder& decoder) {
  // The units the schedule gives a recompute op: the decoder drops their intermediates after the
  // forward, and keeps every other unit's (docs/design/backends.md).
  const std::vector<UnitCheckpoint> checkpoints =
      checkpoints_of(setup.config.recompute(), setup.model, /*compiled=*/false);
  for (std::size_t u = 0; u < checkpoints.size(); ++u) {
    decoder.set_recompute(static_cast<std::int32_t>(u), checkpoints[u].recomputed);
  }
}

Expected<RankResult> train_rank(const TrainSetup& setup, const TrainSpec& spec, std::int64_t rank,
                                Device& device, CommunicatorSet& comms,
                                const std::function<void(std::int64_t, double)>& on_step) {
  FSDP_TRY(const RankModel model, rank_model(setup, spec, rank));
  FSDP_TRY(std::unique_ptr<backend::HostDecoder> decoder,
           device.make_decoder(model.config, spec.microbatches, model.data_rank, model.data_world));
  set_decoder_recompute(setup, *decoder);
  ExecutorOptions options;
  options.optimizer = spec.optimizer;
  options.hyper = spec.hyper;
  FSDP_TRY(std::unique_ptr<Executor> executor,
           Executor::make(setup.schedule, rank, model.split ? model.initial : setup.initial,
                          decoder.get(), &device, &comms, options));
  // On every way out, the device's streams drain before the executor and the decoder free what
  // their queued tasks use: a collective still copying from this rank's buffers for a peer
  // (in-process ranks share memory) must finish first.
  struct DrainOnExit {
    Device& device;
    ~DrainOnExit() { static_cast<void>(device.synchronize()); }
  } drain{device};
  RankResult result;
  result.rank = rank;
  const CheckpointOptions& ckpt = spec.checkpoint;
  const CheckpointContext context = checkpoint_context(setup, spec);
  if (!ckpt.resume_from.empty()) {
    FSDP_TRY(result.first_step, load_checkpoint(ckpt.resume_from, context, *executor, rank));
    if (result.first_step > spec.steps) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("rank ", rank, ": the checkpoint ", ckpt.resume_from, " is at step ",
                           result.first_step, "; --steps ", spec.steps,
                           " counts all steps, so nothing is left to run"));
    }
  }
  for (std::int64_t step = result.first_step; step < spec.steps; ++step) {
    FSDP_RETURN_IF_ERROR(executor->run_step(step));
    result.losses.push_back(executor->last_loss());
    if (on_step) {
      on_step(step, executor->last_loss());
    }
    const std::int64_t done = step + 1;
    if (!ckpt.save_dir.empty() &&
        (done == spec.steps || (ckpt.save_every > 0 && done % ckpt.save_every == 0))) {
      FSDP_RETURN_IF_ERROR(save_checkpoint(ckpt.save_dir, context, *executor, rank));
    }
  }
  FSDP_TRY(result.final_params, executor->gather_parameters());
  if (model.split) {
    const std::string_view name = model.config.ep > 1 ? kExpertParallelAxis : kTensorParallelAxis;
    const std::int64_t axis = *setup.config.mesh().axis_index(name);
    FSDP_TRY(result.final_params,
             join_over_split(model.config, axis, result.final_params, *executor));
  }
  result.timeline = executor->op_timeline();
  result.arena_log = device.arena().log();
  for (int c = 0; c < kNumBufferClasses; ++c) {
    result.high_water[static_cast<std::size_t>(c)] =
        device.arena().high_water(static_cast<BufferClass>(c));
  }
  return result;
}

CheckpointContext checkpoint_context(const TrainSetup& setup, const TrainSpec& spec) {
  CheckpointContext c;
  c.model = &setup.model;
  const DeviceMesh& mesh = setup.config.mesh();
  c.config = SavedConfig{mesh.size(),
                         to_string(mesh),
                         std::string(to_string(spec.strategy)),
                         std::string(to_string(spec.shard_layout)),
                         spec.block_size,
                         spec.tensor_atomic,
                         spec.microbatches,
                         spec.grad_scale};
  c.optimizer = SavedOptimizer{std::string(to_string(spec.optimizer)),
                               backend::optimizer_num_states(spec.optimizer),
                               spec.hyper.lr,
                               spec.hyper.momentum,
                               spec.hyper.beta1,
                               spec.hyper.beta2,
                               spec.hyper.eps};
  c.seed = spec.model.seed;
  c.samples_per_step = mesh.size() * spec.microbatches * spec.model.micro_batch_size;
  return c;
}

std::vector<Expected<RankResult>> run_rank_threads(
    const TrainSetup& setup, const TrainSpec& spec, const RankEnvFactory& make_env,
    const std::function<bool(std::int64_t)>& skip_rank,
    const std::function<void(std::int64_t, double)>& on_step) {
  const auto n = static_cast<std::size_t>(setup.config.mesh().size());
  std::vector<std::optional<Expected<RankResult>>> results(n);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < n; ++i) {
    const auto r = static_cast<std::int64_t>(i);
    if (skip_rank && skip_rank(r)) {
      results[i] = Error(ErrorCode::kUnavailable, str_cat("rank ", r, " was not started"));
      continue;
    }
    // A thread that cannot start is that rank's error; the started ones are still joined (a
    // joinable std::thread destroyed by an exception would std::terminate, issue 16).
    try {
      threads.emplace_back([&, r, i] {
        Expected<RankEnv> env = make_env(r);
        if (!env) {
          results[i] = env.error().with_context(str_cat("rank ", r));
          return;
        }
        std::function<void(std::int64_t, double)> hook;
        if (r == 0) {
          hook = on_step;
        }
        try {
          results[i] = train_rank(setup, spec, r, *env->device, *env->comms, hook);
        } catch (const std::bad_alloc&) {
          results[i] = Error(ErrorCode::kUnavailable, str_cat("rank ", r, ": out of memory"));
        }
      });
    } catch (const std::system_error& e) {
      results[i] = Error(ErrorCode::kUnavailable,
                         str_cat("rank ", r, ": cannot start its thread: ", e.what()));
    }
  }
  for (std::thread& t : threads) {
    t.join();
  }
  std::vector<Expected<RankResult>> out;
  for (auto& r : results) {
    out.push_back(std::move(*r));
  }
  return out;
}

const Error* first_failure(const std::vector<Expected<RankResult>>& outcomes) {
  const Error* first = nullptr;
  for (const Expected<RankResult>& o : outcomes) {
    if (o) {
      continue;
    }
    if (o.error().code() != ErrorCode::kUnavailable) {
      return &o.error();
    }
    first = first == nullptr ? &o.error() : first;
  }
  return first;
}

Expected<std::vector<RankResult>> collect_ranks(std::vector<Expected<RankResult>> outcomes) {
  if (const Error* e = first_failure(outcomes)) {
    return *e;
  }
  std::vector<RankResult> out;
  for (auto& o : outcomes) {
    out.push_back(std::move(*o));
  }
  return out;
}

double max_relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) {
    return INFINITY;
  }
  double diff = 0.0;
  double scale = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) {
    // A non-finite value on either side is never a match: std::max drops NaN, so NaN weights on
    // both sides once reported an error of 0 ("ok", issue 16).
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) {
      return INFINITY;
    }
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

double max_relative_error(const backend::ParamValues& a, const backend::ParamValues& b) {
  if (a.size() != b.size()) {
    return INFINITY;
  }
  double worst = 0.0;
  for (std::size_t u = 0; u < a.size(); ++u) {
    if (a[u].size() != b[u].size()) {
      return INFINITY;
    }
    for (std::size_t p = 0; p < a[u].size(); ++p) {
      if (a[u][p].size() != b[u][p].size()) {
        return INFINITY;
      }
      std::vector<double> x(a[u][p].begin(), a[u][p].end());
      std::vector<double> y(b[u][p].begin(), b[u][p].end());
      worst = std::max(worst, max_relative_error(x, y));
    }
  }
  return worst;
}

Expected<backend::TrainResult> train_reference(const TrainSpec& spec) {
  // The whole model, trained on the samples of every DP rank (tp ranks share theirs).
  backend::DecoderConfig whole = spec.model;
  whole.tp = 1;
  whole.tp_rank = 0;
  whole.ep = 1;
  whole.ep_rank = 0;
  return backend::train_unsharded(whole, spec.optimizer, spec.hyper, spec.steps, spec.microbatches,
                                  spec.mesh.size() / tensor_parallel_size(spec.mesh),
                                  spec.grad_scale);
}

std::int64_t tensor_parallel_size(const DeviceMesh& mesh) {
  const std::optional<std::int64_t> axis = mesh.axis_index(kTensorParallelAxis);
  return axis ? mesh.axis_size(*axis) : 1;
}

std::int64_t expert_parallel_size(const DeviceMesh& mesh) {
  const std::optional<std::int64_t> axis = mesh.axis_index(kExpertParallelAxis);
  return axis ? mesh.axis_size(*axis) : 1;
}

}  // namespace fsdp::exec

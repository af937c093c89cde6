// SPDX-License-Identifier: Apache-2.0
// The options of a planned training step, shared by every front end (the CLI's schedule,
// simulate, sweep and plan, and the Python package): the model, the mesh and strategy, and the
// policies. RunOptions holds the text a front end fills (the CLI's option parser, Python's
// keywords); parse_config_options turns it, once, into typed ConfigOptions
// (core/policy/config_options.h), and everything after that works on typed values. Errors name
// the CLI option ("--mesh: ..."); the Python package raises them as ValueError.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/base/expected.h"
#include "core/hardware/hardware.h"
#include "core/model/hub_arch.h"
#include "core/model/model.h"
#include "core/model/model_split.h"
#include "core/policy/config_options.h"
#include "core/policy/fsdp_config.h"
#include "core/schedule/schedule_builder.h"

namespace fsdp::planner {

// The options as the parser leaves them (text where the command line gives text).
struct RunOptions {
  std::string model = "llama-3-8b";
  std::string mesh = "dp=8";
  std::string strategy = "zero3";
  std::int64_t microbatches = 1;
  std::string shard_layout = "padded";
  std::int64_t block = 1;
  std::string forward_prefetch = "next(1)";
  std::string backward_prefetch = "next(1)";
  std::int64_t max_inflight = 0;
  bool unified_streams = false;
  // none | full | selective-op | selective-layer:K | core-attention
  std::string recompute = "none";
  bool tensor_atomic = false;
  std::string main_params = "fp32";
  std::string optimizer = "adam";
  double grad_scale = 1.0;
  std::int64_t seq_len = 4096;
  std::int64_t micro_batch_size = 1;
  bool compile = false;               // --compile
  std::string compute_dtype = "bf16";  // --compute-dtype: the weight matmuls' math
  std::string kernels = "auto";        // --kernels: torch | te | auto (the framework's)
  std::string param_dtype;             // --param-dtype: bf16 | fp32; empty: the model's dtype
  std::string reduce_dtype;            // --reduce-dtype: fp32 | bf16; empty: the grad dtype
  bool fp8_all_gather = false;         // --fp8-all-gather
  std::string framework = "megatron-fsdp";  // --framework: megatron-fsdp | fsdp2 | fsdp1
  std::string reshard_after_forward = "all";  // --reshard-after-forward: all | all-but-last | none
  HubOverrides sizes;  // --layers, --hidden, ... (planner/model_argument.h)
  bool sequence_parallel = false;  // --sequence-parallel (with a tp axis)
  double capacity_factor = 1.0;    // --capacity-factor (with an ep axis)
};

// A hardware preset (fsdpsim hardware lists them) or, when the text has a '.', a hardware JSON
// file.
Expected<Hardware> load_hardware_argument(const std::string& text);

// The typed values of the options (all but --model, --seq-len and --micro-batch-size), each
// text parsed once. The first error, named by its option ("--mesh: ...", "--strategy: ...",
// "--shard-layout", "--main-params", "--optimizer", "--forward-prefetch", "--backward-prefetch",
// "--max-inflight-all-gathers", "--recompute", "--param-dtype", "--reduce-dtype",
// "--fp8-all-gather" (it needs --compute-dtype fp8), "--framework", "--reshard-after-forward",
// checked in that order).
Expected<ConfigOptions> parse_config_options(const RunOptions& options);
// --seq-len, --micro-batch-size, --compile, --compute-dtype and --kernels (auto: te for
// megatron-fsdp, torch for fsdp2 and fsdp1); errors name the option.
Expected<Workload> make_workload(const RunOptions& options);

// What a planning subcommand works on: the model, the config and the workload of the options.
struct PlannedRun {
  Model model;
  FsdpConfig config;
  Workload workload;
};
// How the mesh's tp and ep axes split the model (core/model/model_split.h), with
// --sequence-parallel and --capacity-factor. Errors: --sequence-parallel without a tp axis of
// more than one rank; tp and ep together ("--mesh: ... not implemented"); a bad capacity factor.
Expected<ModelSplit> model_split_of(const DeviceMesh& mesh, const RunOptions& options);
// The config options, then the model (--model, split for the mesh), then the config, then the
// workload; the first error.
Expected<PlannedRun> plan_run(const RunOptions& options);

// build_schedule of the run.
Expected<Schedule> build_run_schedule(const PlannedRun& run);
// plan_run, then build_run_schedule.
Expected<Schedule> build_schedule_from_options(const RunOptions& options);

}  // namespace fsdp::planner

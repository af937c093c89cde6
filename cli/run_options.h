// SPDX-License-Identifier: Apache-2.0
// Options shared by every subcommand that plans a training step (schedule, simulate; sweep uses
// a subset): the model, the mesh and strategy, and the policies. RunOptions holds the text the
// option parser fills; parse_config_options turns it, once, into typed ConfigOptions
// (core/policy/config_options.h), and everything after that works on typed values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cli/command.h"
#include "cli/model_argument.h"
#include "core/base/expected.h"
#include "core/hardware/hardware.h"
#include "core/model/model.h"
#include "core/policy/config_options.h"
#include "core/policy/fsdp_config.h"
#include "core/schedule/schedule_builder.h"

#include <boost/program_options.hpp>

namespace fsdp::cli {

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
  HubOverrides sizes;  // --layers, --hidden, ... (cli/model_argument.h)
  bool sequence_parallel = false;  // --sequence-parallel (with a tp axis)
  double capacity_factor = 1.0;    // --capacity-factor (with an ep axis)
};

// Adds --model, --mesh, --strategy, --microbatches, --shard-layout, --block, --prefetch,
// --forward-prefetch, --backward-prefetch, --max-inflight-all-gathers, --unified-streams,
// --recompute, --tensor-atomic, --main-params, --optimizer, --grad-scale, --seq-len,
// --micro-batch-size, --compile, --compute-dtype, --kernels, --param-dtype, --reduce-dtype,
// --fp8-all-gather, --framework, --reshard-after-forward, with `defaults` as the defaults, and
// the model size options (cli/model_argument.h).
void add_run_options(boost::program_options::options_description& desc, RunOptions* options);

// Options given together that contradict each other (docs/cli.md, "Command lines"): --prefetch
// with --forward-prefetch or --backward-prefetch; --tensor-atomic with --shard-layout unpadded or
// a --block other than 1. The usage-error message, if any.
std::optional<std::string> run_option_conflict(const boost::program_options::variables_map& vm,
                                               const RunOptions& options);

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

}  // namespace fsdp::cli

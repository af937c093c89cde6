// SPDX-License-Identifier: Apache-2.0
// The Boost options of every subcommand that plans a training step (schedule, simulate; sweep
// uses a subset), filling planner::RunOptions (planner/run_options.h), where everything after the
// parse happens.
#pragma once

#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command.h"
#include "cli/model_argument.h"
#include "planner/run_options.h"
#include "planner/torchtitan_config.h"

#include <boost/program_options.hpp>

namespace fsdp::cli {

using planner::build_run_schedule;
using planner::build_schedule_from_options;
using planner::load_hardware_argument;
using planner::make_workload;
using planner::model_split_of;
using planner::parse_config_options;
using planner::plan_run;
using planner::PlannedRun;
using planner::RunOptions;

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

// --config FILE.toml (a torchtitan job config) and --profile NAME (docs/cli.md, "Config files and
// profiles").
struct ConfigArguments {
  std::string config_path;
  std::string profile;
};
void add_config_options(boost::program_options::options_description& desc, ConfigArguments* args);

// Layers the run options: the profile's defaults < the config file < the options given on the
// command line (present in `vm` and not defaulted). `chosen` names options the command decides
// itself (plan's mesh, microbatches, ...), which are left alone. Returns the config read, if
// --config was given. Errors (one line, exit 1): an unknown profile, an unreadable file, a TOML
// syntax error, a field fsdpsim cannot map, and planner::layer_run_options's.
Expected<std::optional<planner::TorchtitanConfig>> layer_config_arguments(
    const boost::program_options::variables_map& vm, const ConfigArguments& args,
    std::span<const std::string_view> chosen, RunOptions* options);

// "config: ignored fields: a.b, c.d" on `err`, when there are any.
void print_ignored_fields(std::ostream& err, const std::vector<std::string>& fields);

}  // namespace fsdp::cli

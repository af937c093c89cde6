// SPDX-License-Identifier: Apache-2.0
// The Boost options of every subcommand that plans a training step (schedule, simulate; sweep
// uses a subset), filling planner::RunOptions (planner/run_options.h), where everything after the
// parse happens.
#pragma once

#include <optional>
#include <string>

#include "cli/command.h"
#include "cli/model_argument.h"
#include "planner/run_options.h"

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

}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
// Options shared by every subcommand that plans a training step (schedule, and later simulate
// and sweep): the model, the mesh and strategy, and the policies, turned into validated values.
#pragma once

#include <cstdint>
#include <string>

#include "cli/command.h"
#include "core/base/expected.h"
#include "core/hardware/hardware.h"
#include "core/model/model.h"
#include "core/policy/fsdp_config.h"
#include "core/schedule/schedule_builder.h"

#include <boost/program_options.hpp>

namespace fsdp::cli {

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
  bool recompute = false;
  bool tensor_atomic = false;
  std::string main_params = "fp32";
  std::string optimizer = "adam";
  double grad_scale = 1.0;
  std::int64_t seq_len = 4096;
  std::int64_t micro_batch_size = 1;
};

// Adds --model, --mesh, --strategy, --microbatches, --shard-layout, --block, --prefetch,
// --forward-prefetch, --backward-prefetch, --max-inflight-all-gathers, --unified-streams,
// --recompute, --tensor-atomic, --main-params, --optimizer, --grad-scale, --seq-len,
// --micro-batch-size, with `defaults` as the defaults.
void add_run_options(boost::program_options::options_description& desc, RunOptions* options);

// A preset name (fsdpsim model --list) or a path to a hub config.json / fsdpsim model file.
Expected<Model> load_model_argument(const std::string& text);

// A hardware preset (fsdpsim hardware lists them) or, when the text has a '.', a hardware JSON
// file.
Expected<Hardware> load_hardware_argument(const std::string& text);

// Validates everything into an FsdpConfig; errors name the option.
Expected<FsdpConfig> make_config(const RunOptions& options);
Expected<Workload> make_workload(const RunOptions& options);

// The model, config and workload of `options`, and the schedule built from them.
Expected<Schedule> build_schedule_from_options(const RunOptions& options);

}  // namespace fsdp::cli

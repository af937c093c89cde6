// SPDX-License-Identifier: Apache-2.0
// The options that describe one real-training configuration (`fsdpsim train`, and `fsdpsim
// calibrate`, which measures and predicts at the same configuration): decoder sizes, mesh,
// strategy, layout, microbatches, prefetch, optimizer; turned into a validated exec::TrainSpec.
#pragma once

#include <cstdint>
#include <string>

#include "backends/exec/trainer.h"
#include "core/base/expected.h"
#include "core/model/hub_arch.h"

#include <boost/program_options.hpp>

namespace fsdp::cli {

// The parser's view: numbers and flags go straight into `spec`, text into the strings, which
// make_train_spec parses once into spec's typed fields.
struct TrainOptions {
  exec::TrainSpec spec;  // the flags and numbers parsed straight into it
  // --model (a preset name or a hub config.json) and the sizes given on the command line, which
  // replace the config's (or the small decoder's defaults without --model).
  std::string model;
  HubOverrides sizes;
  std::string mesh = "dp=4";
  std::string strategy = "zero3";
  std::string shard_layout = "padded";
  std::string prefetch = "next(1)";
  std::string optimizer = "adam";
  std::string main_params = "fp32";
  std::int64_t max_inflight = 0;
  bool unified_streams = false;
  std::string recompute = "none";  // none | full; the other modes are refused (make_train_spec)
};

// Adds --model, --mesh, --strategy, --shard-layout, --tensor-atomic, --block, --microbatches,
// --prefetch, --max-inflight-all-gathers, --unified-streams, --recompute, --main-params,
// --optimizer, --lr, --grad-scale, --seed, --layers, --hidden, --ffn, --heads, --kv-heads,
// --vocab, --seq-len, --micro-batch-size and --timeout (everything but --steps) with `fsdpsim
// train`'s defaults.
void add_train_options(boost::program_options::options_description& desc, TrainOptions* options);

// The spec with the text options parsed; errors name the option ("--mesh: ...", "--prefetch: ...").
// With --model the decoder is the config's Llama-family network (backend::decoder_config_of_arch)
// shrunk by the given sizes; without it the small decoder, where --heads / --kv-heads are errors.
Expected<exec::TrainSpec> make_train_spec(const TrainOptions& options);

// check_training_memory (planner/resource_estimate.h) for the spec's model and data sizes, with
// `ranks_here` ranks in this process; `check`: the unsharded reference runs too.
Status check_train_memory(const exec::TrainSpec& spec, std::int64_t ranks_here, bool check);

}  // namespace fsdp::cli

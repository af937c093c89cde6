// SPDX-License-Identifier: Apache-2.0
// The options that describe one real-training configuration (`fsdpsim train`, and `fsdpsim
// calibrate`, which measures and predicts at the same configuration): decoder sizes, mesh,
// strategy, layout, microbatches, prefetch, optimizer; turned into a validated exec::TrainSpec.
#pragma once

#include <cstdint>
#include <string>

#include "backends/exec/trainer.h"
#include "core/base/expected.h"

#include <boost/program_options.hpp>

namespace fsdp::cli {

// The parser's view: numbers and flags go straight into `spec`, text into the strings, which
// make_train_spec parses once into spec's typed fields.
struct TrainOptions {
  exec::TrainSpec spec;  // the sizes, flags and numbers parsed straight into it
  std::string mesh = "dp=4";
  std::string strategy = "zero3";
  std::string shard_layout = "padded";
  std::string prefetch = "next(1)";
  std::string optimizer = "adam";
  std::string main_params = "fp32";
  std::int64_t max_inflight = 0;
  bool unified_streams = false;
};

// Adds --mesh, --strategy, --shard-layout, --tensor-atomic, --block, --microbatches, --prefetch,
// --max-inflight-all-gathers, --unified-streams, --recompute, --main-params, --optimizer, --lr,
// --grad-scale, --seed, --layers, --hidden, --ffn, --vocab, --seq-len, --micro-batch-size and
// --timeout (everything but --steps) with `fsdpsim train`'s defaults.
void add_train_options(boost::program_options::options_description& desc, TrainOptions* options);

// The spec with the text options parsed; errors name the option ("--mesh: ...", "--prefetch: ...").
Expected<exec::TrainSpec> make_train_spec(const TrainOptions& options);

}  // namespace fsdp::cli

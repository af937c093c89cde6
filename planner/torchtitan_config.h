// SPDX-License-Identifier: Apache-2.0
// torchtitan job configs (`--config FILE.toml`): reads a torchtitan `train_configs/*.toml` file
// into the run options it determines, the job size and global batch where it gives them, and
// every field it does not use. Field by field, with torchtitan's defaults for fields a file
// omits: docs/cli.md, "Config files and profiles". Errors are one line naming the file, the line
// and the field ("llama3_8b.toml:32: training.seq_len: expected a positive integer, got -1").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/expected.h"
#include "planner/run_options.h"
#include "planner/run_options_patch.h"

namespace fsdp::planner {

struct TorchtitanConfig {
  std::string path;  // as given; every error and note names it
  // What the file determines: model, strategy, mesh (when the degrees give the job size),
  // microbatches (1 without training.global_batch_size), recompute, optimizer, seq-len,
  // micro-batch-size, compile, compute-dtype, fp8-all-gather, param-dtype, reduce-dtype,
  // framework (fsdp2), reshard-after-forward and sequence-parallel (with tp).
  RunOptionsPatch options;
  // Non-empty when model.name / model.flavor name no fsdpsim preset: the error, raised only when
  // no --model replaces the file's model.
  std::string model_error;
  // parallelism.*: -1 (data_parallel_shard_degree only) means the GPUs left over, so the file
  // does not give the job size and options.mesh is unset.
  std::int64_t dp_replicate = 1;
  std::int64_t dp_shard = -1;
  std::string dp_shard_at;  // "FILE:LINE: parallelism.data_parallel_shard_degree" (or FILE: ...)
  std::int64_t tp = 1;
  std::int64_t ep = 1;
  std::int64_t local_batch_size = 8;
  std::int64_t global_batch_size = -1;  // -1: local x data-parallel degree (no accumulation)
  // Every field of the file (as "section.key", arrays whole) that nothing above reads, in the
  // order of the file.
  std::vector<std::string> ignored_fields;
  // The fields of the file that were read, in the order of the file.
  std::vector<std::string> read_fields;
};

// Parses `text` as the torchtitan config file `path` (which is only named in messages). Errors:
// a TOML syntax error ("FILE:LINE:COLUMN: TOML syntax error: ..."); a mapped field of the wrong
// type or value; pipeline_parallel_degree or context_parallel_degree above 1; a converter or
// activation_checkpoint.mode fsdpsim does not model; degrees that contradict each other.
Expected<TorchtitanConfig> parse_torchtitan_config(std::string_view text, const std::string& path);
// read_input_file, then parse_torchtitan_config.
Expected<TorchtitanConfig> read_torchtitan_config(const std::string& path);

// The GPUs of the job when the file gives every degree (replicate x shard x tp), else nullopt.
std::optional<std::int64_t> config_gpus(const TorchtitanConfig& config);
// Sequences per optimizer step when the file gives them: training.global_batch_size, or without
// it local x replicate x shard when the file gives the shard degree; else nullopt.
std::optional<std::int64_t> config_global_batch(const TorchtitanConfig& config);

// Layers the run options: `profile` (may be empty), then the config's options (if `config`),
// each skipping the options `given(name)` says the user gave (CLI option names, "seq-len"); then
// what only the final options decide: the config's model error unless --model was given; unless
// --mesh was given, the config's mesh or, when the file leaves the job size to the GPUs
// (data_parallel_shard_degree -1), an error asking for --mesh; unless --microbatches was given,
// training.global_batch_size / (micro-batch-size x the mesh's data-parallel degree, every axis
// but tp), an error naming the fields when it does not divide.
Status layer_run_options(const RunOptionsPatch& profile, const TorchtitanConfig* config,
                         const std::function<bool(std::string_view option)>& given,
                         RunOptions* options);

}  // namespace fsdp::planner

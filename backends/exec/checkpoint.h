// SPDX-License-Identifier: Apache-2.0
// Sharded checkpoints of a training run that reshard on load (docs/design/backends.md,
// "Checkpoints"). save_checkpoint writes DIR/step-<N>/ (manifest.json plus one rank-<r>.bin per
// saving rank, checkpoint_manifest.h and checkpoint_shard.h) atomically: every rank writes and
// fsyncs its shard into DIR/step-<N>.tmp-save, the ranks meet (Executor::sum_over_ranks), then
// rank 0 writes the manifest, renames the directory to step-<N> and rewrites DIR/latest; a crash
// before the rename leaves the previous checkpoint and `latest` as they were. load_checkpoint
// imports, on every rank, the elements of its own shards under the current (possibly different)
// mesh, strategy and layout from whichever shard files hold them.
#pragma once

#include <cstdint>
#include <string>

#include "backends/exec/checkpoint_manifest.h"
#include "backends/exec/executor.h"
#include "core/base/expected.h"
#include "core/model/model.h"

namespace fsdp::exec {

// What `fsdpsim train --save/--save-every/--resume` asks for.
struct CheckpointOptions {
  std::string save_dir;         // empty: never save
  std::int64_t save_every = 0;  // save after every this many steps (0: only after the last one)
  std::string resume_from;      // empty: start from step 0; else a checkpoint directory or step
};

// Everything a manifest records besides the tensors' values, and what a load is checked against.
struct CheckpointContext {
  const Model* model = nullptr;
  SavedConfig config;
  SavedOptimizer optimizer;
  std::uint64_t seed = 1;
  std::int64_t samples_per_step = 0;
};

// The step directory `path` names: `path` itself when it holds a manifest.json, else
// path/<the contents of path/latest>. Errors (one line naming the path): neither exists, a
// `latest` that does not name a step-<N> directory.
Expected<std::string> resolve_checkpoint_step(const std::string& path);

// Reads and parses <step_dir>/manifest.json (bounded read).
Expected<CheckpointManifest> read_checkpoint_manifest(const std::string& step_dir);

// A collective (every rank calls it with the same dir and context): saves `executor`'s state as
// DIR/step-<executor.steps_done()>. Errors on every rank when any rank fails (the failing rank
// names the file and the reason; the others say a peer failed); DIR/latest then still names the
// previous complete step.
Status save_checkpoint(const std::string& dir, const CheckpointContext& context, Executor& executor,
                       std::int64_t rank);

// A collective: reads the checkpoint `path` names (resolve_checkpoint_step), checks it against
// the context (same unit and parameter names and shapes in Model order, same optimizer kind, same
// seed and samples per step), checks every shard file listed (size, header and index checksum),
// reads the records overlapping this rank's local slices (each under its checksum) and imports
// them. Returns the step to continue at (the manifest's step). Errors (one line naming the file
// and the tensor): any of the above, missing coverage; every rank fails when one does.
Expected<std::int64_t> load_checkpoint(const std::string& path, const CheckpointContext& context,
                                       Executor& executor, std::int64_t rank);

}  // namespace fsdp::exec

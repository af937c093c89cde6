// SPDX-License-Identifier: Apache-2.0
// train_in_process: every rank of the spec's mesh as a thread of this process, each with its own
// CpuDevice and the in-process communicators (no launcher needed; used by the tests and by
// `fsdpsim train` when it was not started by mpirun).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backends/exec/trainer.h"
#include "core/base/expected.h"

namespace fsdp::cpu {

// Per-rank results in rank order. on_step(step, loss) is called by rank 0 only. Errors: those of
// prepare_training (before any thread starts); else the first failing rank's error (all ranks
// end: a failure aborts the in-process world).
Expected<std::vector<exec::RankResult>> train_in_process(
    const exec::TrainSpec& spec, const std::function<void(std::int64_t, double)>& on_step = {});

// The same on an already prepared setup, with `skip_rank(r)` true for ranks that never start (a
// fault injection for tests: their peers must end with a timeout error). Returns every rank's
// outcome, skipped ranks included (as an error saying so).
std::vector<Expected<exec::RankResult>> run_ranks_in_process(
    const exec::TrainSetup& setup, const exec::TrainSpec& spec,
    const std::function<bool(std::int64_t)>& skip_rank,
    const std::function<void(std::int64_t, double)>& on_step = {});

}  // namespace fsdp::cpu

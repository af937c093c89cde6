// SPDX-License-Identifier: Apache-2.0
// The in-process world's communicators and a CpuDevice per rank, run by exec::run_rank_threads.
#include "backends/cpu/in_process_training.h"

#include <chrono>
#include <memory>

#include "backends/cpu/cpu_device.h"
#include "backends/cpu/in_process_comm.h"
#include "core/base/strings.h"

namespace fsdp::cpu {

std::vector<Expected<exec::RankResult>> run_ranks_in_process(
    const exec::TrainSetup& setup, const exec::TrainSpec& spec,
    const std::function<bool(std::int64_t)>& skip_rank,
    const std::function<void(std::int64_t, double)>& on_step) {
  auto world = InProcessWorld::make(
      setup.config.mesh(),
      std::chrono::milliseconds(static_cast<std::int64_t>(spec.timeout_s * 1000.0)));
  if (!world) {
    return std::vector<Expected<exec::RankResult>>(
        static_cast<std::size_t>(setup.config.mesh().size()), world.error());
  }
  auto make_env = [&](std::int64_t r) -> Expected<exec::RankEnv> {
    exec::RankEnv env;
    env.comms = (*world)->communicators(r);
    env.device = std::make_unique<CpuDevice>(str_cat("rank ", r));
    return env;
  };
  return exec::run_rank_threads(setup, spec, make_env, skip_rank, on_step);
}

Expected<std::vector<exec::RankResult>> train_in_process(
    const exec::TrainSpec& spec, const std::function<void(std::int64_t, double)>& on_step) {
  FSDP_TRY(exec::TrainSetup setup, exec::prepare_training(spec));
  return exec::collect_ranks(run_ranks_in_process(setup, spec, /*skip_rank=*/{}, on_step));
}

}  // namespace fsdp::cpu

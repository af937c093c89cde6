// SPDX-License-Identifier: Apache-2.0
// One thread per rank; results are collected per rank and the first error is reported.
#include "backends/cpu/in_process_training.h"

#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "backends/cpu/cpu_device.h"
#include "backends/cpu/in_process_comm.h"
#include "core/base/strings.h"

namespace fsdp::cpu {

std::vector<Expected<exec::RankResult>> run_ranks_in_process(
    const exec::TrainSetup& setup, const exec::TrainSpec& spec,
    const std::function<bool(std::int64_t)>& skip_rank,
    const std::function<void(std::int64_t, double)>& on_step) {
  const std::int64_t n = setup.config.mesh().size();
  std::vector<std::optional<Expected<exec::RankResult>>> results(static_cast<std::size_t>(n));
  auto world = InProcessWorld::make(
      setup.config.mesh(),
      std::chrono::milliseconds(static_cast<std::int64_t>(spec.timeout_s * 1000.0)));
  if (!world) {
    return std::vector<Expected<exec::RankResult>>(static_cast<std::size_t>(n), world.error());
  }
  std::vector<std::thread> threads;
  for (std::int64_t r = 0; r < n; ++r) {
    if (skip_rank && skip_rank(r)) {
      results[static_cast<std::size_t>(r)] =
          Error(ErrorCode::kUnavailable, str_cat("rank ", r, " was not started"));
      continue;
    }
    threads.emplace_back([&, r] {
      auto comms = (*world)->communicators(r);
      CpuDevice device(str_cat("rank ", r));
      std::function<void(std::int64_t, double)> hook;
      if (r == 0) {
        hook = on_step;
      }
      results[static_cast<std::size_t>(r)] =
          exec::train_rank(setup, spec, r, device, *comms, hook);
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  std::vector<Expected<exec::RankResult>> out;
  for (auto& r : results) {
    out.push_back(std::move(*r));
  }
  return out;
}

Expected<std::vector<exec::RankResult>> train_in_process(
    const exec::TrainSpec& spec, const std::function<void(std::int64_t, double)>& on_step) {
  FSDP_TRY(exec::TrainSetup setup, exec::prepare_training(spec));
  std::vector<Expected<exec::RankResult>> outcomes =
      run_ranks_in_process(setup, spec, /*skip_rank=*/{}, on_step);
  std::vector<exec::RankResult> out;
  for (auto& o : outcomes) {
    if (!o) {
      return o.error();
    }
    out.push_back(std::move(*o));
  }
  return out;
}

}  // namespace fsdp::cpu

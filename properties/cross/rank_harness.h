// SPDX-License-Identifier: Apache-2.0
// Helpers of the cross-checks that run every rank of a spec in this process: the rank's decoder
// and one thread per rank (the in-process backend's ranks).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "backends/exec/trainer.h"
#include "backends/model/decoder.h"
#include "core/base/expected.h"

namespace fsdp::cross {

// Rank `rank`'s decoder of the spec, recomputing the units the config's recompute policy
// checkpoints.
inline Expected<std::unique_ptr<backend::HostDecoder>> make_rank_decoder(
    const exec::TrainSetup& setup, const exec::TrainSpec& spec, std::int64_t rank) {
  FSDP_TRY(const exec::RankModel model, exec::rank_model(setup, spec, rank));
  FSDP_TRY(std::unique_ptr<backend::HostDecoder> decoder,
           backend::HostDecoder::make(model.config, spec.microbatches, model.data_rank,
                                      model.data_world));
  exec::set_decoder_recompute(setup, *decoder);
  return decoder;
}

// The initial values rank `rank`'s executor starts from: the setup's, or its tp slice.
inline Expected<backend::ParamValues> rank_initial(const exec::TrainSetup& setup,
                                                   const exec::TrainSpec& spec, std::int64_t rank) {
  FSDP_TRY(exec::RankModel model, exec::rank_model(setup, spec, rank));
  return model.split ? std::move(model.initial) : setup.initial;
}

// Runs fn(rank) for every rank, each on its own thread, and returns every rank's outcome in rank
// order once all have joined.
template <typename T, typename Fn>
std::vector<Expected<T>> run_rank_threads(std::int64_t num_ranks, const Fn& fn) {
  std::vector<std::optional<Expected<T>>> slots(static_cast<std::size_t>(num_ranks));
  {
    std::vector<std::thread> threads;
    for (std::int64_t r = 0; r < num_ranks; ++r) {
      threads.emplace_back([&slots, &fn, r] { slots[static_cast<std::size_t>(r)] = fn(r); });
    }
    for (std::thread& t : threads) {
      t.join();
    }
  }
  std::vector<Expected<T>> out;
  for (std::optional<Expected<T>>& s : slots) {
    out.push_back(std::move(*s));
  }
  return out;
}

}  // namespace fsdp::cross

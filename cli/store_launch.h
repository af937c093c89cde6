// SPDX-License-Identifier: Apache-2.0
// How a `fsdpsim train --backend cuda` process started without mpirun learns its place: --rank,
// --world-size and --store (or FSDP_RANK, FSDP_WORLD_SIZE and FSDP_STORE; a flag wins over its
// variable). resolve_store_launch validates all of it before any GPU or store is touched.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "backends/store/store.h"
#include "core/base/expected.h"

#include <boost/program_options.hpp>

namespace fsdp::cli {

inline constexpr const char* kRankEnv = "FSDP_RANK";
inline constexpr const char* kWorldSizeEnv = "FSDP_WORLD_SIZE";
inline constexpr const char* kStoreEnv = "FSDP_STORE";

// The raw flags (empty: not given).
struct StoreLaunchArgs {
  std::string rank;
  std::string world_size;
  std::string store;
};

// A validated launch: member `rank` of `world` meeting at `spec` (text: as given, for messages).
struct StoreLaunch {
  int rank = 0;
  int world = 1;
  store::StoreSpec spec;
  std::string text;
};

// Adds --rank, --world-size and --store.
void add_store_launch_options(boost::program_options::options_description& desc,
                              StoreLaunchArgs* args);

// nullopt when neither the flags nor the variables name a store, rank or world size (the MPI or
// in-process paths). Errors (kInvalidArgument, one line naming the flag or variable, expected and
// actual value): a store without a rank or a world size, or the reverse; a rank or world size
// that is not an integer; world size < 1 or != mesh_size (when mesh_size > 0); rank outside
// [0, world size); a malformed store address; a backend whose registry entry
// (cli/backend_registry.h) cannot launch over a store (all but cuda); started by mpirun.
Expected<std::optional<StoreLaunch>> resolve_store_launch(const StoreLaunchArgs& args,
                                                          std::string_view backend,
                                                          std::int64_t mesh_size,
                                                          bool under_mpirun);

}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
// --rank / --world-size / --store and their environment variables.
#include "cli/store_launch.h"

#include <charconv>
#include <cstdlib>

#include "cli/backend_registry.h"
#include "core/base/strings.h"

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

// A value and where it came from ("--rank" or "FSDP_RANK"); empty name: not given.
struct Sourced {
  std::string value;
  std::string from;
};

Sourced pick(const std::string& flag_value, const char* flag, const char* env) {
  if (!flag_value.empty()) {
    return {flag_value, flag};
  }
  if (const char* v = std::getenv(env); v != nullptr && *v != '\0') {
    return {v, env};
  }
  return {};
}

Expected<int> parse_int(const Sourced& s) {
  int value = 0;
  const char* end = s.value.data() + s.value.size();
  const auto [p, ec] = std::from_chars(s.value.data(), end, value);
  if (ec != std::errc() || p != end) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(s.from, " is '", s.value, "'; expected an integer"));
  }
  return value;
}

}  // namespace

void add_store_launch_options(po::options_description& desc, StoreLaunchArgs* args) {
  // clang-format off
  desc.add_options()
      ("rank", po::value(&args->rank),
       "--backend cuda without mpirun: this process's mesh rank (or FSDP_RANK)")
      ("world-size", po::value(&args->world_size),
       "--backend cuda without mpirun: the number of processes = the mesh size (or "
       "FSDP_WORLD_SIZE)")
      ("store", po::value(&args->store),
       "--backend cuda without mpirun: where the processes meet, file:<shared dir> or "
       "tcp:<host>:<port> (rank 0 listens) (or FSDP_STORE)");
  // clang-format on
}

Expected<std::optional<StoreLaunch>> resolve_store_launch(const StoreLaunchArgs& args,
                                                          std::string_view backend,
                                                          std::int64_t mesh_size,
                                                          bool under_mpirun) {
  const Sourced rank = pick(args.rank, "--rank", kRankEnv);
  const Sourced world = pick(args.world_size, "--world-size", kWorldSizeEnv);
  const Sourced text = pick(args.store, "--store", kStoreEnv);
  if (rank.from.empty() && world.from.empty() && text.from.empty()) {
    return std::optional<StoreLaunch>();
  }
  auto bad = [](std::string message) { return Error(ErrorCode::kInvalidArgument, message); };
  const Sourced& given = !text.from.empty() ? text : !rank.from.empty() ? rank : world;
  if (under_mpirun) {
    return bad(str_cat(given.from,
                       " is set, but mpirun started this process (MPI bootstraps "
                       "NCCL); expected no --store, --rank, --world-size or ",
                       kStoreEnv, ", ", kRankEnv, ", ", kWorldSizeEnv, " under mpirun"));
  }
  if (const BackendEntry* entry = find_backend(backend);
      entry == nullptr || !entry->store_launch) {
    std::string store_backends;
    for (const BackendEntry& e : backend_entries()) {
      if (e.store_launch) {
        store_backends += str_cat(store_backends.empty() ? "" : " or ", "--backend ", e.name);
      }
    }
    return bad(str_cat(given.from, " is set with --backend ", backend, "; expected ",
                       store_backends, " (only NCCL bootstraps over a store)"));
  }
  if (text.from.empty() || rank.from.empty() || world.from.empty()) {
    return bad(str_cat(given.from, " is set but ",
                       text.from.empty()   ? "no store"
                       : rank.from.empty() ? "no rank"
                                           : "no world size",
                       "; expected all of --store, --rank and --world-size (or ", kStoreEnv, ", ",
                       kRankEnv, ", ", kWorldSizeEnv, ")"));
  }
  StoreLaunch launch;
  FSDP_TRY(launch.world, parse_int(world));
  FSDP_TRY(launch.rank, parse_int(rank));
  if (launch.world < 1) {
    return bad(str_cat(world.from, " is ", launch.world, "; expected at least 1"));
  }
  if (mesh_size > 0 && launch.world != mesh_size) {
    return bad(str_cat(world.from, " is ", launch.world, "; expected the mesh size, ", mesh_size));
  }
  if (launch.rank < 0 || launch.rank >= launch.world) {
    return bad(str_cat(rank.from, " is ", launch.rank, "; expected an integer in [0, ",
                       launch.world, ")"));
  }
  Expected<store::StoreSpec> spec = store::parse_store_spec(text.value);
  if (!spec) {
    return spec.error().with_context(text.from);
  }
  launch.spec = std::move(*spec);
  launch.text = text.value;
  return std::optional<StoreLaunch>(std::move(launch));
}

}  // namespace fsdp::cli

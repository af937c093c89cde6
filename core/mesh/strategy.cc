// SPDX-License-Identifier: Apache-2.0
#include "core/mesh/strategy.h"

#include <cctype>
#include <string>
#include <vector>

#include "core/base/strings.h"

namespace fsdp {

std::string_view to_string(Strategy strategy) {
  switch (strategy) {
    case Strategy::kNoShard:
      return "noshard";
    case Strategy::kZero1:
      return "zero1";
    case Strategy::kZero2:
      return "zero2";
    case Strategy::kZero3:
      return "zero3";
    case Strategy::kHsdp:
      return "hsdp";
    case Strategy::kHfsdp:
      return "hfsdp";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, Strategy strategy) { return os << to_string(strategy); }

Expected<Strategy> parse_strategy(std::string_view text) {
  std::string name(text);
  for (char& c : name) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (name == "noshard" || name == "no-shard" || name == "no_shard" || name == "ddp") {
    return Strategy::kNoShard;
  }
  for (const Strategy s : {Strategy::kZero1, Strategy::kZero2, Strategy::kZero3, Strategy::kHsdp,
                           Strategy::kHfsdp}) {
    if (name == to_string(s)) {
      return s;
    }
  }
  return Error(ErrorCode::kInvalidArgument,
               str_cat("strategy '", text,
                       "' is unknown; expected one of noshard, zero1, zero2, zero3, hsdp, hfsdp"));
}

std::int64_t strategy_mesh_ndim(Strategy strategy) {
  return strategy == Strategy::kHsdp || strategy == Strategy::kHfsdp ? 2 : 1;
}

Expected<Placements> make_strategy_placements(Strategy strategy, const DeviceMesh& mesh,
                                              bool tensor_atomic) {
  const std::int64_t ndim = strategy_mesh_ndim(strategy);
  if (mesh.ndim() != ndim) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(to_string(strategy), " needs a ", ndim, "-axis dp mesh, got the ",
                         mesh.ndim(), "-axis mesh ", to_string(mesh)));
  }
  const bool zero = strategy == Strategy::kZero1 || strategy == Strategy::kZero2 ||
                    strategy == Strategy::kZero3;
  if (tensor_atomic && !zero) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("tensor_atomic applies to zero1, zero2 and zero3, got ",
                         to_string(strategy)));
  }
  const Placement s = tensor_atomic ? Placement::tensor_atomic() : Placement::shard();
  const Placement r = Placement::replicate();
  const Placement p = Placement::partial(ReduceOp::kAvg);
  std::vector<DpAxisRef> axes;
  for (std::int64_t a = 0; a < ndim; ++a) {
    axes.emplace_back(a);
  }
  switch (strategy) {
    case Strategy::kNoShard:
      return Placements::make(mesh, axes, {r}, {p}, {r});
    case Strategy::kZero1:
      return Placements::make(mesh, axes, {r}, {p}, {s});
    case Strategy::kZero2:
      return Placements::make(mesh, axes, {r}, {s}, {s});
    case Strategy::kZero3:
      return Placements::make(mesh, axes, {s}, {s}, {s});
    case Strategy::kHsdp:
      return Placements::make(mesh, axes, {r, s}, {p, s}, {r, s});
    case Strategy::kHfsdp:
      return Placements::make(mesh, axes, {r, s}, {p, s}, {s, s});
  }
  return Error(ErrorCode::kInternal, "unknown strategy");
}

}  // namespace fsdp

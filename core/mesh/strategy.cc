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
  // The recipe's axes: every mesh axis but the tensor- and expert-parallel ones.
  std::vector<std::int64_t> recipe_axes;
  std::vector<std::string> others;
  for (std::int64_t a = 0; a < mesh.ndim(); ++a) {
    const std::string& name = mesh.axis_name(a);
    if (name == kTensorParallelAxis || name == kExpertParallelAxis) {
      others.push_back(name);
    } else {
      recipe_axes.push_back(a);
    }
  }
  if (static_cast<std::int64_t>(recipe_axes.size()) != ndim) {
    return Error(
        ErrorCode::kInvalidArgument,
        str_cat(to_string(strategy), " needs a ", ndim, "-axis dp mesh, got the ",
                recipe_axes.size(), "-axis mesh ", to_string(mesh),
                others.empty() ? "" : str_cat(" (besides ", join(others, ", "), ")"),
                // A tp or ep mesh without dp axes: FSDP over one rank is dp=1.
                recipe_axes.empty() && ndim == 1
                    ? str_cat("; for no data parallelism add dp=1 (dp=1,", to_string(mesh), ")")
                    : ""));
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
  using List = std::vector<Placement>;
  List param;
  List grad;
  List opt;
  switch (strategy) {
    case Strategy::kNoShard:
      param = {r}, grad = {p}, opt = {r};
      break;
    case Strategy::kZero1:
      param = {r}, grad = {p}, opt = {s};
      break;
    case Strategy::kZero2:
      param = {r}, grad = {s}, opt = {s};
      break;
    case Strategy::kZero3:
      param = {s}, grad = {s}, opt = {s};
      break;
    case Strategy::kHsdp:
      param = {r, s}, grad = {p, s}, opt = {r, s};
      break;
    case Strategy::kHfsdp:
      param = {r, s}, grad = {p, s}, opt = {s, s};
      break;
  }
  // The expert-parallel axis is a DP axis of the dense parameters and places them as the
  // recipe's innermost axis does (docs/design/parallelism.md); the tensor-parallel axis is not
  // a DP axis.
  std::vector<DpAxisRef> axes;
  List lists[3];
  std::size_t next = 0;
  for (std::int64_t a = 0; a < mesh.ndim(); ++a) {
    const std::string& name = mesh.axis_name(a);
    if (name == kTensorParallelAxis) {
      continue;
    }
    const std::size_t from =
        name == kExpertParallelAxis ? static_cast<std::size_t>(ndim - 1) : next++;
    axes.emplace_back(a);
    lists[0].push_back(param[from]);
    lists[1].push_back(grad[from]);
    lists[2].push_back(opt[from]);
  }
  return Placements::make(mesh, axes, std::move(lists[0]), std::move(lists[1]),
                          std::move(lists[2]));
}

}  // namespace fsdp

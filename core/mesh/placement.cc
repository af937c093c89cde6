// SPDX-License-Identifier: Apache-2.0
#include "core/mesh/placement.h"

#include <cctype>
#include <charconv>

#include "core/base/check.h"
#include "core/base/strings.h"
#include "core/layout/layout_validation.h"
#include "core/model/param_groups.h"

namespace fsdp {

namespace {

Error invalid(std::string message) {
  return Error(ErrorCode::kInvalidArgument, std::move(message));
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

constexpr std::string_view kAccepted =
    "expected Shard(0), RowAtomic(), BlockAtomic(b), TensorAtomic(), Replicate(), Partial(avg) "
    "or Partial(sum) (or S, TA, R, P(avg), P(sum))";

}  // namespace

std::string_view to_string(ReduceOp op) { return op == ReduceOp::kAvg ? "avg" : "sum"; }

Expected<Placement> Placement::block_atomic(std::int64_t block_size) {
  if (block_size <= 0) {
    return invalid(str_cat("BlockAtomic block size must be positive, got ", block_size));
  }
  return Placement(PlacementKind::kBlockAtomic, block_size, ReduceOp::kAvg);
}

std::int64_t Placement::block_size() const {
  switch (kind_) {
    case PlacementKind::kShard:
    case PlacementKind::kRowAtomic:
      return 1;
    case PlacementKind::kBlockAtomic:
      return block_;
    case PlacementKind::kTensorAtomic:
    case PlacementKind::kReplicate:
    case PlacementKind::kPartial:
      return 0;
  }
  return 0;
}

ReduceOp Placement::reduce_op() const {
  FSDP_CHECK(is_partial()) << "reduce_op() of " << to_string(*this);
  return op_;
}

AxisPlacement Placement::axis_placement() const {
  if (is_replicate()) {
    return AxisPlacement::kReplicate;
  }
  if (is_partial()) {
    return AxisPlacement::kPartial;
  }
  return AxisPlacement::kShard;
}

std::string to_string(const Placement& p) {
  switch (p.kind()) {
    case PlacementKind::kShard:
      return "Shard(0)";
    case PlacementKind::kRowAtomic:
      return "RowAtomic()";
    case PlacementKind::kBlockAtomic:
      return str_cat("BlockAtomic(", p.block_size(), ")");
    case PlacementKind::kTensorAtomic:
      return "TensorAtomic()";
    case PlacementKind::kReplicate:
      return "Replicate()";
    case PlacementKind::kPartial:
      return str_cat("Partial(", to_string(p.reduce_op()), ")");
  }
  return "Unknown()";
}

std::ostream& operator<<(std::ostream& os, const Placement& p) { return os << to_string(p); }

std::string to_string(std::span<const Placement> placements) {
  return str_cat("[", join(placements, ", "), "]");
}

Expected<Placement> parse_placement(std::string_view text) {
  const std::string_view item = trim(text);
  std::string_view name = item;
  std::string_view arg;
  if (const std::size_t open = item.find('('); open != std::string_view::npos) {
    if (item.back() != ')') {
      return invalid(str_cat("placement '", item, "' has an unclosed '('; ", kAccepted));
    }
    name = trim(item.substr(0, open));
    arg = trim(item.substr(open + 1, item.size() - open - 2));
  }
  const std::string kind = lower(name);
  const auto no_arg = [&](Placement p) -> Expected<Placement> {
    if (!arg.empty()) {
      return invalid(str_cat("placement '", item, "' takes no argument, got '", arg, "'"));
    }
    return p;
  };
  if (kind == "s" || kind == "shard") {
    if (arg.empty() || arg == "0") {
      return Placement::shard();
    }
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("placement '", item,
                         "' is not implemented: only dim-0 sharding is supported, "
                         "expected Shard(0)"));
  }
  if (kind == "rowatomic" || kind == "ra") {
    return no_arg(Placement::row_atomic());
  }
  if (kind == "tensoratomic" || kind == "ta") {
    return no_arg(Placement::tensor_atomic());
  }
  if (kind == "r" || kind == "replicate") {
    return no_arg(Placement::replicate());
  }
  if (kind == "blockatomic" || kind == "ba") {
    std::int64_t block = 0;
    const char* end = arg.data() + arg.size();
    const auto [ptr, ec] = std::from_chars(arg.data(), end, block);
    if (arg.empty() || ec != std::errc() || ptr != end) {
      return invalid(str_cat("placement '", item,
                             "' needs an integer block size, expected BlockAtomic(b)"));
    }
    return Placement::block_atomic(block);
  }
  if (kind == "p" || kind == "partial") {
    const std::string op = lower(arg);
    if (op == "avg") {
      return Placement::partial(ReduceOp::kAvg);
    }
    if (op == "sum") {
      return Placement::partial(ReduceOp::kSum);
    }
    return invalid(str_cat("placement '", item,
                           "' needs a reduce op: expected Partial(avg) or Partial(sum)"));
  }
  return invalid(str_cat("placement '", item, "' is unknown; ", kAccepted));
}

Expected<std::vector<Placement>> parse_placement_list(std::string_view text) {
  std::string_view body = trim(text);
  if (!body.empty() && body.front() == '[') {
    if (body.back() != ']') {
      return invalid(str_cat("placement list '", body, "' has an unclosed '['"));
    }
    body = trim(body.substr(1, body.size() - 2));
  }
  std::vector<Placement> out;
  if (body.empty()) {
    return out;
  }
  while (true) {
    const std::size_t comma = body.find(',');
    FSDP_TRY(Placement p, parse_placement(body.substr(0, comma)));
    out.push_back(p);
    if (comma == std::string_view::npos) {
      break;
    }
    body.remove_prefix(comma + 1);
  }
  return out;
}

Placement specialize_placement(const Placement& p, DType group_dtype) {
  if (p.kind() != PlacementKind::kShard) {
    return p;
  }
  if (group_dtype == DType::kFp8) {
    return Placement::block_atomic(kMxfp8BlockSize).value();
  }
  return Placement::row_atomic();
}

Status check_layout_for_placement(const GlobalLayout& layout, const Placement& p,
                                  ShardLayout shard_layout) {
  if (!p.is_shard()) {
    return ok_status();
  }
  if (p.kind() == PlacementKind::kTensorAtomic) {
    return validate_for_tensor_atomic(layout);
  }
  if (shard_layout == ShardLayout::kUnpadded) {
    return validate_for_row_atomic_unpadded(layout, p.block_size());
  }
  return validate_for_row_atomic(layout, p.block_size());
}

}  // namespace fsdp

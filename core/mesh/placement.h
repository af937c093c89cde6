// SPDX-License-Identifier: Apache-2.0
// Placement: how one DP mesh axis holds a DBuffer (fsdp-behaviour.md §3.1): a Shard kind (public Shard(0), or
// the internal RowAtomic / BlockAtomic(b) / TensorAtomic), Replicate, or Partial(avg|sum). An
// immutable value; equality is by kind, plus the block size for BlockAtomic and the reduce op for
// Partial (so Shard(0) != RowAtomic()).
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/expected.h"
#include "core/layout/global_layout.h"
#include "core/layout/local_range.h"
#include "core/layout/shard_layout.h"
#include "core/model/dtype.h"

namespace fsdp {

enum class PlacementKind : std::uint8_t {
  kShard,         // torch Shard(0): the public "sharded" placement, specialised per group
  kRowAtomic,     // rank boundaries never split a row
  kBlockAtomic,   // rank boundaries never split a block of b rows
  kTensorAtomic,  // every tensor wholly on its owner rank; 1-D meshes only
  kReplicate,
  kPartial,
};

enum class ReduceOp : std::uint8_t { kAvg, kSum };

std::string_view to_string(ReduceOp op);  // "avg" / "sum"

class Placement {
 public:
  static Placement shard() { return Placement(PlacementKind::kShard, 0, ReduceOp::kAvg); }
  static Placement row_atomic() { return Placement(PlacementKind::kRowAtomic, 0, ReduceOp::kAvg); }
  // Error (kInvalidArgument) for block_size <= 0, as the reference's ValueError.
  static Expected<Placement> block_atomic(std::int64_t block_size);
  static Placement tensor_atomic() {
    return Placement(PlacementKind::kTensorAtomic, 0, ReduceOp::kAvg);
  }
  static Placement replicate() { return Placement(PlacementKind::kReplicate, 0, ReduceOp::kAvg); }
  static Placement partial(ReduceOp op) { return Placement(PlacementKind::kPartial, 0, op); }

  PlacementKind kind() const { return kind_; }
  // Any of Shard(0), RowAtomic, BlockAtomic, TensorAtomic.
  bool is_shard() const {
    return kind_ != PlacementKind::kReplicate && kind_ != PlacementKind::kPartial;
  }
  bool is_replicate() const { return kind_ == PlacementKind::kReplicate; }
  bool is_partial() const { return kind_ == PlacementKind::kPartial; }
  // The rows kept together by a row-based Shard: b for BlockAtomic(b), 1 for RowAtomic and
  // Shard(0); 0 for every other kind.
  std::int64_t block_size() const;
  // The reduce op of a Partial placement; FSDP_CHECKs is_partial().
  ReduceOp reduce_op() const;
  // The view get_local_range needs: every Shard kind is kShard.
  AxisPlacement axis_placement() const;

  friend bool operator==(const Placement&, const Placement&) = default;

 private:
  Placement(PlacementKind kind, std::int64_t block, ReduceOp op)
      : kind_(kind), block_(block), op_(op) {}
  PlacementKind kind_;
  std::int64_t block_;  // BlockAtomic only; 0 otherwise so that defaulted == is by kind
  ReduceOp op_;         // Partial only; kAvg otherwise
};

// "Shard(0)", "RowAtomic()", "BlockAtomic(32)", "TensorAtomic()", "Replicate()", "Partial(avg)".
std::string to_string(const Placement& p);
std::ostream& operator<<(std::ostream& os, const Placement& p);
// "[Replicate(), Shard(0)]".
std::string to_string(std::span<const Placement> placements);

// Reads the to_string forms and the short forms of the spec's tables; the kind name is
// case-insensitive and "()" may be left out: S | Shard | Shard(0), RowAtomic, BlockAtomic(b),
// TA | TensorAtomic, R | Replicate, P(avg) | P(sum) | Partial(avg) | Partial(sum). A bare "P" or
// "Partial" is rejected (torch defaults to sum, the recipes use avg: say which). Shard(d) with
// d != 0 is kFailedPrecondition (the reference's NotImplementedError).
Expected<Placement> parse_placement(std::string_view text);
// A comma-separated list, optionally in brackets: "[R, S]", "P(avg),S".
Expected<std::vector<Placement>> parse_placement_list(std::string_view text);

// §3.3 _specialize_placements for one parameter group: Shard(0) becomes RowAtomic() for fp32,
// bf16 and fp16 groups and BlockAtomic(32) for fp8 (MXFP8) groups; every other placement is
// returned unchanged.
Placement specialize_placement(const Placement& p, DType group_dtype);

// §3.2 layout check of one DBuffer placement: Replicate/Partial need nothing; TensorAtomic ->
// validate_for_tensor_atomic; the row-based Shards -> validate_for_row_atomic (PADDED) or
// validate_for_row_atomic_unpadded (UNPADDED) with their block_size().
Status check_layout_for_placement(const GlobalLayout& layout, const Placement& p,
                                  ShardLayout shard_layout);

}  // namespace fsdp

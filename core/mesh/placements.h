// SPDX-License-Identifier: Apache-2.0
// Placements: the public Placements(dp_axes, parameter, gradient, optimizer) of fully_shard
// (fsdp-behaviour.md §3.3), validated against a DeviceMesh: which mesh axes form the DP mesh and how the
// parameter (model weight), gradient (main grad while accumulating) and optimizer (main weight,
// optimizer state, finalised main grad) DBuffers sit on each of them. Immutable; built only by
// Placements::make. Local ranges follow §1.5.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/base/expected.h"
#include "core/layout/global_layout.h"
#include "core/layout/local_range.h"
#include "core/layout/shard_layout.h"
#include "core/mesh/device_mesh.h"
#include "core/mesh/placement.h"
#include "core/model/dtype.h"

namespace fsdp {

// The mesh-axis names with a parallel meaning (docs/design/parallelism.md): "tp", the one axis
// that may stay out of dp_axes (its ranks hold tensor-parallel slices of one replica), and "ep",
// a DP axis of the dense parameters over which the experts are split instead of replicated.
inline constexpr std::string_view kTensorParallelAxis = "tp";
inline constexpr std::string_view kExpertParallelAxis = "ep";

// A DP axis named by mesh-axis index (negative values wrap, as in Python) or by mesh-axis name.
using DpAxisRef = std::variant<std::int64_t, std::string>;

std::string to_string(const DpAxisRef& axis);  // "1" or "dp_inner"

enum class BufferRole : std::uint8_t { kParameter, kGradient, kOptimizer };

std::string_view to_string(BufferRole role);  // "parameter", "gradient", "optimizer"

class Placements {
 public:
  // Checks, in this order (each failure is one line naming the list, the dp axis and the values):
  //  1. each list has len(dp_axes) entries: "expected 2 gradient placements (one per dp axis),
  //     got 1" (kInvalidArgument; the reference's __post_init__).
  //  2. dp_axes (the reference's _validate_dp_axes): at least one; an index outside
  //     [-ndim, ndim) (kOutOfRange) or an unknown name (kInvalidArgument); duplicates ("must be
  //     distinct"); not ascending ("mesh-axis order"); the tensor-parallel axis "tp" among them
  //     (kInvalidArgument); a mesh axis left out that is neither "tp" nor the expert-parallel
  //     axis "ep" (kFailedPrecondition "not implemented"; docs/design/parallelism.md).
  //  3. DBuffer validity per list (§3.2): Shard axes form a suffix; TensorAtomic only on a 1-D DP
  //     mesh (kFailedPrecondition "not implemented"). Project rule: parameter and optimizer
  //     placements are Shard or Replicate, never Partial.
  //  4. Shard kinds across the three lists agree (§3.3 "cannot be mixed"): TensorAtomic with any
  //     other Shard kind, or RowAtomic with BlockAtomic(b), or BlockAtomic(a) with
  //     BlockAtomic(b != a). Shard(0) goes with RowAtomic or one BlockAtomic (it is specialised
  //     per group).
  //  5. the optimizer range lies inside the parameter range on every rank (§3.3, DBuffer.view):
  //     every DP axis of size > 1 that the parameter shards is sharded by the optimizer too.
  //  6. each redistribute the runtime performs is one DBuffer.redistribute supports (§3.2;
  //     kFailedPrecondition otherwise): gradient reduction Partial(avg)^n -> gradient (§4.6c),
  //     finalisation gradient -> optimizer (§4.6f), post-step sync optimizer -> parameter
  //     (§4.5.1), unshard parameter -> Replicate^n (§4.5.2).
  static Expected<Placements> make(const DeviceMesh& mesh, std::vector<DpAxisRef> dp_axes,
                                   std::vector<Placement> parameter,
                                   std::vector<Placement> gradient,
                                   std::vector<Placement> optimizer);

  const DeviceMesh& mesh() const { return mesh_; }
  // Resolved mesh-axis indices, ascending.
  const std::vector<std::int64_t>& dp_axes() const { return dp_axes_; }
  std::int64_t num_dp_axes() const { return static_cast<std::int64_t>(dp_axes_.size()); }
  // Ranks in the DP mesh: the product of the DP axis sizes (the dp a group layout is built for).
  std::int64_t dp_size() const { return dp_size_; }

  const std::vector<Placement>& parameter() const { return parameter_; }
  const std::vector<Placement>& gradient() const { return gradient_; }
  const std::vector<Placement>& optimizer() const { return optimizer_; }
  const std::vector<Placement>& of(BufferRole role) const;
  std::vector<AxisPlacement> axis_placements(BufferRole role) const;

  // Any TensorAtomic placement (then every Shard is TensorAtomic).
  bool is_tensor_atomic() const;
  // Every axis of `role` is Replicate (ZeRO-1/2 and no-shard parameters: compute reads the model
  // weight directly, no unsharded buffer).
  bool is_replicated(BufferRole role) const;
  // Product of the sizes of the DP axes `role` shards; 1 when none.
  std::int64_t num_shards(BufferRole role) const;

  // `rank`'s coordinate on the DP axes (sizes and local ranks of those axes only). kOutOfRange
  // for a rank outside the mesh.
  Expected<MeshCoordinate> dp_coordinate(std::int64_t rank) const;
  // §1.5 local range of `rank` for `role` in a group laid out by `layout` (built for dp_size()
  // segments). Errors: a bad rank; the get_local_range errors (dp_size not divisible).
  Expected<Range> local_range(BufferRole role, const GlobalLayout& layout,
                              std::int64_t rank) const;

  // The placements without DP axis `mesh_axis` (its entry removed from dp_axes and from each
  // list), validated again by make: the expert-data-parallel placements of an expert-parallel
  // mesh (docs/design/parallelism.md). Errors: `mesh_axis` is no DP axis (kInvalidArgument), it
  // is the only one, or make's checks fail on what is left.
  Expected<Placements> without_dp_axis(std::int64_t mesh_axis) const;

  // §3.3 per-group specialisation: specialize_placement on every entry, then the checks of make
  // again (an fp8 group with both Shard(0) and RowAtomic() fails check 4).
  Expected<Placements> specialize(DType group_dtype) const;
  // §3.2 layout check of every distinct Shard placement of the three lists.
  Status check_layout(const GlobalLayout& layout, ShardLayout shard_layout) const;

  friend bool operator==(const Placements&, const Placements&) = default;

 private:
  explicit Placements(DeviceMesh mesh) : mesh_(std::move(mesh)) {}
  DeviceMesh mesh_;
  std::vector<std::int64_t> dp_axes_;
  std::int64_t dp_size_ = 1;
  std::vector<Placement> parameter_;
  std::vector<Placement> gradient_;
  std::vector<Placement> optimizer_;
};

// Partial(op) on each of n axes: the placements of the partial-grad buffer (§4.6 step 1).
std::vector<Placement> all_partial(std::int64_t n, ReduceOp op);
// Replicate() on each of n axes: the unsharded buffer.
std::vector<Placement> all_replicate(std::int64_t n);

// "dp_axes=[dp_outer, dp_inner] parameter=[Replicate(), Shard(0)] gradient=[...] optimizer=[...]"
std::string to_string(const Placements& placements);
std::ostream& operator<<(std::ostream& os, const Placements& placements);

}  // namespace fsdp

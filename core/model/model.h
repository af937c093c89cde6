// SPDX-License-Identifier: Apache-2.0
// Model: a tree of FSDP units stored flat in forward (DFS pre-order) order: every unit's parent
// comes before it, so the vector is a value type and the forward order is the vector order. Built
// by Model::make, which checks the tree, unique names and int64 totals.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/base/expected.h"
#include "core/model/unit.h"

namespace fsdp {

// The deepest unit a model may have (root-level units have depth 1). Traversals of the tree
// recurse once per level, so the limit bounds their stack (issue 16: a 12,000-deep parent chain
// overflowed it); real models nest a few levels.
inline constexpr std::int64_t kMaxUnitDepth = 1000;

class Model {
 public:
  // Errors (kInvalidArgument unless noted): bad name; no units; two units with one name; a parent
  // that is not an earlier unit; a unit deeper than kMaxUnitDepth; one parameter name in two
  // units; totals beyond int64 (kOutOfRange). Each message names the model and the unit.
  static Expected<Model> make(std::string name, std::vector<Unit> units);

  const std::string& name() const { return name_; }
  const std::vector<Unit>& units() const { return units_; }
  std::int64_t num_units() const { return static_cast<std::int64_t>(units_.size()); }
  // Index of the unit with this name, or -1.
  std::int64_t find_unit(std::string_view name) const;
  // Indices of the units whose parent is `unit` (kNoParent: the root-level units), in order.
  // O(number of children): an index built by make.
  std::span<const std::int32_t> children(std::int32_t unit) const;

  // Totals over all units.
  std::int64_t num_parameters() const { return num_parameters_; }
  std::int64_t num_trainable_parameters() const { return num_trainable_parameters_; }
  std::int64_t param_bytes() const { return param_bytes_; }
  const UnitFlops& flops() const { return flops_; }
  const UnitActivations& activations() const { return activations_; }

  // Sum over units of the forward FLOPs per token at this sequence length; kOutOfRange on
  // overflow.
  Expected<std::int64_t> forward_flops_per_token(std::int64_t seq_len) const;
  // Forward plus backward: 3 x forward (the "6 N per token" rule for the matmul part).
  Expected<std::int64_t> training_flops_per_token(std::int64_t seq_len) const;

  friend bool operator==(const Model&, const Model&) = default;

 private:
  Model() = default;
  std::string name_;
  std::vector<Unit> units_;
  // Children of unit u at child_list_[child_begin_[u + 1], child_begin_[u + 2]); the root-level
  // units at [child_begin_[0], child_begin_[1]).
  std::vector<std::int32_t> child_begin_;
  std::vector<std::int32_t> child_list_;
  std::int64_t num_parameters_ = 0;
  std::int64_t num_trainable_parameters_ = 0;
  std::int64_t param_bytes_ = 0;
  UnitFlops flops_;
  UnitActivations activations_;
};

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
#include "core/model/model.h"

#include <unordered_map>

#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/model/internal/names.h"

namespace fsdp {

Expected<Model> Model::make(std::string name, std::vector<Unit> units) {
  FSDP_RETURN_IF_ERROR(internal::check_name("model", name));
  const auto fail = [&name](ErrorCode code, const std::string& what) {
    return Error(code, str_cat("model '", name, "': ", what));
  };
  if (units.empty()) {
    return fail(ErrorCode::kInvalidArgument, "units: expected at least one unit, got none");
  }
  if (units.size() > static_cast<std::size_t>(INT32_MAX)) {
    return fail(ErrorCode::kOutOfRange,
                str_cat("units: expected at most ", INT32_MAX, ", got ", units.size()));
  }
  std::unordered_map<std::string_view, std::size_t> unit_index;
  std::unordered_map<std::string_view, std::size_t> param_owner;
  Model m;
  const auto overflow = [&](const Unit& u, std::string_view what) {
    return fail(ErrorCode::kOutOfRange,
                str_cat("unit '", u.name(), "': total ", what,
                        ": expected a value that fits int64, got an overflow"));
  };
  for (std::size_t i = 0; i < units.size(); ++i) {
    const Unit& u = units[i];
    if (const auto [it, inserted] = unit_index.emplace(u.name(), i); !inserted) {
      return fail(ErrorCode::kInvalidArgument,
                  str_cat("unit names: expected unique names, got '", u.name(),
                          "' at indices ", it->second, " and ", i));
    }
    if (u.parent() != Unit::kNoParent &&
        (u.parent() < 0 || static_cast<std::size_t>(u.parent()) >= i)) {
      return fail(ErrorCode::kInvalidArgument,
                  str_cat("unit '", u.name(), "' parent: expected -1 or an earlier unit index in [0, ",
                          i, "), got ", u.parent()));
    }
    for (const Param& p : u.params()) {
      if (const auto [it, inserted] = param_owner.emplace(p.name(), i); !inserted) {
        return fail(ErrorCode::kInvalidArgument,
                    str_cat("parameter names: expected unique names, got '", p.name(),
                            "' in units '", units[it->second].name(), "' and '", u.name(), "'"));
      }
      if (p.requires_grad() &&
          !checked_add(m.num_trainable_parameters_, p.numel(), &m.num_trainable_parameters_)) {
        return overflow(u, "trainable parameters");
      }
    }
    if (!checked_add(m.num_parameters_, u.num_parameters(), &m.num_parameters_)) {
      return overflow(u, "parameters");
    }
    if (!checked_add(m.param_bytes_, u.param_bytes(), &m.param_bytes_)) {
      return overflow(u, "parameter bytes");
    }
    if (!checked_add(m.flops_.matmul, u.flops().matmul, &m.flops_.matmul) ||
        !checked_add(m.flops_.attention_per_seq, u.flops().attention_per_seq,
                     &m.flops_.attention_per_seq)) {
      return overflow(u, "FLOPs");
    }
    if (!checked_add(m.activations_.stored, u.activations().stored, &m.activations_.stored) ||
        !checked_add(m.activations_.recompute, u.activations().recompute,
                     &m.activations_.recompute)) {
      return overflow(u, "activation bytes");
    }
  }
  unit_index.clear();
  param_owner.clear();
  // Depths (parents come first) and the children index, both linear.
  const std::size_t n = units.size();
  std::vector<std::int32_t> depth(n, 1);
  m.child_begin_.assign(n + 2, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t parent = units[i].parent();
    if (parent != Unit::kNoParent) {
      depth[i] = depth[static_cast<std::size_t>(parent)] + 1;
      if (depth[i] > kMaxUnitDepth) {
        return fail(ErrorCode::kInvalidArgument,
                    str_cat("unit '", units[i].name(), "' is nested ", depth[i],
                            " levels deep; expected at most ", kMaxUnitDepth));
      }
    }
    ++m.child_begin_[static_cast<std::size_t>(parent + 2)];
  }
  for (std::size_t k = 1; k < m.child_begin_.size(); ++k) {
    m.child_begin_[k] += m.child_begin_[k - 1];
  }
  m.child_list_.resize(n);
  std::vector<std::int32_t> fill(m.child_begin_.begin(), m.child_begin_.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {
    m.child_list_[static_cast<std::size_t>(fill[static_cast<std::size_t>(units[i].parent() + 1)]++)] =
        static_cast<std::int32_t>(i);
  }
  m.name_ = std::move(name);
  m.units_ = std::move(units);
  return m;
}

std::int64_t Model::find_unit(std::string_view name) const {
  for (std::size_t i = 0; i < units_.size(); ++i) {
    if (units_[i].name() == name) {
      return static_cast<std::int64_t>(i);
    }
  }
  return -1;
}

std::span<const std::int32_t> Model::children(std::int32_t unit) const {
  if (unit < Unit::kNoParent || unit >= num_units()) {
    return {};
  }
  const std::size_t k = static_cast<std::size_t>(unit + 1);
  return std::span<const std::int32_t>(child_list_)
      .subspan(static_cast<std::size_t>(child_begin_[k]),
               static_cast<std::size_t>(child_begin_[k + 1] - child_begin_[k]));
}

Expected<std::int64_t> Model::forward_flops_per_token(std::int64_t seq_len) const {
  auto r = fsdp::forward_flops_per_token(flops_, seq_len);
  if (!r) {
    return r.error().with_context(str_cat("model '", name_, "'"));
  }
  return r;
}

Expected<std::int64_t> Model::training_flops_per_token(std::int64_t seq_len) const {
  FSDP_TRY(const std::int64_t forward, forward_flops_per_token(seq_len));
  std::int64_t total = 0;
  if (!checked_mul(forward, 3, &total)) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("model '", name_, "': training FLOPs per token: expected a value that ",
                         "fits int64, got 3 x ", forward));
  }
  return total;
}

}  // namespace fsdp

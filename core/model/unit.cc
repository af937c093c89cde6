// SPDX-License-Identifier: Apache-2.0
#include "core/model/unit.h"

#include <iterator>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/model/internal/names.h"

namespace fsdp {

Expected<std::int64_t> forward_flops_per_token(const UnitFlops& flops, std::int64_t seq_len) {
  if (seq_len < 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("sequence length: expected a non-negative integer, got ", seq_len));
  }
  std::int64_t attention = 0;
  std::int64_t total = 0;
  if (!checked_mul(flops.attention_per_seq, seq_len, &attention) ||
      !checked_add(flops.matmul, attention, &total)) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("forward FLOPs per token at sequence length ", seq_len,
                         ": expected a value that fits int64, got matmul ", flops.matmul,
                         " + attention ", flops.attention_per_seq, " x ", seq_len));
  }
  return total;
}

Expected<Unit> Unit::make(std::string name, std::int32_t parent, std::vector<Param> params,
                          UnitFlops flops, UnitActivations activations, UnitWork work) {
  FSDP_RETURN_IF_ERROR(internal::check_name("unit", name));
  const auto fail = [&name](ErrorCode code, const std::string& what) {
    return Error(code, str_cat("unit '", name, "': ", what));
  };
  if (parent < kNoParent) {
    return fail(ErrorCode::kInvalidArgument,
                str_cat("parent: expected -1 (none) or a unit index, got ", parent));
  }
  const std::pair<const char*, std::int64_t> figures[] = {
      {"flops matmul", flops.matmul},
      {"flops attention_per_seq", flops.attention_per_seq},
      {"activation bytes stored", activations.stored},
      {"activation bytes recompute", activations.recompute},
      {"activation loss_logits", activations.loss_logits},
  };
  std::vector<std::pair<std::string, std::int64_t>> checks(std::begin(figures), std::end(figures));
  for (const auto& [mode, f] : {std::pair{"selective_op", &activations.selective_op},
                                std::pair{"core_attention", &activations.core_attention}}) {
    if (f->has_value()) {
      checks.emplace_back(str_cat("activation bytes ", mode, " kept"), (*f)->kept);
      checks.emplace_back(str_cat("activation bytes ", mode, " transient"), (*f)->transient);
      checks.emplace_back(str_cat("activation bytes ", mode, " unread"), (*f)->unread);
      checks.emplace_back(str_cat("activation ", mode, " recompute flops matmul"),
                          (*f)->flops.matmul);
      checks.emplace_back(str_cat("activation ", mode, " recompute flops attention_per_seq"),
                          (*f)->flops.attention_per_seq);
    }
  }
  for (const auto& [what, value] : checks) {
    if (value < 0) {
      return fail(ErrorCode::kInvalidArgument,
                  str_cat(what, ": expected a non-negative integer, got ", value));
    }
  }
  for (const auto& [mode, f] : {std::pair{"selective_op", &activations.selective_op},
                                std::pair{"core_attention", &activations.core_attention}}) {
    if (f->has_value() && (*f)->unread > (*f)->kept) {
      return fail(ErrorCode::kInvalidArgument,
                  str_cat("activation bytes ", mode, " unread: expected at most kept (", (*f)->kept,
                          "), got ", (*f)->unread));
    }
  }
  FSDP_RETURN_IF_ERROR(validate_unit_work(work, str_cat("unit '", name, "'")));
  std::unordered_set<std::string_view> seen;
  std::int64_t num_parameters = 0;
  std::int64_t param_bytes = 0;
  for (const Param& p : params) {
    if (!seen.insert(p.name()).second) {
      return fail(ErrorCode::kInvalidArgument,
                  str_cat("parameter names: expected unique names, got '", p.name(), "' twice"));
    }
    if (!checked_add(num_parameters, p.numel(), &num_parameters) ||
        !checked_add(param_bytes, p.bytes(), &param_bytes)) {
      return fail(ErrorCode::kOutOfRange,
                  str_cat("parameter count: expected a total that fits int64, got an overflow at '",
                          p.name(), "'"));
    }
  }
  Unit u;
  u.name_ = std::move(name);
  u.parent_ = parent;
  u.params_ = std::move(params);
  u.flops_ = flops;
  u.activations_ = activations;
  u.work_ = std::move(work);
  u.num_parameters_ = num_parameters;
  u.param_bytes_ = param_bytes;
  return u;
}

Expected<std::int64_t> Unit::forward_flops_per_token(std::int64_t seq_len) const {
  auto r = fsdp::forward_flops_per_token(flops_, seq_len);
  if (!r) {
    return r.error().with_context(str_cat("unit '", name_, "'"));
  }
  return r;
}

Expected<std::int64_t> Unit::backward_flops_per_token(std::int64_t seq_len) const {
  FSDP_TRY(const std::int64_t forward, forward_flops_per_token(seq_len));
  std::int64_t backward = 0;
  if (!checked_mul(forward, 2, &backward)) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("unit '", name_, "': backward FLOPs per token: expected a value that ",
                         "fits int64, got 2 x ", forward));
  }
  return backward;
}

}  // namespace fsdp

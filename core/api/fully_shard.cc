// SPDX-License-Identifier: Apache-2.0
#include "core/api/fully_shard.h"

#include <string>
#include <utility>
#include <vector>

#include "core/api/internal/context_state.h"
#include "core/base/strings.h"
#include "core/policy/config_options.h"

namespace fsdp {
namespace {

// The reference builds parameter groups per module, each with its own mesh and policies; the IR
// has one FsdpConfig per run, so a later call must repeat the first call's arguments.
Status check_same_config(const internal::FsdpContextState& s, const FsdpConfig& first,
                         const FsdpConfig& next, const std::string& prefix) {
  const std::string& first_module =
      s.modules.units()[static_cast<std::size_t>(s.wrap_order.front())].name();
  const auto differs = [&](std::string_view what, const auto& expected, const auto& actual) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat(prefix, what, ": expected ", expected, " (as for '", first_module,
                         "'), got ", actual,
                         "; not implemented: one FsdpConfig per context, so every fully_shard "
                         "call takes the same arguments"));
  };
  if (next.mesh() != first.mesh()) {
    return differs("mesh", to_string(first.mesh()), to_string(next.mesh()));
  }
  if (next.placements() != first.placements()) {
    return differs("placements", to_string(first.placements()), to_string(next.placements()));
  }
  if (next.mixed_precision() != first.mixed_precision()) {
    return differs("mixed_precision_policy", to_string(first.mixed_precision()),
                   to_string(next.mixed_precision()));
  }
  if (next.grad_scale() != first.grad_scale()) {
    return differs("grad_scale", first.grad_scale(), next.grad_scale());
  }
  if (next.schedule() != first.schedule()) {
    return differs("schedule_policy", to_string(first.schedule()), to_string(next.schedule()));
  }
  if (next.shard_layout() != first.shard_layout()) {
    return differs("shard_layout", to_string(first.shard_layout()),
                   to_string(next.shard_layout()));
  }
  return ok_status();
}

// §4.1.2d: the modules whose parameters `module` takes: its subtree, not descending into
// wrapped modules. A parameter already owned (an ancestor was wrapped first) is an error.
Expected<std::vector<std::int32_t>> claim_modules(const internal::FsdpContextState& s,
                                                  std::int32_t module, const std::string& prefix) {
  std::vector<std::int32_t> claimed;
  std::vector<std::int32_t> stack{module};
  while (!stack.empty()) {
    const std::int32_t m = stack.back();
    stack.pop_back();
    const auto mi = static_cast<std::size_t>(m);
    const Unit& unit = s.modules.units()[mi];
    if (const std::int32_t owner = s.param_owner[mi]; owner >= 0 && !unit.params().empty()) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(prefix, "parameter '", unit.params().front().name(), "' of module '",
                           unit.name(), "': expected an unowned parameter, got one owned by '",
                           s.modules.units()[static_cast<std::size_t>(owner)].name(),
                           "', wrapped earlier (wrap modules before their ancestors)"));
    }
    claimed.push_back(m);
    const auto& kids = s.children[mi];
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) {
      if (!s.wrapped[static_cast<std::size_t>(*it)]) {
        stack.push_back(*it);
      }
    }
  }
  return claimed;
}

// Module names come from the caller; a control byte would break the one-line message (valid
// module names have none, so such a name is unknown anyway).
std::string error_prefix(std::string_view module) {
  std::string name(module.substr(0, 200));
  for (char& c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      c = '?';
    }
  }
  return str_cat("fully_shard('", name, "'): ");
}

Error no_scope_error(std::string_view module) {
  return Error(ErrorCode::kFailedPrecondition,
               str_cat(error_prefix(module),
                       "must run inside fully_shard_context: expected an active scope, got none"));
}

}  // namespace

Status fully_shard(FsdpContext& context, std::string_view module, const DeviceMesh& mesh,
                   const Placements& placements, const MixedPrecisionPolicy& mixed_precision_policy,
                   double grad_scale, const SchedulePolicy& schedule_policy,
                   ShardLayout shard_layout) {
  const std::string prefix = error_prefix(module);
  FsdpContext* current = current_fully_shard_context();
  if (current == nullptr) {
    return no_scope_error(module);
  }
  internal::FsdpContextState& s = internal::context_state(context);
  if (current != &context) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat(prefix, "must run inside fully_shard_context of this context: expected "
                                 "the scope of model '",
                         s.modules.name(), "', got the scope of model '",
                         current->modules().name(), "'"));
  }
  const std::int64_t index = s.modules.find_unit(module);
  if (index < 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(prefix, "module: expected one of the ", s.modules.num_units(),
                         " modules of model '", s.modules.name(), "', got an unknown name"));
  }
  const auto mi = static_cast<std::size_t>(index);
  if (s.wrapped[mi]) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(prefix, "expected a module not yet wrapped, got one already wrapped by "
                                 "fully_shard"));
  }
  // One microbatch: FsdpContext::config() counts the step's microbatch scopes.
  auto config = assemble_config(ConfigOptions{
      .mesh = mesh,
      .placements = placements,
      .shard_layout = shard_layout,
      .block_size = s.options.block_size,
      .microbatches = 1,
      .grad_scale = grad_scale,
      .recompute = s.options.recompute ? RecomputePolicy::full_all_units() : RecomputePolicy{},
      .mixed_precision = mixed_precision_policy,
      .optimizer = s.options.optimizer,
      .schedule = schedule_policy});
  if (!config) {
    return config.error().with_context(prefix.substr(0, prefix.size() - 2));
  }
  if (s.first_config.has_value()) {
    FSDP_RETURN_IF_ERROR(check_same_config(s, *s.first_config, *config, prefix));
  }
  FSDP_TRY(const std::vector<std::int32_t> claimed,
           claim_modules(s, static_cast<std::int32_t>(index), prefix));
  for (std::int32_t m : claimed) {
    s.param_owner[static_cast<std::size_t>(m)] = static_cast<std::int32_t>(index);
  }
  s.wrapped[mi] = true;
  s.wrap_order.push_back(static_cast<std::int32_t>(index));
  if (!s.first_config.has_value()) {
    s.first_config = std::move(config).value();
  }
  return ok_status();
}

Status fully_shard(std::string_view module, const DeviceMesh& mesh, const Placements& placements,
                   const MixedPrecisionPolicy& mixed_precision_policy, double grad_scale,
                   const SchedulePolicy& schedule_policy, ShardLayout shard_layout) {
  FsdpContext* current = current_fully_shard_context();
  if (current == nullptr) {
    return no_scope_error(module);
  }
  return fully_shard(*current, module, mesh, placements, mixed_precision_policy, grad_scale,
                     schedule_policy, shard_layout);
}

}  // namespace fsdp

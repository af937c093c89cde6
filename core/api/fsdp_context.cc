// SPDX-License-Identifier: Apache-2.0
#include "core/api/fsdp_context.h"

#include <exception>
#include <utility>

#include "core/api/internal/context_state.h"
#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/policy/config_options.h"

namespace fsdp {
namespace {

// The reference keeps the active scope in a context variable; a thread-local pointer is the
// C++ equivalent (each thread sees only the scopes it opened).
thread_local FsdpContext* g_current_context = nullptr;

Error context_error(const internal::FsdpContextState& s, ErrorCode code, const std::string& what) {
  return Error(code, str_cat("fsdp context of model '", s.modules.name(), "': ", what));
}

// Why the context cannot answer yet; a value only when it is finalised.
Status require_finalized(const internal::FsdpContextState& s) {
  if (s.finalized) {
    return ok_status();
  }
  using internal::ScopeHistory;
  switch (s.history) {
    case ScopeHistory::kNeverOpened:
      return context_error(s, ErrorCode::kFailedPrecondition,
                           "expected a finalised context, got one never opened by "
                           "fully_shard_context");
    case ScopeHistory::kOpen:
      return context_error(s, ErrorCode::kFailedPrecondition,
                           "expected a finalised context, got one whose fully_shard_context "
                           "scope is still open (exit it first)");
    case ScopeHistory::kUnwound:
      return context_error(s, ErrorCode::kFailedPrecondition,
                           "expected a finalised context, got one whose fully_shard_context "
                           "scope exited by an exception");
    case ScopeHistory::kFinalizeFailed:
      break;
  }
  FSDP_CHECK(s.finalize_error.has_value());
  return s.finalize_error->with_context("fully_shard_context finalisation");
}

std::vector<std::string> unit_names(const Model& model, const std::vector<std::int32_t>& order) {
  std::vector<std::string> out;
  out.reserve(order.size());
  for (std::int32_t u : order) {
    out.push_back(model.units()[static_cast<std::size_t>(u)].name());
  }
  return out;
}

void forward_visit(const std::vector<std::vector<std::int32_t>>& children, std::int32_t u,
                   std::vector<std::int32_t>* out) {
  out->push_back(u);
  for (std::int32_t c : children[static_cast<std::size_t>(u)]) {
    forward_visit(children, c, out);
  }
}

void backward_visit(const std::vector<std::vector<std::int32_t>>& children, std::int32_t u,
                    std::vector<std::int32_t>* out) {
  out->push_back(u);
  const auto& kids = children[static_cast<std::size_t>(u)];
  for (auto it = kids.rbegin(); it != kids.rend(); ++it) {
    backward_visit(children, *it, out);
  }
}

// Children lists of a model's tree; index units.size() holds the roots.
std::vector<std::vector<std::int32_t>> children_of(const Model& model) {
  std::vector<std::vector<std::int32_t>> out(model.units().size() + 1);
  for (std::size_t i = 0; i < model.units().size(); ++i) {
    const std::int32_t parent = model.units()[i].parent();
    const std::size_t slot =
        parent == Unit::kNoParent ? model.units().size() : static_cast<std::size_t>(parent);
    out[slot].push_back(static_cast<std::int32_t>(i));
  }
  return out;
}

bool carries_work(const Unit& u) {
  return !u.params().empty() || u.flops() != UnitFlops{} || u.activations() != UnitActivations{};
}

}  // namespace

namespace internal {

FsdpContextState::FsdpContextState(Model m, Workload w, FsdpContextOptions o)
    : modules(std::move(m)),
      workload(w),
      options(std::move(o)),
      wrapped(modules.units().size(), false),
      param_owner(modules.units().size(), -1) {
  children = children_of(modules);
}

FsdpContextState& context_state(FsdpContext& context) { return *context.state_; }
const FsdpContextState& context_state(const FsdpContext& context) { return *context.state_; }

// The reference's finalisation (§4.1.3) plus the unit tree of the IR: every module belongs to
// its innermost wrapped ancestor-or-self. fully_shard has already rejected the call orders under
// which the reference would give a parameter to an outer module, so this rule is exact.
Status finalize(FsdpContextState& s) {
  if (s.wrap_order.empty()) {
    return context_error(s, ErrorCode::kFailedPrecondition,
                         "expected at least one fully_shard call before the fully_shard_context "
                         "scope ends, got none");
  }
  const std::vector<Unit>& modules = s.modules.units();
  const std::size_t n = modules.size();
  std::vector<std::int32_t> owner(n, -1);  // module -> owning wrapped module
  std::vector<std::int32_t> unit_of(n, -1);  // wrapped module -> unit index
  std::int32_t num_units = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t parent = modules[i].parent();
    if (s.wrapped[i]) {
      owner[i] = static_cast<std::int32_t>(i);
      unit_of[i] = num_units++;
    } else if (parent != Unit::kNoParent) {
      owner[i] = owner[static_cast<std::size_t>(parent)];
    }
    if (owner[i] < 0 && carries_work(modules[i])) {
      return context_error(
          s, ErrorCode::kFailedPrecondition,
          str_cat("module '", modules[i].name(), "' (", modules[i].params().size(),
                  " parameters, ", modules[i].flops().matmul,
                  " matmul FLOPs per token): expected it or an ancestor to be wrapped by "
                  "fully_shard, got none wrapped (the reference leaves such parameters "
                  "unsharded and unreduced, which the schedule IR does not model)"));
    }
  }
  // Gather each unit's modules in module order (DFS pre-order for models in forward order).
  std::vector<std::vector<Param>> params(static_cast<std::size_t>(num_units));
  std::vector<UnitFlops> flops(static_cast<std::size_t>(num_units));
  std::vector<UnitActivations> acts(static_cast<std::size_t>(num_units));
  for (std::size_t i = 0; i < n; ++i) {
    if (owner[i] < 0) {
      continue;
    }
    const auto u = static_cast<std::size_t>(unit_of[static_cast<std::size_t>(owner[i])]);
    const Unit& m = modules[i];
    params[u].insert(params[u].end(), m.params().begin(), m.params().end());
    if (!checked_add(flops[u].matmul, m.flops().matmul, &flops[u].matmul) ||
        !checked_add(flops[u].attention_per_seq, m.flops().attention_per_seq,
                     &flops[u].attention_per_seq) ||
        !checked_add(acts[u].stored, m.activations().stored, &acts[u].stored) ||
        !checked_add(acts[u].recompute, m.activations().recompute, &acts[u].recompute)) {
      return context_error(
          s, ErrorCode::kOutOfRange,
          str_cat("unit '", modules[static_cast<std::size_t>(owner[i])].name(),
                  "': FLOPs or activation bytes: expected totals that fit int64, got an "
                  "overflow at module '", m.name(), "'"));
    }
  }
  std::vector<Unit> units;
  units.reserve(static_cast<std::size_t>(num_units));
  for (std::size_t i = 0; i < n; ++i) {
    if (!s.wrapped[i]) {
      continue;
    }
    const std::int32_t parent = modules[i].parent();
    const std::int32_t wrapped_parent =
        parent == Unit::kNoParent ? -1 : owner[static_cast<std::size_t>(parent)];
    const std::int32_t unit_parent =
        wrapped_parent < 0 ? Unit::kNoParent : unit_of[static_cast<std::size_t>(wrapped_parent)];
    const auto u = static_cast<std::size_t>(unit_of[i]);
    auto unit = Unit::make(modules[i].name(), unit_parent, std::move(params[u]), flops[u], acts[u]);
    if (!unit) {
      return unit.error().with_context(str_cat("fsdp context of model '", s.modules.name(), "'"));
    }
    units.push_back(std::move(unit).value());
  }
  auto model = Model::make(s.modules.name(), std::move(units));
  if (!model) {
    return model.error().with_context("fsdp context");
  }
  const auto kids = children_of(*model);
  const std::vector<std::int32_t>& roots = kids.back();
  std::vector<std::int32_t> forward;
  std::vector<std::int32_t> backward;
  for (std::int32_t r : roots) {
    forward_visit(kids, r, &forward);
  }
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) {
    backward_visit(kids, *it, &backward);
  }
  s.forward_order = unit_names(*model, forward);
  s.backward_order = unit_names(*model, backward);
  s.units = std::move(model).value();
  s.finalized = true;
  return ok_status();
}

}  // namespace internal

FsdpContext::FsdpContext(Model modules, Workload workload, FsdpContextOptions options)
    : state_(std::make_unique<internal::FsdpContextState>(std::move(modules), workload,
                                                          std::move(options))) {}

FsdpContext::~FsdpContext() {
  FSDP_CHECK(g_current_context != this && !state_->microbatch_open)
      << "FsdpContext of model '" << state_->modules.name()
      << "' destroyed while a fully_shard_context or microbatch scope on it is open";
}

const Model& FsdpContext::modules() const { return state_->modules; }
const Workload& FsdpContext::workload() const { return state_->workload; }
const FsdpContextOptions& FsdpContext::options() const { return state_->options; }

std::vector<std::string> FsdpContext::wrapped_modules() const {
  return unit_names(state_->modules, state_->wrap_order);
}

bool FsdpContext::is_finalized() const { return state_->finalized; }
bool FsdpContext::is_last_microbatch() const { return state_->is_last_flag; }
std::int64_t FsdpContext::num_microbatches() const { return state_->microbatches; }

Expected<Model> FsdpContext::unit_model() const {
  FSDP_RETURN_IF_ERROR(require_finalized(*state_));
  return *state_->units;
}

Expected<std::vector<std::string>> FsdpContext::forward_order() const {
  FSDP_RETURN_IF_ERROR(require_finalized(*state_));
  return state_->forward_order;
}

Expected<std::vector<std::string>> FsdpContext::backward_order() const {
  FSDP_RETURN_IF_ERROR(require_finalized(*state_));
  return state_->backward_order;
}

Expected<FsdpConfig> FsdpContext::config() const {
  const internal::FsdpContextState& s = *state_;
  FSDP_RETURN_IF_ERROR(require_finalized(s));
  if (s.microbatch_open) {
    return context_error(s, ErrorCode::kFailedPrecondition,
                         str_cat("step: expected every microbatch scope closed, got microbatch ",
                                 s.microbatches, " still open"));
  }
  if (s.microbatches > 0 && !s.last_microbatch_done) {
    return context_error(s, ErrorCode::kFailedPrecondition,
                         str_cat("step: expected a last microbatch (is_last=true), got ",
                                 s.microbatches, " microbatches with is_last=false"));
  }
  FSDP_CHECK(s.first_config.has_value());
  ConfigOptions options = config_options_of(*s.first_config);
  options.microbatches = s.microbatches > 0 ? s.microbatches : 1;
  return assemble_config(options);
}

Expected<Schedule> FsdpContext::schedule() const {
  FSDP_TRY(const FsdpConfig config, this->config());
  auto schedule = build_schedule(*state_->units, config, state_->workload);
  if (!schedule) {
    return schedule.error().with_context(
        str_cat("fsdp context of model '", state_->modules.name(), "'"));
  }
  return schedule;
}

FullyShardScope::FullyShardScope(FullyShardScope&& other) noexcept
    : context_(std::exchange(other.context_, nullptr)),
      uncaught_exceptions_(other.uncaught_exceptions_) {}

FullyShardScope::~FullyShardScope() {
  if (context_ == nullptr) {
    return;
  }
  if (std::uncaught_exceptions() > uncaught_exceptions_) {
    g_current_context = nullptr;
    internal::context_state(*context_).history = internal::ScopeHistory::kUnwound;
    context_ = nullptr;
    return;
  }
  // The error stays in the context; unit_model(), config() and schedule() report it.
  (void)close();
}

Status FullyShardScope::close() {
  if (context_ == nullptr) {
    return Error(ErrorCode::kFailedPrecondition,
                 "fully_shard_context: expected an open scope, got one already closed");
  }
  FsdpContext* context = std::exchange(context_, nullptr);
  g_current_context = nullptr;
  internal::FsdpContextState& s = internal::context_state(*context);
  Status status = internal::finalize(s);
  if (!status) {
    s.history = internal::ScopeHistory::kFinalizeFailed;
    s.finalize_error = status.error();
  }
  return status;
}

Expected<FullyShardScope> fully_shard_context(FsdpContext& context) {
  internal::FsdpContextState& s = internal::context_state(context);
  if (g_current_context != nullptr) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("fully_shard_context for model '", s.modules.name(),
                         "': does not support nesting: expected no active scope, got the scope "
                         "of model '",
                         internal::context_state(*g_current_context).modules.name(), "'"));
  }
  if (s.finalized) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("fully_shard_context for model '", s.modules.name(),
                         "': expected a context not yet finalised, got a finalised one"));
  }
  g_current_context = &context;
  s.history = internal::ScopeHistory::kOpen;
  s.finalize_error.reset();
  return FullyShardScope(&context, std::uncaught_exceptions());
}

FsdpContext* current_fully_shard_context() { return g_current_context; }

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// FsdpContext: the C++ counterpart of the reference's FsdpContext and fully_shard_context (spec
// §4.1). A context owns a module tree (an fsdp::Model whose units are modules); fully_shard
// (core/api/fully_shard.h) wraps modules while a FullyShardScope is active, the scope finalises
// the context on normal exit (the wrapped tree becomes the Model of FSDP units), and microbatch
// scopes (core/api/microbatch.h) then count one optimizer step, whose Schedule the context builds.
// Not thread-safe; the active scope is per thread (the reference's context variable).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/expected.h"
#include "core/model/model.h"
#include "core/policy/fsdp_config.h"
#include "core/policy/optimizer_policy.h"
#include "core/schedule/schedule.h"
#include "core/schedule/schedule_builder.h"

namespace fsdp {

class FsdpContext;

namespace internal {
struct FsdpContextState;
FsdpContextState& context_state(FsdpContext& context);
const FsdpContextState& context_state(const FsdpContext& context);
}  // namespace internal

// What a run fixes besides fully_shard's arguments: the FsdpOptions fields that fully_shard does
// not take (the reference keeps them in the training loop and the optimizer).
struct FsdpContextOptions {
  bool recompute = false;       // activation recomputation of every FSDP unit
  OptimizerPolicy optimizer;    // Adam with fp32 state by default
  std::int64_t block_size = 1;  // rows kept together by RowAtomic groups
  friend bool operator==(const FsdpContextOptions&, const FsdpContextOptions&) = default;
};

// Lifecycle: constructing (fully_shard calls inside a FullyShardScope) -> finalised (the scope
// exited normally) -> microbatch scopes of one optimizer step -> schedule(). Neither copyable
// nor movable: scopes and current_fully_shard_context() refer to it by address, so it must
// outlive every scope opened on it (FSDP_CHECKed in the destructor).
class FsdpContext {
 public:
  // `modules` is the module tree: each unit is a module, its parent the enclosing module; the
  // workload and options are checked when the schedule is built.
  explicit FsdpContext(Model modules, Workload workload = {}, FsdpContextOptions options = {});
  ~FsdpContext();
  FsdpContext(const FsdpContext&) = delete;
  FsdpContext& operator=(const FsdpContext&) = delete;
  FsdpContext(FsdpContext&&) = delete;
  FsdpContext& operator=(FsdpContext&&) = delete;

  // The module tree given at construction.
  const Model& modules() const;
  const Workload& workload() const;
  const FsdpContextOptions& options() const;
  // Modules wrapped so far, in fully_shard call order.
  std::vector<std::string> wrapped_modules() const;
  bool is_finalized() const;

  // The reference's context.is_last_microbatch: the is_last of the open microbatch scope, true
  // outside one (the reference default).
  bool is_last_microbatch() const;
  // Microbatch scopes of this step that exited normally.
  std::int64_t num_microbatches() const;

  // Everything below needs a finalised context; otherwise the error says why it is not (the
  // scope is open, was never opened, exited by an exception, or finalisation failed, with that
  // failure's message).

  // The FSDP units: one unit per wrapped module, in module-tree order, each holding the
  // parameters, FLOPs and activation bytes of the modules it owns (itself and its unwrapped
  // descendants); the parent is the nearest wrapped ancestor.
  Expected<Model> unit_model() const;
  // §4.1.3 orders of the unit names: DFS pre-order over the units; backward visits a unit and
  // then its children in reverse, roots in reverse.
  Expected<std::vector<std::string>> forward_order() const;
  Expected<std::vector<std::string>> backward_order() const;

  // The FsdpConfig of the step: fully_shard's arguments, the context options, and as many
  // microbatches as microbatch scopes exited normally (1 when there were none: outside a scope
  // every backward is a last microbatch, as in the reference). Errors: not finalised; a
  // microbatch scope still open; microbatches but none with is_last = true.
  Expected<FsdpConfig> config() const;
  // build_schedule(unit_model(), config(), workload()): the step's IR for a backend or the
  // simulator. Errors: those of config() and of build_schedule.
  Expected<Schedule> schedule() const;

 private:
  friend internal::FsdpContextState& internal::context_state(FsdpContext& context);
  friend const internal::FsdpContextState& internal::context_state(const FsdpContext& context);
  std::unique_ptr<internal::FsdpContextState> state_;
};

// The scope of fully_shard_context: makes its context current while it lives and finalises it
// when it ends normally. Move-only; a moved-from scope does nothing. On exception unwinding the
// context is not finalised (the reference finalises on normal exit only): it stays
// unfinalised, its wrapped modules stay wrapped, and a new scope may be opened on it.
class [[nodiscard]] FullyShardScope {
 public:
  FullyShardScope(FullyShardScope&& other) noexcept;
  FullyShardScope& operator=(FullyShardScope&&) = delete;
  FullyShardScope(const FullyShardScope&) = delete;
  FullyShardScope& operator=(const FullyShardScope&) = delete;
  // Normal exit: close(), keeping its error in the context (unit_model(), config() and
  // schedule() return it). Unwinding: deactivate only.
  ~FullyShardScope();

  FsdpContext& context() const { return *context_; }
  // Ends the scope now: deactivates the context and finalises it, returning the finalisation
  // error directly (no wrapped module; a module with parameters, FLOPs or activations outside
  // every wrapped module; a unit beyond int64). Error if the scope was already closed.
  Status close();

 private:
  friend Expected<FullyShardScope> fully_shard_context(FsdpContext& context);
  FullyShardScope(FsdpContext* context, int uncaught_exceptions)
      : context_(context), uncaught_exceptions_(uncaught_exceptions) {}
  FsdpContext* context_ = nullptr;  // nullptr once moved from or closed
  int uncaught_exceptions_ = 0;
};

// Activates `context` for fully_shard (the reference's `with fully_shard_context(ctx)`).
// Errors (kFailedPrecondition): another scope is active on this thread (the reference's "does
// not support nesting"); the context is already finalised.
Expected<FullyShardScope> fully_shard_context(FsdpContext& context);

// The context of the active FullyShardScope on this thread, or nullptr. Never creates, joins or
// finalises a context.
FsdpContext* current_fully_shard_context();

}  // namespace fsdp

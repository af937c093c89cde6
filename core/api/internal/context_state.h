// SPDX-License-Identifier: Apache-2.0
// The state behind FsdpContext, shared by fsdp_context.cc, fully_shard.cc and microbatch.cc.
// Invariants: `wrapped[m]` iff m is in `wrap_order`; `first_config` is set iff a module is
// wrapped; `units`/`forward_order`/`backward_order` are set iff `finalized`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/api/fsdp_context.h"
#include "core/base/error.h"
#include "core/model/model.h"
#include "core/policy/fsdp_config.h"
#include "core/schedule/schedule_builder.h"

namespace fsdp::internal {

// Why a context is not finalised; reported by the accessors that need finalisation.
enum class ScopeHistory : std::uint8_t { kNeverOpened, kOpen, kUnwound, kFinalizeFailed };

struct FsdpContextState {
  FsdpContextState(Model m, Workload w, FsdpContextOptions o);

  // Inputs.
  Model modules;
  Workload workload;
  FsdpContextOptions options;
  std::vector<std::vector<std::int32_t>> children;  // per module, in module order

  // Construction (fully_shard).
  std::vector<bool> wrapped;
  std::vector<std::int32_t> wrap_order;
  std::vector<std::int32_t> param_owner;  // per module: the wrapped module owning its params
  std::optional<FsdpConfig> first_config;  // from the first fully_shard call (1 microbatch)

  // Scope and finalisation.
  ScopeHistory history = ScopeHistory::kNeverOpened;
  std::optional<Error> finalize_error;
  bool finalized = false;
  std::optional<Model> units;
  std::vector<std::string> forward_order;
  std::vector<std::string> backward_order;

  // Microbatches of the step.
  bool microbatch_open = false;
  bool is_last_flag = true;  // the reference's context.is_last_microbatch
  std::int64_t microbatches = 0;
  bool last_microbatch_done = false;
};

// Finalises the context (the reference's finalisation, §4.1.3): builds `units` and the orders.
Status finalize(FsdpContextState& state);

}  // namespace fsdp::internal

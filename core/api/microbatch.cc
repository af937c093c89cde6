// SPDX-License-Identifier: Apache-2.0
#include "core/api/microbatch.h"

#include <exception>
#include <utility>

#include "core/api/internal/context_state.h"
#include "core/base/strings.h"

namespace fsdp {

MicrobatchScope::MicrobatchScope(FsdpContext* context, std::int64_t index, bool is_last,
                                 int uncaught)
    : context_(context), index_(index), is_last_(is_last), uncaught_exceptions_(uncaught) {}

MicrobatchScope::MicrobatchScope(MicrobatchScope&& other) noexcept
    : context_(std::exchange(other.context_, nullptr)),
      index_(other.index_),
      is_last_(other.is_last_),
      uncaught_exceptions_(other.uncaught_exceptions_) {}

MicrobatchScope::~MicrobatchScope() {
  if (context_ == nullptr) {
    return;
  }
  internal::FsdpContextState& s = internal::context_state(*context_);
  s.microbatch_open = false;
  // The reference restores the previous flag; outside a scope it is always the default, true.
  s.is_last_flag = true;
  if (std::uncaught_exceptions() > uncaught_exceptions_) {
    return;  // the forward or backward did not complete: not a microbatch of the step
  }
  ++s.microbatches;
  s.last_microbatch_done = is_last_;
}

Expected<MicrobatchScope> microbatch(FsdpContext& context, bool is_last) {
  internal::FsdpContextState& s = internal::context_state(context);
  const auto fail = [&](const std::string& what) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("microbatch ", s.microbatches, " (is_last=", is_last ? "true" : "false",
                         ") of model '", s.modules.name(), "': ", what));
  };
  if (!s.finalized) {
    return fail("requires a finalised context: expected the fully_shard_context scope exited, "
                "got a context not finalised");
  }
  if (s.microbatch_open) {
    return fail("expected no open microbatch scope, got one still open (microbatch scopes do "
                "not nest)");
  }
  if (s.last_microbatch_done) {
    return fail(str_cat("expected no microbatch after the last one, got one after microbatch ",
                        s.microbatches - 1,
                        " (is_last=true); one context builds one optimizer step"));
  }
  s.microbatch_open = true;
  s.is_last_flag = is_last;
  return MicrobatchScope(&context, s.microbatches, is_last, std::uncaught_exceptions());
}

}  // namespace fsdp

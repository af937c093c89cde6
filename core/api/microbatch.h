// SPDX-License-Identifier: Apache-2.0
// microbatch: the reference's microbatch(context, is_last) scope around the forward and the
// backward of one microbatch (fsdp-behaviour.md §4.7). While it lives, context.is_last_microbatch() is
// is_last; when it ends normally it counts one microbatch of the context's optimizer step, and
// is_last = true ends the step. FsdpContext::schedule() then has that many microbatches, and
// only the last one finalises gradients to the optimizer placements.
#pragma once

#include <cstdint>

#include "core/api/fsdp_context.h"
#include "core/base/expected.h"

namespace fsdp {

// Move-only; a moved-from scope does nothing. When the scope is left by an exception the flag is
// restored but the microbatch is not counted (its forward or backward did not complete).
class [[nodiscard]] MicrobatchScope {
 public:
  MicrobatchScope(MicrobatchScope&& other) noexcept;
  MicrobatchScope& operator=(MicrobatchScope&&) = delete;
  MicrobatchScope(const MicrobatchScope&) = delete;
  MicrobatchScope& operator=(const MicrobatchScope&) = delete;
  ~MicrobatchScope();

  // 0-based index of this microbatch in the step.
  std::int64_t index() const { return index_; }
  bool is_last() const { return is_last_; }

 private:
  friend Expected<MicrobatchScope> microbatch(FsdpContext& context, bool is_last);
  MicrobatchScope(FsdpContext* context, std::int64_t index, bool is_last, int uncaught);
  FsdpContext* context_ = nullptr;  // nullptr once moved from
  std::int64_t index_ = 0;
  bool is_last_ = true;
  int uncaught_exceptions_ = 0;
};

// Opens microbatch `context.num_microbatches()` of the step. Errors (kFailedPrecondition), each
// one line naming the microbatch and is_last:
//  * the context is not finalised (the reference: "requires a finalised context");
//  * another microbatch scope is open (the reference only sets and restores a flag, so nesting
//    passes there; here a scope counts one forward and backward, so nesting is an error);
//  * the step's last microbatch has already run: one context builds one optimizer step.
Expected<MicrobatchScope> microbatch(FsdpContext& context, bool is_last);

}  // namespace fsdp

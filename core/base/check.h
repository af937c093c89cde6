// SPDX-License-Identifier: Apache-2.0
// FSDP_CHECK: always-on invariant checks for our own code (never for user input, which gets an
// Error). A failed check prints file:line, the condition and a streamed message, then aborts.
#pragma once

#include <sstream>
#include <string>

namespace fsdp::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

}  // namespace fsdp::internal

#define FSDP_CHECK(cond) \
  if (cond) {            \
  } else                 \
    ::fsdp::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

#ifndef NDEBUG
#define FSDP_DCHECK(cond) FSDP_CHECK(cond)
#else
#define FSDP_DCHECK(cond) \
  if (true) {             \
  } else                  \
    ::fsdp::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()
#endif

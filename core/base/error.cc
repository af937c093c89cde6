// SPDX-License-Identifier: Apache-2.0
#include "core/base/error.h"

namespace fsdp {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kOutOfRange:
      return "out of range";
    case ErrorCode::kFailedPrecondition:
      return "failed precondition";
    case ErrorCode::kCycle:
      return "cycle";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

Error Error::with_context(std::string_view ctx) const& {
  Error copy = *this;
  return std::move(copy).with_context(ctx);
}

Error&& Error::with_context(std::string_view ctx) && {
  std::string prefixed;
  prefixed.reserve(ctx.size() + 2 + message_.size());
  prefixed.append(ctx).append(": ").append(message_);
  message_ = std::move(prefixed);
  return std::move(*this);
}

}  // namespace fsdp

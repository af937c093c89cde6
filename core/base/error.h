// SPDX-License-Identifier: Apache-2.0
// Error: a code plus a one-line, lower-case message naming the entity, the expected and the actual
// value. Context is prepended while an error propagates ("while building layout: ...").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fsdp {

enum class ErrorCode : std::uint8_t {
  kInvalidArgument,
  kOutOfRange,
  kFailedPrecondition,
  kCycle,
  kUnavailable,
  kInternal,
};

std::string_view to_string(ErrorCode code);

class Error {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns this error with "ctx: " prepended to the message.
  Error with_context(std::string_view ctx) const&;
  Error&& with_context(std::string_view ctx) &&;

  friend bool operator==(const Error&, const Error&) = default;

 private:
  ErrorCode code_;
  std::string message_;
};

}  // namespace fsdp

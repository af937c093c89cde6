// SPDX-License-Identifier: Apache-2.0
#include "core/model/internal/names.h"

#include "core/base/strings.h"

namespace fsdp::internal {
namespace {

bool is_control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i == max_chars) {
      out += "...";
      break;
    }
    const char c = text[i];
    if (is_control(c)) {
      const auto u = static_cast<unsigned char>(c);
      out += "\\x";
      out += kHex[u >> 4U];
      out += kHex[u & 0xfU];
    } else {
      out += c;
    }
  }
  return out;
}

Status check_name(std::string_view what, std::string_view name) {
  bool ok = !name.empty();
  for (const char c : name) {
    ok = ok && !is_control(c);
  }
  if (!ok) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(what, " name: expected a non-empty string without control characters, got '",
                         printable(name), "'"));
  }
  return ok_status();
}

}  // namespace fsdp::internal

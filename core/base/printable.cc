// SPDX-License-Identifier: Apache-2.0
#include "core/base/printable.h"

#include "core/base/strings.h"

namespace fsdp {
namespace {

bool is_c0_or_del(unsigned char u) {
  return u < 0x20 || u == 0x7f;
}

// The length of the control character at text[i] (1 for C0/DEL, 2 for UTF-8 C1), or 0.
std::size_t control_at(std::string_view text, std::size_t i) {
  const auto u = static_cast<unsigned char>(text[i]);
  if (is_c0_or_del(u)) {
    return 1;
  }
  if (u == 0xc2 && i + 1 < text.size()) {
    const auto next = static_cast<unsigned char>(text[i + 1]);
    if (next >= 0x80 && next <= 0x9f) {
      return 2;
    }
  }
  return 0;
}

}  // namespace

bool has_control_character(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (control_at(text, i) != 0) {
      return true;
    }
  }
  return false;
}

std::string printable_text(std::string_view text, std::size_t max_chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i >= max_chars) {
      out += "...";
      break;
    }
    const std::size_t n = control_at(text, i);
    if (n == 0) {
      out += text[i];
      continue;
    }
    for (std::size_t k = 0; k < n; ++k) {
      const auto u = static_cast<unsigned char>(text[i + k]);
      out += "\\x";
      out += kHex[u >> 4U];
      out += kHex[u & 0xfU];
    }
    i += n - 1;
  }
  return out;
}

Status check_printable_name(std::string_view what, std::string_view name) {
  if (name.empty() || has_control_character(name)) {
    return Error(
        ErrorCode::kInvalidArgument,
        str_cat(what, " name: expected a non-empty string without control characters, got '",
                printable_text(name), "'"));
  }
  return ok_status();
}

}  // namespace fsdp

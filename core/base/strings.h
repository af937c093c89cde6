// SPDX-License-Identifier: Apache-2.0
// str_cat and join: message building without std::format (GCC 12 lacks it).
#pragma once

#include <cctype>
#include <sstream>
#include <string>
#include <string_view>

namespace fsdp {

template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// join(range, ", ") -> "a, b, c"; elements are streamed with operator<<.
template <class Range>
std::string join(const Range& range, std::string_view sep) {
  std::ostringstream os;
  bool first = true;
  for (const auto& x : range) {
    if (!first) {
      os << sep;
    }
    first = false;
    os << x;
  }
  return os.str();
}

// s without leading and trailing whitespace.
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// Properties every fuzz target checks on top of "no crash, no sanitizer report": errors are one
// non-empty line, and successful parses survive a serialise-and-parse round trip unchanged.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/base/error.h"

namespace fsdp::fuzz {

inline void check(bool ok, const char* what, const std::string& detail) {
  if (!ok) {
    std::fprintf(stderr, "fuzz property violated: %s: %s\n", what, detail.c_str());
    std::abort();
  }
}

inline void check_error_line(const Error& error) {
  const std::string& m = error.message();
  check(!m.empty(), "error message is empty", m);
  check(m.find('\n') == std::string::npos && m.find('\r') == std::string::npos,
        "error message spans lines", m);
  check(error.code() != ErrorCode::kInternal, "parser raised an internal error", m);
}

}  // namespace fsdp::fuzz

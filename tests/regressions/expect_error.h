// SPDX-License-Identifier: Apache-2.0
// The assertion most regression cases make about a bad input: the run ended by itself (no
// timeout, no signal) with `exit_code` and exactly one line on stderr that contains `needle` and
// is not an internal error.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/regressions/run_fsdpsim.h"

namespace fsdp::regressions {

inline void expect_one_line_error(const ProcessResult& r, int exit_code, const std::string& needle) {
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, exit_code) << r.err;
  EXPECT_TRUE(is_one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

}  // namespace fsdp::regressions

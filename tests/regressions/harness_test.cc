// SPDX-License-Identifier: Apache-2.0
// The regression harness itself: a child's exit code, output and timeout are reported.
#include <gtest/gtest.h>
#include <signal.h>

#include "tests/regressions/run_fsdpsim.h"

namespace fsdp::regressions {
namespace {

TEST(RegressionHarness, ReportsExitCodeAndOutput) {
  const auto r = run_fsdpsim({"--help"});  // under the suite's 1 GB limit
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("simulate"), std::string::npos);
  EXPECT_FALSE(r.timed_out);
}

TEST(RegressionHarness, KillsAChildPastItsTimeout) {
  Limits quick;
  quick.timeout_s = 0.3;
  const auto r = run_program({"/bin/sleep", "10"}, quick);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.signal, SIGKILL);
}

TEST(RegressionHarness, OneLineMeansOneNonEmptyLine) {
  EXPECT_TRUE(is_one_line("error: x\n"));
  EXPECT_TRUE(is_one_line("error: x"));
  EXPECT_FALSE(is_one_line(""));
  EXPECT_FALSE(is_one_line("a\nb\n"));
  EXPECT_FALSE(is_one_line("\n"));
}

}  // namespace
}  // namespace fsdp::regressions

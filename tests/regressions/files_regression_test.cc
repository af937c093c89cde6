// SPDX-License-Identifier: Apache-2.0
// Issue 16, "Files in and out" (and the start-up defect that kept every command from ending under
// the suite's 1 GB limit): every case runs the real fsdpsim binary (run_fsdpsim.h).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/regressions/run_fsdpsim.h"

namespace fsdp::regressions {
namespace {

// OpenBLAS's thread pool, started before main, kept every command from ending under a 1 GB
// address-space limit; the suite's default limits are that limit.
TEST(StartupRegression, EveryCommandEndsUnderTheMemoryLimit) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--version"}, {"--help"}, {"hardware"}, {"model", "--list"}}) {
    const auto start = std::chrono::steady_clock::now();
    const ProcessResult r = run_fsdpsim(args);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_FALSE(r.timed_out) << args.front();
    EXPECT_EQ(r.signal, 0) << args.front();
    EXPECT_EQ(r.exit_code, 0) << args.front() << ": " << r.err;
    EXPECT_FALSE(r.out.empty()) << args.front();
    EXPECT_LT(seconds, 10.0) << args.front();
  }
}

}  // namespace
}  // namespace fsdp::regressions

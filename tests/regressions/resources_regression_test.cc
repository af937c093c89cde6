// SPDX-License-Identifier: Apache-2.0
// Issue 16, class 3: resources. A run that cannot fit is refused before it allocates, with the
// estimate and the limit; time is linear in the number of units; a deep unit tree is an error,
// not a stack overflow.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "planner/resource_estimate.h"
#include "core/model/model.h"
#include "core/model/unit.h"
#include "tests/regressions/expect_error.h"
#include "tests/regressions/run_fsdpsim.h"

namespace fsdp::regressions {
namespace {

// The suite's limits (1 GB of address space; under ASan, ASan's own limits; run_fsdpsim.h), with
// a longer wall clock for the large-model cases.
Limits as_limit(double timeout_s = 20.0) {
  Limits l;
  l.timeout_s = timeout_s;
  return l;
}


// A model file of `n` units with one small tensor each; `chain`: each unit's parent is the one
// before it (a chain n deep), else all are root-level.
std::string model_file(std::int64_t n, bool chain) {
  const std::string path = make_temp_dir("resources") + "/model.json";
  std::ofstream out(path);
  out << R"({"format": "fsdpsim-model", "version": 1, "name": "gen", "units": [)";
  for (std::int64_t i = 0; i < n; ++i) {
    out << (i > 0 ? "," : "") << R"({"name": "u)" << i << R"(", "params": [{"name": "w)" << i
        << R"(", "shape": [16, 16], "dtype": "bf16"}], "flops_per_token": {"matmul": 512})";
    if (chain && i > 0) {
      out << R"(, "parent": "u)" << (i - 1) << '"';
    }
    out << "}";
  }
  out << "]}\n";
  return path;
}

TEST(ResourcesRegression, HugeMeshIsRefusedWithAnEstimateNotKilled) {
  // Was: grew to 23.5 GB and was killed by the kernel.
  const ProcessResult r = run_fsdpsim({"simulate", "--mesh", "dp=2147483647"}, as_limit());
  expect_one_line_error(r, 1, "the run needs about");
  EXPECT_NE(r.err.find("2147483647 ranks"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("this process may use"), std::string::npos) << r.err;
}

TEST(ResourcesRegression, MillionMicrobatchesAreRefusedWithAnEstimate) {
  // Was: passed 8 GB in 8 s.
  for (const char* command : {"simulate", "schedule"}) {
    SCOPED_TRACE(command);
    const ProcessResult r =
        run_fsdpsim({command, "--microbatches", "1000000"}, as_limit());
    expect_one_line_error(r, 1, "1000000 microbatches");
  }
}

TEST(ResourcesRegression, SweepOfTheLargestRankCountIsRefusedWithAnEstimate) {
  const ProcessResult r =
      run_fsdpsim({"sweep", "--ranks", "1073741824", "--strategies", "zero3"}, as_limit());
  expect_one_line_error(r, 1, "the run needs about");
}

TEST(ResourcesRegression, MemoryEstimateNamesTheNeedAndTheBudget) {
  EXPECT_TRUE(planner::check_memory_estimate(16, 34, 4).ok());
  const Status s = planner::check_memory_estimate(INT64_MAX, INT64_MAX, INT64_MAX, 8);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kOutOfRange);
  EXPECT_NE(s.error().message().find("8 at once"), std::string::npos) << s.error().message();
  EXPECT_GT(planner::memory_budget_bytes(), 0);
}

TEST(ResourcesRegression, MemoryBudgetIsTheAddressSpaceLeftNotTheWholeLimit) {
  // Was: the budget was all of RLIMIT_AS, though a started fsdpsim already maps about 0.9 GB of
  // it, so under a 1 GB limit a run estimated at 0.6 GB was let through and died of bad_alloc.
  // Here the limit is set 2 GiB above what this process maps now (restored at once after).
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  ASSERT_NE(statm, nullptr);
  unsigned long long pages = 0;
  ASSERT_EQ(std::fscanf(statm, "%llu", &pages), 1);
  std::fclose(statm);
  const double mapped = static_cast<double>(pages) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(mapped) + (2ULL << 30);
  if (saved.rlim_max != RLIM_INFINITY && tight.rlim_cur > saved.rlim_max) {
    GTEST_SKIP() << "the hard RLIMIT_AS is below what this test needs";
  }
  ASSERT_EQ(setrlimit(RLIMIT_AS, &tight), 0);
  const std::int64_t budget = planner::memory_budget_bytes();
  ASSERT_EQ(setrlimit(RLIMIT_AS, &saved), 0);
  EXPECT_LE(budget, 2LL << 30);
  EXPECT_GT(budget, 1LL << 30);
}

TEST(ResourcesRegression, HugeLayoutIsRefusedWithAnEstimateNotTerminated) {
  // Was: `layout --dp 1000000 --format json` under a 1 GB limit ended in std::terminate (exit
  // 134): bad_alloc while the JSON tree was built, and again in its destructor during the
  // unwinding. Now the layout's memory is estimated before it is built.
  const ProcessResult r = run_fsdpsim(
      {"layout", "--shapes", "8x8", "--dp", "2147483647", "--format", "json"}, as_limit());
  expect_one_line_error(r, 1, "the layout needs about");
  EXPECT_NE(r.err.find("2147483647 ranks x 1536 B"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("this process may use; try a smaller --dp or --format table"),
            std::string::npos)
      << r.err;
  // The table needs less per rank (64 GiB here): refused by the estimate, or where the machine
  // has that much memory, by the allocator; one line either way, never a crash.
  const ProcessResult table = run_fsdpsim(
      {"layout", "--shapes", "8x8", "--dp", "2147483647", "--format", "table"}, as_limit());
  EXPECT_FALSE(table.timed_out);
  EXPECT_EQ(table.signal, 0);
  EXPECT_EQ(table.exit_code, 1) << table.err;
  EXPECT_TRUE(is_one_line(table.err)) << table.err;
}

TEST(ResourcesRegression, DeepParentChainIsAnErrorNotAStackOverflow) {
  // Was: a segfault in simulate, schedule and sweep (recursive traversals).
  const std::string path = model_file(12000, /*chain=*/true);
  for (const char* command : {"simulate", "schedule", "sweep"}) {
    SCOPED_TRACE(command);
    const ProcessResult r = run_fsdpsim({command, "--model", path}, as_limit(120.0));
    expect_one_line_error(r, 1, "levels deep; expected at most 1000");
  }
}

TEST(ResourcesRegression, ChildrenOfAModelAreAnIndexNotAScan) {
  // Was: Model::children scanned every unit, so a traversal was quadratic in the units.
  std::vector<Unit> units;
  const std::int32_t n = 200000;
  units.reserve(n);
  for (std::int32_t i = 0; i < n; ++i) {
    units.push_back(Unit::make("u" + std::to_string(i), i == 0 ? Unit::kNoParent : 0, {},
                               UnitFlops{}, UnitActivations{})
                        .value());
  }
  const Model m = Model::make("flat", std::move(units)).value();
  std::int64_t visited = 0;
  // Every unit's children: n calls, linear in total with the index (a scan per call would be
  // 4e10 steps here and never finish within the test's time).
  for (std::int32_t u = -1; u < n; ++u) {
    visited += static_cast<std::int64_t>(m.children(u).size());
  }
  EXPECT_EQ(visited, n);
  EXPECT_EQ(m.children(0).size(), static_cast<std::size_t>(n - 1));
  EXPECT_EQ(m.children(Unit::kNoParent).size(), 1u);
}

TEST(ResourcesRegression, ManyFlatUnitsScheduleAndSimulateInLinearTime) {
  // Was: 10^5 flat units took 50 s to simulate (Model::children and the prefetch targets each
  // scanned every unit). 20,000 units in the ASan debug build stay well inside the timeout
  // only when the work is linear.
  // The case is about time; its memory is not small, so it gets 6 GB instead of the suite's
  // 1 GB: 20,000 units need a resident set of 0.40 GB (schedule) and 0.86 GB (simulate) in the
  // release build, 1.06 and 1.54 GB in the ASan debug build (/usr/bin/time -f %M), and
  // simulate's memory estimate (3.1 GiB, beside the 0.9 GB of address space fsdpsim maps at
  // start) refuses the run under a smaller RLIMIT_AS.
  const std::string path = model_file(20000, /*chain=*/false);
  Limits limits = as_limit(300.0);
  limits.address_space_bytes = 6LL << 30;
  for (const char* command : {"schedule", "simulate"}) {
    SCOPED_TRACE(command);
    const ProcessResult r = run_fsdpsim({command, "--model", path, "--mesh", "dp=2"}, limits);
    EXPECT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
}

TEST(ResourcesRegression, HundredThousandFlatUnitsAtFullSize) {
  // The defect's own size (10^5 flat units; the case above runs a fifth of it). Long: it runs only
  // as the ctest entry long_hundred_thousand_flat_units (label long, FSDP_LONG_TESTS=1):
  // `ctest --preset dev -L long`. Memory grows linearly from the 20,000-unit case's figures, so
  // it gets 16 GB. Measured in the ASan debug build (2 shared cores): 359 s for both commands,
  // 4.8 GB resident at most (/usr/bin/time -f %M); the 20,000-unit case: 43 s, 1.6 GB.
  if (std::getenv("FSDP_LONG_TESTS") == nullptr) {
    GTEST_SKIP() << "long case: ctest -L long runs it";
  }
  const std::string path = model_file(100000, /*chain=*/false);
  Limits limits = as_limit(1500.0);
  limits.address_space_bytes = 16LL << 30;
  for (const char* command : {"schedule", "simulate"}) {
    SCOPED_TRACE(command);
    const ProcessResult r = run_fsdpsim({command, "--model", path, "--mesh", "dp=2"}, limits);
    EXPECT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
}

}  // namespace
}  // namespace fsdp::regressions

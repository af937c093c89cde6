// SPDX-License-Identifier: Apache-2.0
// Issue 16, class 2: numbers that wrap or abort. Every case runs the real binary on an input the
// issue reported (or another member of the class) and expects a one-line error with exit 1 or 2,
// not a wrapped result with exit 0 and not an internal-check abort (exit 134).
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/exec/trainer.h"
#include "tests/regressions/expect_error.h"
#include "tests/regressions/run_fsdpsim.h"

namespace fsdp::regressions {
namespace {

// The suite's limits: 1 GB of address space (under ASan, ASan's own limits; run_fsdpsim.h).
Limits as_limit() { return Limits{}; }


// The h100 preset as a hardware file with `field` set to `value`.
std::string hardware_file_with(const std::string& field, std::int64_t value,
                               const char* collectives = nullptr) {
  const ProcessResult shown =
      run_fsdpsim({"hardware", "--show", "h100", "--format", "json"}, as_limit());
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  nlohmann::json j = nlohmann::json::parse(shown.out);
  j["name"] = "edited";
  j[field] = value;
  if (collectives != nullptr) {
    j["collectives"] = collectives;
  }
  const std::string path = make_temp_dir("numbers") + "/hardware.json";
  std::ofstream(path) << j.dump(2) << "\n";
  return path;
}

constexpr const char* kBeyondRange = "beyond the range of simulated time";

TEST(NumbersRegression, TinyLinkEfficiencyIsAStepBeyondTheTimeRange) {
  // Was: a step of 0.000 ms and negative communication, exit 0.
  expect_one_line_error(run_fsdpsim({"simulate", "--link-efficiency", "1e-7"}, as_limit()), 1,
                        kBeyondRange);
}

TEST(NumbersRegression, HugeStragglerComputeFactorIsAStepBeyondTheTimeRange) {
  // Was: the straggler "costs 0.000 ms".
  expect_one_line_error(
      run_fsdpsim({"simulate", "--straggler", "rank=1,compute=1e12"}, as_limit()), 1,
      kBeyondRange);
}

TEST(NumbersRegression, LargestInterNodeLatencyIsAnErrorNotAFasterStep) {
  // The latency fields are the alpha-beta model's (docs/hardware.md); the NCCL model's per-hop
  // latencies are NCCL's tuner figures.
  const std::string hw = hardware_file_with("inter_node_latency_ns", INT64_MAX, "alpha-beta");
  const ProcessResult r = run_fsdpsim({"simulate", "--hardware", hw}, as_limit());
  expect_one_line_error(r, 1, kBeyondRange);
  EXPECT_NE(r.err.find("9223372036854775807 ns"), std::string::npos) << r.err;
}

TEST(NumbersRegression, TinyMatmulEfficiencyIsAnErrorNotAnAbort) {
  // Was: exit 134 in an internal check of the cost model.
  const ProcessResult r = run_fsdpsim({"simulate", "--matmul-efficiency", "1e-300"}, as_limit());
  expect_one_line_error(r, 1, kBeyondRange);
  EXPECT_NE(r.err.find("forward"), std::string::npos) << r.err;  // names the op
}

TEST(NumbersRegression, HugeMinMessageBytesIsAnErrorNotAnAbort) {
  expect_one_line_error(
      run_fsdpsim({"simulate", "--min-message-bytes", "100000000000000000"}, as_limit()), 1,
      kBeyondRange);
}

TEST(NumbersRegression, HardwareRateOfOneIsAnErrorNotAnAbort) {
  for (const char* field : {"hbm_bytes_per_s", "peak_bf16_flops", "inter_node_bytes_per_s"}) {
    SCOPED_TRACE(field);
    expect_one_line_error(
        run_fsdpsim({"simulate", "--hardware", hardware_file_with(field, 1)}, as_limit()), 1,
        kBeyondRange);
  }
}

TEST(NumbersRegression, SweepNodesThatWrapTheRankCountAreAnError) {
  // Was: "-8 ranks" and exit 0.
  const ProcessResult r =
      run_fsdpsim({"sweep", "--nodes", "9223372036854775807"}, as_limit());
  expect_one_line_error(r, 1, "9223372036854775807");
  EXPECT_NE(r.err.find("2^30 ranks"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("-8"), std::string::npos) << r.err;
}

TEST(NumbersRegression, TrainTimeoutPastTheWatchdogRangeIsAnError) {
  // Was: 9e15 s overflowed the watchdog's nanoseconds and fired at once.
  expect_one_line_error(run_fsdpsim({"train", "--timeout", "9e15"}, as_limit()), 1,
                        "timeout is 9e+15 s");
}

TEST(NumbersRegression, CommbenchZeroOrNanTimeoutIsAnError) {
  for (const char* t : {"0", "nan", "-1", "1e300"}) {
    SCOPED_TRACE(t);
    expect_one_line_error(run_fsdpsim({"commbench", "--timeout", t}, as_limit()), 1,
                          "timeout is");
  }
}

TEST(NumbersRegression, CommbenchItersPastTheLimitIsAnError) {
  expect_one_line_error(
      run_fsdpsim({"commbench", "--iters", "9223372036854775807"}, as_limit()), 1,
      "iters is 9223372036854775807");
}

TEST(NumbersRegression, CalibrateCountsPastTheLimitAreAnError) {
  // Was: `calibrate --repeats 9223372036854775807` (or --iters) was accepted and measured for
  // ever; the counts now have commbench's bounds.
  const std::string dir = make_temp_dir("numbers-calibrate");
  for (const char* option : {"--repeats", "--iters"}) {
    SCOPED_TRACE(option);
    const ProcessResult r = run_fsdpsim(
        {"calibrate", "--out", dir + "/cpu.json", "--mesh", "dp=1", "--hidden", "8", "--ffn",
         "16", "--vocab", "16", "--seq-len", "4", option, "9223372036854775807"},
        as_limit());
    expect_one_line_error(r, 1, "is 9223372036854775807; expected a value in [1, ");
  }
  EXPECT_TRUE(list_dir(dir).empty());
}

TEST(NumbersRegression, NonFiniteOrHugeHyperParametersAreRejected) {
  // Was: NaN weights with exit 0.
  expect_one_line_error(run_fsdpsim({"train", "--lr", "nan"}, as_limit()), 1,
                        "learning rate is nan");
  expect_one_line_error(run_fsdpsim({"train", "--lr", "inf"}, as_limit()), 1,
                        "learning rate is inf");
  expect_one_line_error(run_fsdpsim({"train", "--grad-scale", "1e308"}, as_limit()), 1,
                        "grad scale is 1e+308");
}

TEST(NumbersRegression, CheckFailsOnNonFiniteValues) {
  // Was: NaN weights on both sides compared as an error of 0, so --check said "ok".
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(exec::max_relative_error(std::vector<double>{nan}, std::vector<double>{nan}),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(exec::max_relative_error(std::vector<double>{1.0, nan}, std::vector<double>{1.0, 1.0}),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(exec::max_relative_error(std::vector<double>{1.0},
                                     std::vector<double>{std::numeric_limits<double>::infinity()}),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(exec::max_relative_error(std::vector<double>{2.0}, std::vector<double>{2.0}), 0.0);
  backend::ParamValues a = {{{1.0F, std::numeric_limits<float>::quiet_NaN()}}};
  EXPECT_EQ(exec::max_relative_error(a, a), std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace fsdp::regressions

// SPDX-License-Identifier: Apache-2.0
// `fsdpsim calibrate` in one process (no mpirun: compute and copy only) on a tiny decoder: the
// file it writes is a valid hardware file with measured figures in range, `simulate` and
// `calibrate --predict` accept it, and bad arguments get one-line errors. No timing asserts.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "cli/subcommands.h"
#include "core/hardware/hardware_json.h"
#include "core/hardware/hardware_presets.h"
#include "tests/cli/cli_test_util.h"

namespace fsdp::cli {
namespace {

using testing::run_command;

const std::vector<std::string> kTiny = {"--mesh",   "dp=2", "--layers",           "1",
                                        "--hidden", "8",    "--ffn",              "16",
                                        "--vocab",  "16",   "--seq-len",          "4",
                                        "--micro-batch-size", "1", "--repeats", "1"};

std::vector<std::string> with(std::vector<std::string> args,
                              const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class CalibrateCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // ctest runs each test of this suite as its own process, in parallel: every process
    // calibrates into a file of its own, or one would --predict from another's figures.
    path_ = ::testing::TempDir() + "/fsdpsim_calibrate_test." + std::to_string(::getpid()) +
            ".json";
    result_ = new testing::Result(
        run_command(run_calibrate_command, with(kTiny, {"--out", path_, "--name", "here"})));
  }
  static void TearDownTestSuite() {
    std::remove(path_.c_str());
    delete result_;
  }
  static std::string path_;
  static testing::Result* result_;
};
std::string CalibrateCommandTest::path_;
testing::Result* CalibrateCommandTest::result_ = nullptr;

TEST_F(CalibrateCommandTest, WritesAHardwareFileWithMeasuredFigures) {
  ASSERT_EQ(result_->code, 0) << result_->err;
  EXPECT_NE(result_->out.find("collectives not measured"), std::string::npos) << result_->out;
  const auto hw = parse_hardware_json(read(path_), path_);
  ASSERT_TRUE(hw.has_value()) << hw.error().message();
  EXPECT_EQ(hw->name(), "here");
  const Calibration* c = hw->calibration();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->ranks, 1);
  EXPECT_TRUE(c->collectives.empty());
  EXPECT_EQ(c->compute_slowdown_permille, 1000);
  // Rates are positive and below what no CPU core reaches (1 TB/s copy, 10 TFLOP/s): sanity
  // ranges, not speed targets (a loaded CI machine under ASan may be arbitrarily slow).
  EXPECT_GT(c->copy_bytes_per_s, 0);
  EXPECT_LT(c->copy_bytes_per_s, 1'000'000'000'000);
  for (const OpKind kind : {OpKind::kForward, OpKind::kBackward, OpKind::kOptimizerStep}) {
    const ComputeRate* r = find_compute_rate(*c, kind);
    ASSERT_NE(r, nullptr) << to_string(kind);
    EXPECT_GT(r->flops_per_s, 0) << to_string(kind);
    EXPECT_LT(r->flops_per_s, 10'000'000'000'000) << to_string(kind);
  }
  EXPECT_EQ(find_compute_rate(*c, OpKind::kRecompute), nullptr);  // no --recompute
  EXPECT_EQ(find_compute_rate(*c, OpKind::kGradCopy)->bytes_per_s, c->copy_bytes_per_s);
  // The model's matmul shapes: tokens 4 x ffn 16 x hidden 8 first.
  ASSERT_FALSE(c->matmuls.empty());
  EXPECT_EQ(c->matmuls[0].m, 4);
  EXPECT_EQ(c->matmuls[0].n, 16);
  EXPECT_EQ(c->matmuls[0].k, 8);
  EXPECT_EQ(hw->hbm_bytes_per_s(), c->copy_bytes_per_s);
}

TEST_F(CalibrateCommandTest, PrintsAPredictionThatPredictRepeats) {
  ASSERT_EQ(result_->code, 0) << result_->err;
  const auto line = [](const std::string& out, const std::string& key) {
    const std::size_t at = out.find("predicted " + key + " ");
    EXPECT_NE(at, std::string::npos) << out;
    return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 11 + key.size()));
  };
  const double step = line(result_->out, "step_time_ms");
  EXPECT_GT(step, 0.0);
  EXPECT_GE(step, line(result_->out, "compute_ms"));
  EXPECT_GE(line(result_->out, "exposed_communication_ms"), 0.0);
  const auto p = run_command(run_calibrate_command, with(kTiny, {"--predict", path_}));
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_DOUBLE_EQ(line(p.out, "step_time_ms"), step);  // the simulator is deterministic
}

TEST_F(CalibrateCommandTest, SimulateReadsTheFile) {
  ASSERT_EQ(result_->code, 0) << result_->err;
  const std::string model = std::string(FSDP_SOURCE_DIR) + "/tests/cli/testdata/tiny_llama.json";
  const auto r = run_command(run_simulate_command, {"--hardware", path_, "--model", model,
                                                    "--mesh", "dp=2", "--seq-len", "8",
                                                    "--microbatches", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step time"), std::string::npos) << r.out;
}

// --fit: a real in-process run of the tiny configuration traced per rank, fitted onto a preset.
TEST(CalibrateFitTest, FitsRatesAndCurvesToAMeasuredRun) {
  const std::string dir =
      ::testing::TempDir() + "/fsdpsim_calibrate_fit." + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  // kTiny without its last two words, "--repeats 1" (train has no --repeats).
  const std::vector<std::string> config(kTiny.begin(), kTiny.end() - 2);
  const auto t = run_command(run_train_command,
                             with(config, {"--steps", "2", "--trace", dir + "/run-{rank}.json"}));
  ASSERT_EQ(t.code, 0) << t.err;
  const std::string out = dir + "/fitted.json";
  const auto fit_args = [&](const std::vector<std::string>& more) { return with(config, more); };
  const auto r = run_command(run_calibrate_command,
                             fit_args({"--fit", dir + "/run-0.json", dir + "/run-1.json", "--base",
                                       "h100", "--out", out, "--name", "fitted"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("predicted step_time_ms "), std::string::npos) << r.out;
  const auto hw = parse_hardware_json(read(out), out);
  ASSERT_TRUE(hw.has_value()) << hw.error().message();
  EXPECT_EQ(hw->name(), "fitted");
  EXPECT_EQ(hw->peak_bf16_flops(), find_hardware_preset("h100")->peak_bf16_flops());
  const Calibration* c = hw->calibration();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->compute_slowdown_permille, 1000);
  for (const OpKind kind : {OpKind::kForward, OpKind::kBackward, OpKind::kOptimizerStep}) {
    const ComputeRate* rate = find_compute_rate(*c, kind);
    ASSERT_NE(rate, nullptr) << to_string(kind);
    EXPECT_GT(rate->flops_per_s, 0) << to_string(kind);
    EXPECT_EQ(rate->bytes_per_s, 0) << to_string(kind);
  }
  // dp=2: both collectives measured on groups of 2, one point per distinct payload of the run.
  const CollectiveCurve* ag = find_collective_curve(*c, OpKind::kAllGather, 2);
  const CollectiveCurve* rs = find_collective_curve(*c, OpKind::kReduceScatter, 2);
  ASSERT_NE(ag, nullptr);
  ASSERT_NE(rs, nullptr);
  std::set<std::int64_t> payloads;
  const auto run0 = nlohmann::json::parse(read(dir + "/run-0.json"));
  for (const auto& ev : run0["traceEvents"]) {
    if (ev.value("ph", "") == "X" && ev["name"].get<std::string>().rfind("all-gather", 0) == 0) {
      payloads.insert(ev["args"]["bytes"].get<std::int64_t>());
    }
  }
  std::set<std::int64_t> points;
  for (const CollectivePoint& p : ag->points) {
    points.insert(p.bytes);
  }
  EXPECT_EQ(points, payloads);
  // The traces name axis 'dp': a mesh without it (its DP axis named otherwise) is an error
  // naming the axis.
  const auto bad = run_command(
      run_calibrate_command,
      {"--mesh", "dp_shard=2", "--layers", "1", "--hidden", "8", "--ffn", "16", "--vocab", "16",
       "--seq-len", "4", "--fit", dir + "/run-0.json", "--base", "h100", "--out", out});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("runs on mesh axis 'dp'; expected an axis of --mesh dp_shard=2"),
            std::string::npos)
      << bad.err;
  std::filesystem::remove_all(dir);
}

TEST(CalibrateCommandErrorsTest, BadArgumentsGetOneLineErrors) {
  auto r = run_command(run_calibrate_command, {"--backend", "cuda", "--out", "x.json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--backend is 'cuda'; expected cpu"), std::string::npos) << r.err;
  r = run_command(run_calibrate_command, {});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("expected exactly one of --out and --predict"), std::string::npos)
      << r.err;
  r = run_command(run_calibrate_command, {"--out", "x.json", "--repeats", "0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("repeats is 0; expected a value in [1, 10000]"), std::string::npos) << r.err;
  r = run_command(run_calibrate_command, {"--out", "x.json", "--layers", "0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("layers must be >= 1, got 0"), std::string::npos) << r.err;
  r = run_command(run_calibrate_command, {"--predict", "missing-file.json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("missing-file.json"), std::string::npos) << r.err;
  r = run_command(run_calibrate_command, {"--predict", "h100", "--prefetch", "sometimes"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--prefetch"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = run_command(run_calibrate_command, {"--fit", "run-0.json", "--out", "x.json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--fit and --base go together"), std::string::npos) << r.err;
  r = run_command(run_calibrate_command,
                  {"--fit", "run-0.json", "--base", "h100", "--predict", "h100"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--fit writes --out; it does not go with --predict"), std::string::npos)
      << r.err;
  r = run_command(run_calibrate_command,
                  {"--fit", "missing-trace.json", "--base", "h100", "--out", "x.json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("missing-trace.json"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
// `fsdpsim compare`: a simulator trace of a tiny training configuration against the trace
// `fsdpsim train --trace` measures for the same configuration (in-process ranks), a pair that
// describes different ops, and malformed or foreign input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/exec/trainer.h"
#include "cli/subcommands.h"
#include "cli/train_options.h"
#include "core/hardware/hardware_presets.h"
#include "sim/engine/simulator.h"
#include "sim/report/sim_report.h"
#include "tests/cli/cli_test_util.h"

namespace fsdp::cli {
namespace {

using testing::run_command;
namespace fs = std::filesystem;
using nlohmann::json;

// Two ranks, two decoder blocks, two microbatches; small enough for ASan.
const std::vector<std::string> kConfig = {"--mesh",   "dp=2", "--layers",       "2",
                                          "--hidden", "8",    "--ffn",          "16",
                                          "--vocab",  "16",   "--seq-len",      "4",
                                          "--microbatches", "2", "--micro-batch-size", "1"};
constexpr std::int64_t kSteps = 2;

class CompareCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fsdp_compare_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static void write(const std::string& file, const std::string& text) {
    std::ofstream(file) << text;
  }

  // The configuration parsed as `fsdpsim train` parses it.
  static exec::TrainSpec spec() {
    namespace po = boost::program_options;
    TrainOptions options;
    po::options_description desc;
    add_train_options(desc, &options);
    po::variables_map vm;
    po::store(po::command_line_parser(kConfig).options(desc).run(), vm);
    po::notify(vm);
    auto s = make_train_spec(options);
    EXPECT_TRUE(s.has_value()) << s.error().message();
    s->steps = kSteps;
    return *s;
  }

  // The simulator's trace of the configuration (what `fsdpsim simulate --trace` writes).
  std::string simulated() const {
    auto setup = exec::prepare_training(spec());
    EXPECT_TRUE(setup.has_value()) << setup.error().message();
    sim::SimOptions options;
    options.record_trace = true;
    auto result = sim::simulate(setup->schedule, find_hardware_preset("h100").value(), options);
    EXPECT_TRUE(result.has_value()) << result.error().message();
    const std::string file = path("sim.json");
    write(file, sim::chrome_trace(*result, setup->schedule).dump());
    return file;
  }

  // `fsdpsim train --trace` of the configuration.
  std::string measured() const {
    std::vector<std::string> args = kConfig;
    const std::string file = path("real.json");
    args.insert(args.end(), {"--steps", std::to_string(kSteps), "--trace", file});
    const auto r = run_command(run_train_command, args);
    EXPECT_EQ(r.code, 0) << r.err;
    return file;
  }

  fs::path dir_;
};

// Compute and collective ops over every rank's program and step, counted from the schedule.
std::int64_t timed_ops(const exec::TrainSpec& s) {
  auto setup = exec::prepare_training(s);
  EXPECT_TRUE(setup.has_value());
  std::int64_t n = 0;
  for (std::int64_t r = 0; r < setup->config.mesh().size(); ++r) {
    for (const Op& op : setup->schedule.program_of_rank(r).ops) {
      n += is_compute(op.kind) || is_collective(op.kind) ? 1 : 0;
    }
  }
  return n * s.steps;
}

TEST_F(CompareCommandTest, SimulatedAndMeasuredTracesLineUpOpByOp) {
  const std::string sim = simulated();
  const std::string real = measured();
  const auto text = run_command(run_compare_command, {sim, real, "--top", "3"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("ops line up on 2 rank(s), 2 step(s)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("all-gather"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("largest relative differences (top 3)"), std::string::npos) << text.out;

  const auto r = run_command(run_compare_command, {sim, real, "--json", "--top", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("ops").get<std::int64_t>(), timed_ops(spec()));
  EXPECT_EQ(j.at("ranks").get<std::int64_t>(), 2);
  std::int64_t counted = 0;
  double measured_total = 0;
  for (const json& k : j.at("kinds")) {
    counted += k.at("count").get<std::int64_t>();
    measured_total += k.at("measured_us").get<double>();
    EXPECT_GT(k.at("predicted_us").get<double>(), 0.0) << k;
  }
  EXPECT_EQ(counted, j.at("ops").get<std::int64_t>());
  ASSERT_EQ(j.at("steps").size(), 2U);
  for (const json& s : j.at("steps")) {
    // A step spans at least its exposed communication, on both sides.
    EXPECT_GE(s.at("measured_us").get<double>(), s.at("measured_exposed_comm_us").get<double>());
    EXPECT_GE(s.at("predicted_us").get<double>(),
              s.at("predicted_exposed_comm_us").get<double>());
    EXPECT_GT(s.at("measured_us").get<double>(), 0.0);
  }
  // The top list is the largest absolute differences, in decreasing order.
  const json& top = j.at("top_absolute");
  ASSERT_EQ(top.size(), 3U);
  for (std::size_t i = 1; i < top.size(); ++i) {
    EXPECT_GE(std::abs(top[i - 1].at("difference_us").get<double>()),
              std::abs(top[i].at("difference_us").get<double>()));
  }
  EXPECT_DOUBLE_EQ(top[0].at("difference_us").get<double>(),
                   top[0].at("measured_us").get<double>() -
                       top[0].at("predicted_us").get<double>());
  EXPECT_GT(measured_total, 0.0);
}

TEST_F(CompareCommandTest, DifferentOpsAreRejectedNamingTheFirst) {
  const std::string sim = simulated();
  const std::string real = measured();
  json doc = json::parse(std::ifstream(real));
  // Rename the first all-gather of the measured trace and drop its last compute op.
  json* renamed = nullptr;
  std::size_t last_compute = 0;
  json& events = doc.at("traceEvents");
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& ev = events[i];
    if (ev.at("ph") != "X") {
      continue;
    }
    const std::string name = ev.at("name");
    if (renamed == nullptr && name.rfind("all-gather", 0) == 0) {
      renamed = &events[i];
    }
    if (name.rfind("forward", 0) == 0 || name.rfind("backward", 0) == 0) {
      last_compute = i;
    }
  }
  ASSERT_NE(renamed, nullptr);
  const std::string old_name = (*renamed)["name"];
  (*renamed)["args"]["bytes"] = (*renamed)["args"]["bytes"].get<std::int64_t>() + 4;
  const std::string renamed_file = path("renamed.json");
  write(renamed_file, doc.dump());
  const auto r = run_command(run_compare_command, {sim, renamed_file});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("describe different ops (1 difference(s)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'" + old_name + "'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("renamed.json"), std::string::npos) << r.err;

  json dropped = json::parse(std::ifstream(real));
  const std::string lost = dropped["traceEvents"][last_compute]["name"];
  dropped["traceEvents"].erase(last_compute);
  const std::string dropped_file = path("dropped.json");
  write(dropped_file, dropped.dump());
  const auto d = run_command(run_compare_command, {sim, dropped_file});
  EXPECT_EQ(d.code, 1);
  EXPECT_NE(d.err.find("'" + lost + "' is in '" + sim + "' but not in '" + dropped_file + "'"),
            std::string::npos)
      << d.err;
}

TEST_F(CompareCommandTest, MalformedInputIsOneLineNamingFileAndPosition) {
  const std::string sim = simulated();
  const std::string bad = path("bad.json");
  write(bad, "{\"traceEvents\": [\n  {\"ph\": \"X\",, }\n]}");
  auto r = run_command(run_compare_command, {sim, bad});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("'" + bad + "' is not valid JSON at line 2, column"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  const std::string foreign = path("foreign.json");
  write(foreign, "{\"events\": []}");
  r = run_command(run_compare_command, {foreign, sim});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("missing field 'traceEvents'"), std::string::npos) << r.err;

  const std::string no_op = path("no_op.json");
  write(no_op, R"({"traceEvents": [{"ph": "X", "name": "forward block_0", "pid": 0, "tid": 0,
                                    "ts": 1, "dur": 2, "args": {"step": 0}}]})");
  r = run_command(run_compare_command, {sim, no_op});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("traceEvents[0] has no field 'args.op'"), std::string::npos) << r.err;

  r = run_command(run_compare_command, {sim, path("missing.json")});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;

  r = run_command(run_compare_command, {sim});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("expected two trace files"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fsdp::cli

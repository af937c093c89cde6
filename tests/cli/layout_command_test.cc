// SPDX-License-Identifier: Apache-2.0
// End-to-end tests of `fsdpsim layout` through the command function and the real executable.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "cli/subcommands.h"
#include "tests/cli/cli_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fsdp::cli {
namespace {

using testing::Result;
using testing::run_exe;

Result run_layout(std::vector<std::string> args) {
  return testing::run_command(&run_layout_command, std::move(args));
}


TEST(LayoutCommandTest, DrawsTheReferenceDiagramForT1) {
  Result r = run_layout({"--shapes", "2x6,4x4,4x4,1x2,1x6", "--dp", "5"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string expected =
      "rank 0 [ 0, 12): | P0 row 0              | P0 row 1               |\n"
      "rank 1 [12, 24): | P1 row 0      | P1 row 1      | P1 row 2       |\n"
      "rank 2 [24, 36): | P1 row 3      | P3    | gap   | P2 row 0       |\n"
      "rank 3 [36, 48): | P2 row 1      | P2 row 2      | P2 row 3       |\n"
      "rank 4 [48, 60): | P4                    | pad                    |\n";
  EXPECT_EQ(r.out.substr(0, expected.size()), expected);
  EXPECT_NE(r.out.find("size 60 elements: data 52, gap 2, pad 6"), std::string::npos) << r.out;
}

TEST(LayoutCommandTest, UnpaddedSeedExampleCutsAtTheNearestRow) {
  Result r = run_layout({"--shapes", "2x6,4x4,1x2", "--dp", "2", "--shard-layout", "unpadded",
                         "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["size"], 30);
  EXPECT_EQ(j["rank_offsets"], nlohmann::json({0, 16}));
  EXPECT_EQ(j["tensor_offsets"], nlohmann::json({0, 12, 28}));
  EXPECT_EQ(j["statistics"]["max_rank_elements"], 16);
}

TEST(LayoutCommandTest, JsonCarriesOffsetsAndStatistics) {
  Result r = run_layout({"--shapes", "2x6,4x4,4x4,1x2,1x6", "--dp", "5", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tensor_offsets"], nlohmann::json({0, 12, 32, 28, 48}));
  EXPECT_EQ(j["rank_offsets"], nlohmann::json({0, 12, 24, 36, 48}));
  EXPECT_EQ(j["statistics"]["gap_elements"], 2);
  EXPECT_EQ(j["statistics"]["pad_elements"], 6);
  EXPECT_EQ(j["statistics"]["max_rank_bytes"], 24);
}

TEST(LayoutCommandTest, TensorPlacementWithPlannedOwners) {
  Result r = run_layout({"--shapes", "8x8,4x4,4x4,2x2", "--dp", "2", "--placement", "tensor",
                         "--plan-owners", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  // Largest first onto the least-loaded rank: 64 -> r0, 16 -> r1, 16 -> r1, 4 -> r1.
  EXPECT_EQ(j["tensors"][0]["owner"], 0);
  EXPECT_EQ(j["tensors"][1]["owner"], 1);
  EXPECT_EQ(j["tensors"][3]["owner"], 1);
  EXPECT_EQ(j["rank_offsets"], nlohmann::json({0, 64}));
}

TEST(LayoutCommandTest, InvalidInputIsOneLineAndExitOne) {
  Result r = run_layout({"--shapes", "3x5", "--dp", "2", "--placement", "block", "--block", "2"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("fsdpsim: error: "), std::string::npos);
  EXPECT_NE(r.err.find("(3, 5)"), std::string::npos) << r.err;
}

TEST(LayoutCommandTest, UsageErrorsExitTwo) {
  EXPECT_EQ(run_layout({"--dp", "2"}).code, 2);                                  // no tensors
  EXPECT_EQ(run_layout({"--shapes", "2x2"}).code, 2);                            // no --dp
  EXPECT_EQ(run_layout({"--shapes", "2x2", "--dp", "x"}).code, 2);               // bad number
  EXPECT_EQ(run_layout({"--shapes", "2x2", "--dp", "2", "--format", "xml"}).code, 2);
  EXPECT_EQ(run_layout({"--shapes", "2x2", "--dp", "2", "--placement", "tensor"}).code, 2);
  EXPECT_EQ(run_layout({"--shapes", "2x2", "--dp", "2", "--bogus"}).code, 2);
}

TEST(LayoutCommandTest, BadShapesAndDpAreInvalidInput) {
  EXPECT_EQ(run_layout({"--shapes", "2x-2", "--dp", "2"}).code, 1);
  EXPECT_EQ(run_layout({"--shapes", "2x2", "--dp=0"}).code, 1);
  EXPECT_EQ(run_layout({"--shapes", "4x0", "--dp", "2"}).code, 1);
  Result r = run_layout({"--input", "/nonexistent/tensors.json", "--dp", "2"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("/nonexistent/tensors.json"), std::string::npos);
}

TEST(LayoutCommandTest, JsonInputFileWithNames) {
  const std::string path = ::testing::TempDir() + "/fsdp_layout_input.json";
  std::ofstream(path) << R"({"tensors": [{"name": "w1", "shape": [4, 4]},
                                        {"name": "b1", "shape": [4]}]})";
  Result r = run_layout({"--input", path, "--dp", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("P0 = w1 (4, 4)"), std::string::npos) << r.out;
  std::ofstream(path) << R"({"tensors": [{"name": "w1", "shape": [4, "x"]}]})";
  r = run_layout({"--input", path, "--dp", "2"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("'w1'"), std::string::npos) << r.err;
  std::ofstream(path) << "{not json";
  EXPECT_EQ(run_layout({"--input", path, "--dp", "2"}).code, 1);
}

TEST(LayoutCommandTest, LargeLayoutsCollapseRowsAndRanks) {
  Result r = run_layout({"--shapes", "4096x4096,4096,14336x4096", "--dp", "128"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("P0 rows 0-"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ranks not shown"), std::string::npos);
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    EXPECT_LT(line.size(), 200u) << line;
  }
}

TEST(LayoutCommandTest, ModelUnitLayoutUsesTheUnitsParameters) {
  Result r = run_layout({"--model", "llama-3-8b", "--unit", "layers.0", "--dp", "16",
                         "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  // q, k, v, o, gate, up, down and two norms of one Llama 3 8B decoder layer.
  ASSERT_EQ(j["tensors"].size(), 9u);
  EXPECT_EQ(j["statistics"]["data_elements"], 218112000);
  EXPECT_EQ(j["size"].get<std::int64_t>() % 16, 0);
  Result bad = run_layout({"--model", "llama-3-8b", "--unit", "nope", "--dp", "16"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("no unit 'nope'"), std::string::npos) << bad.err;
  EXPECT_EQ(run_layout({"--shapes", "2x2", "--unit", "x", "--dp", "2"}).code, 2);
}

TEST(FsdpsimExecutableTest, VersionHelpAndUnknownCommand) {
  Result v = run_exe("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("fsdpsim ", 0), 0u) << v.out;
  Result h = run_exe("layout --help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("--shard-layout"), std::string::npos);
  Result u = run_exe("frobnicate");
  EXPECT_EQ(u.code, 2);
  EXPECT_NE(u.out.find("unknown command 'frobnicate'"), std::string::npos);
  Result none = run_exe("");
  EXPECT_EQ(none.code, 2);
}

}  // namespace
}  // namespace fsdp::cli

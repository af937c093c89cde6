// SPDX-License-Identifier: Apache-2.0
// End-to-end tests of `fsdpsim schedule` through the command function.
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

Result run_schedule(std::vector<std::string> args) {
  return testing::run_command(&run_schedule_command, std::move(args));
}

// Llama 3 8B imports as 34 units (embedding, 32 layers, head), one trainable bf16 group each.
constexpr int kLlamaGroups = 34;

TEST(ScheduleCommandTest, Zero3SummaryCountsOneGatherPerUnitPerPassAndOneReduceScatter) {
  Result r = run_schedule({"--model", "llama-3-8b", "--mesh", "dp=4", "--microbatches", "2",
                           "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["summary"]["all-gather"]["dp"], 2 * 2 * kLlamaGroups);
  EXPECT_EQ(j["summary"]["reduce-scatter"]["dp"], 2 * kLlamaGroups);
  EXPECT_FALSE(j["summary"].contains("all-reduce"));
  EXPECT_EQ(j["classes"].size(), 1u);
  EXPECT_EQ(j["classes"][0]["num_ranks"], 4);
}

// Issue 19: a tensor-parallel mesh's activation collectives, by site, in text and JSON.
TEST(ScheduleCommandTest, TensorParallelCollectivesNameTheirSites) {
  Result r = run_schedule(
      {"--model", "llama-3-8b", "--layers", "2", "--mesh", "dp=2,tp=4", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["summary"]["all-reduce"]["tp"], 1 + 2 * 4 + 1);
  int sites = 0;
  for (const auto& c : j["collectives"]) {
    if (c["what"] == "activation") {
      EXPECT_EQ(c["axis"], "tp");
      EXPECT_EQ(c["geometry_group"], -1);
      EXPECT_FALSE(c.contains("leg_step"));
      sites += c["site"] == "attention.out" ? 1 : 0;
    }
  }
  EXPECT_EQ(sites, 2);  // one per layer
  Result text = run_schedule({"--model", "llama-3-8b", "--layers", "2", "--mesh", "dp=2,tp=4"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("all-reduce layers.0 attention.out on tp 16777216 x bf16"),
            std::string::npos)
      << text.out;
}

TEST(ScheduleCommandTest, HsdpReducesOuterAxisOnTheLastMicrobatchOnly) {
  Result r = run_schedule({"--model", "llama-3-8b", "--mesh", "dp_outer=2,dp_inner=2",
                           "--strategy", "hsdp", "--microbatches", "3", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["summary"]["reduce-scatter"]["dp_inner"], 3 * kLlamaGroups);
  EXPECT_EQ(j["summary"]["all-reduce"]["dp_outer"], kLlamaGroups);
  for (const auto& op : j["classes"][0]["ops"]) {
    if (op["kind"] == "all-reduce") {
      EXPECT_EQ(op["microbatch"], 2);
    }
  }
}

TEST(ScheduleCommandTest, UnpaddedLayoutsSplitRanksIntoClasses) {
  Result r = run_schedule({"--model", "llama-3-8b", "--mesh", "dp=3", "--shard-layout",
                           "unpadded", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["classes"].size(), 1u);
  int ranks = 0;
  for (const auto& c : j["classes"]) {
    ranks += c["num_ranks"].get<int>();
  }
  EXPECT_EQ(ranks, 3);
}

TEST(ScheduleCommandTest, TextAndDotFormats) {
  Result text = run_schedule({"--mesh", "dp=2", "--max-ops", "5"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("stream all-gather"), std::string::npos);
  EXPECT_NE(text.out.find("more ops"), std::string::npos);
  Result dot = run_schedule({"--mesh", "dp=2", "--format", "dot"});
  ASSERT_EQ(dot.code, 0) << dot.err;
  EXPECT_EQ(dot.out.rfind("digraph", 0), 0u);
  EXPECT_NE(dot.out.find("->"), std::string::npos);
}

TEST(ScheduleCommandTest, BadInputsAreOneLineErrors) {
  Result r = run_schedule({"--strategy", "zero9"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--strategy"), std::string::npos) << r.err;
  EXPECT_EQ(run_schedule({"--mesh", "dp=0"}).code, 1);
  EXPECT_EQ(run_schedule({"--strategy", "hsdp", "--mesh", "dp=4"}).code, 1);
  EXPECT_EQ(run_schedule({"--model", "/nonexistent.json"}).code, 1);
  EXPECT_EQ(run_schedule({"--format", "xml"}).code, 2);
  EXPECT_EQ(run_schedule({"--microbatches", "x"}).code, 2);
  Result zero = run_schedule({"--microbatches", "0"});
  EXPECT_EQ(zero.code, 1);
  EXPECT_EQ(std::count(zero.err.begin(), zero.err.end(), '\n'), 1) << zero.err;
}


// --framework and --reshard-after-forward decide which units are gathered again in backward:
// of the 4 units (embedding, 2 layers, head), PyTorch keeps the root's two gathered; none keeps
// the layers too.
TEST(ScheduleCommandTest, FrameworkAndReshardAfterForwardChangeTheGathers) {
  const auto gathers = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"--format", "json", "--mesh", "dp=2", "--layers", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_schedule(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out).at("summary").at("all-gather").at("dp").get<int>();
  };
  EXPECT_EQ(gathers({}), 8);
  EXPECT_EQ(gathers({"--framework", "fsdp2"}), 6);
  EXPECT_EQ(gathers({"--framework", "fsdp1", "--reshard-after-forward", "all-but-last"}), 5);
  EXPECT_EQ(gathers({"--framework", "fsdp2", "--reshard-after-forward", "none"}), 4);
  EXPECT_EQ(gathers({"--reshard-after-forward", "none"}), 6);
  const auto r = run_schedule({"--framework", "fsdp3"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--framework is 'fsdp3'; expected megatron-fsdp, fsdp2 or fsdp1"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace fsdp::cli

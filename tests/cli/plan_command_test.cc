// SPDX-License-Identifier: Apache-2.0
// `fsdpsim plan`: usage errors are one line with exit 2, a small plan prints its ranking, the
// explanation and the command line that reproduces the winner (planner/plan.h is tested in
// tests/planner/).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/subcommands.h"
#include "tests/cli/cli_test_util.h"

namespace fsdp::cli {
namespace {

using testing::run_command;

std::vector<std::string> small_plan(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--model", "llama-3-8b", "--layers", "2", "--hidden", "512",
                                   "--heads", "8", "--kv-heads", "4", "--ffn", "1024", "--vocab",
                                   "4096", "--seq-len", "1024", "--gpus", "16",
                                   "--global-batch-tokens", "65536", "--tp", "1,2",
                                   "--strategies", "zero3,hsdp", "-j", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(PlanCommandTest, ASmallPlanRanksExplainsAndReproduces) {
  const auto r = run_command(run_plan_command, small_plan());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("rank       #  tok/s/GPU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("best: #"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("runner-up: #"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reproduce the best: fsdpsim simulate --model llama-3-8b"),
            std::string::npos)
      << r.out;
  // The count comes before any simulation, on stderr.
  EXPECT_EQ(r.err.rfind("plan: ", 0), 0u) << r.err;
  const auto j = run_command(run_plan_command, small_plan({"--format", "json"}));
  ASSERT_EQ(j.code, 0) << j.err;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_FALSE(doc["ranking"].empty());
  EXPECT_EQ(doc["global_batch_tokens"], 65536);
  const auto best = doc["configurations"][doc["ranking"][0].get<std::size_t>()];
  EXPECT_EQ(best["status"], "simulated");
  EXPECT_TRUE(best["fits"].get<bool>());
}

TEST(PlanCommandTest, UsageErrorsAreOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--seq-len", "1024", "--global-batch-tokens", "65536"}, "--gpus N or --nodes N"},
      {{"--gpus", "8", "--seq-len", "1024"}, "--global-batch-tokens T or --global-batch-size B"},
      {{"--gpus", "8", "--nodes", "1", "--global-batch-tokens", "8192"}, "give one"},
      {{"--gpus", "8", "--global-batch-tokens", "8192", "--tp", "1,,2"}, "empty item"},
      {{"--gpus", "8", "--global-batch-tokens", "8192", "--format", "xml"}, "--format is 'xml'"},
      {{"--gpus", "8", "--global-batch-tokens", "8192", "--mesh", "dp=8"}, "--mesh"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_command(run_plan_command, args);
    EXPECT_EQ(r.code, kExitUsage) << expected << "\n" << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
  // A value the planner refuses: exit 1, one line naming the option.
  const auto bad = run_command(run_plan_command, {"--gpus", "8", "--seq-len", "1024",
                                                  "--global-batch-tokens", "1000"});
  EXPECT_EQ(bad.code, kExitInvalidInput);
  EXPECT_NE(bad.err.find("--global-batch-tokens is 1000"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
// `fsdpsim train --save/--save-every/--resume` and `fsdpsim checkpoint inspect`, through the real
// binary and the command functions: a resumed run continues the step count and passes --check,
// inspect prints the manifest as text and JSON, and bad uses are one-line errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/subcommands.h"
#include "tests/cli/cli_test_util.h"
#include "tests/temp_dir_util.h"

namespace fsdp::cli {
namespace {

using testing::Result;
using testing::run_exe;
using testing::run_command;

namespace fs = std::filesystem;

const std::string kTiny = " --mesh dp=4 --layers 1 --hidden 8 --ffn 16 --vocab 16 --seq-len 4";


std::string fresh_dir(const std::string& name) {
  return fsdp::testing::fresh_dir("fsdp_ckpt_cli_", name);
}

TEST(CheckpointCommandTest, SavedRunResumesThroughTheBinaryAndPassesTheCheck) {
  const std::string dir = fresh_dir("resume");
  Result saved = run_exe("train --steps 2 --save " + dir + kTiny);
  ASSERT_EQ(saved.code, 0) << saved.out;
  EXPECT_NE(saved.out.find("step 2 loss"), std::string::npos) << saved.out;
  // --steps is the total: two more steps, numbered 3 and 4, checked against the reference.
  Result resumed = run_exe("train --steps 4 --check --resume " + dir + kTiny);
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_EQ(resumed.out.find("step 2 loss"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("step 3 loss"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("step 4 loss"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find(": ok"), std::string::npos) << resumed.out;

  Result text = run_exe("checkpoint inspect " + dir);
  ASSERT_EQ(text.code, 0) << text.out;
  for (const char* line : {"step: 2 (optimizer steps completed)", "next step 2",
                           "saved with: 4 ranks, mesh dp=4, strategy zero3, shard layout padded",
                           "optimizer: adam (2 states per weight)", "layers.0.w1.weight", "[16, 8]",
                           "rank-3.bin: rank 3"}) {
    EXPECT_NE(text.out.find(line), std::string::npos) << line << " in\n" << text.out;
  }
}

TEST(CheckpointCommandTest, InspectJsonIsTheManifest) {
  const std::string dir = fresh_dir("json");
  ASSERT_EQ(run_command(run_train_command, {"--steps", "3", "--save-every", "2", "--save", dir,
                                            "--mesh", "dp=2", "--layers", "1", "--hidden", "8",
                                            "--ffn", "16", "--vocab", "16", "--seq-len", "4"})
                .code,
            0);
  const Result r =
      run_command(run_checkpoint_command, {"inspect", dir + "/step-2", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(doc.is_object()) << r.out;
  EXPECT_EQ(doc["format"], "fsdpsim-checkpoint");
  EXPECT_EQ(doc["step"], 2);
  EXPECT_EQ(doc["saved_with"]["world_size"], 2);
  EXPECT_EQ(doc["shards"].size(), 2U);
  EXPECT_EQ(doc["shards"][1]["file"], "rank-1.bin");
  // The directory itself shows its latest step.
  const Result latest = run_command(run_checkpoint_command, {"inspect", dir});
  EXPECT_NE(latest.out.find("step: 3 "), std::string::npos) << latest.out;
}

TEST(CheckpointCommandTest, BadUsesAreOneLineErrors) {
  const std::string dir = fresh_dir("errors");
  fs::create_directories(dir);
  const Result not_ckpt = run_command(run_checkpoint_command, {"inspect", dir});
  EXPECT_EQ(not_ckpt.code, 1);
  EXPECT_NE(not_ckpt.err.find("not a checkpoint"), std::string::npos) << not_ckpt.err;
  EXPECT_EQ(not_ckpt.err.find('\n'), not_ckpt.err.size() - 1) << not_ckpt.err;

  const Result no_action = run_command(run_checkpoint_command, {});
  EXPECT_EQ(no_action.code, 2);
  const Result no_dir = run_command(run_checkpoint_command, {"inspect"});
  EXPECT_EQ(no_dir.code, 2);
  EXPECT_NE(no_dir.err.find("inspect needs a checkpoint directory"), std::string::npos);
  const Result format = run_command(run_checkpoint_command, {"inspect", dir, "--format", "xml"});
  EXPECT_EQ(format.code, 2);

  const Result every = run_command(run_train_command, {"--save-every", "2"});
  EXPECT_EQ(every.code, 2);
  EXPECT_NE(every.err.find("--save-every needs --save DIR"), std::string::npos) << every.err;

  const Result resume = run_command(run_train_command, {"--resume", dir, "--steps", "1"});
  EXPECT_EQ(resume.code, 1);
  EXPECT_NE(resume.err.find("not a checkpoint"), std::string::npos) << resume.err;
  EXPECT_EQ(resume.err.find('\n'), resume.err.size() - 1) << resume.err;
}

TEST(CheckpointCommandTest, HelpTeachesTheTotalStepCount) {
  const Result train = run_command(run_train_command, {"--help"});
  EXPECT_NE(train.out.find("--steps counts all steps"), std::string::npos) << train.out;
  EXPECT_NE(train.out.find("--resume ckpt"), std::string::npos) << train.out;
  const Result inspect = run_command(run_checkpoint_command, {"--help"});
  EXPECT_EQ(inspect.code, 0);
  EXPECT_NE(inspect.out.find("fsdpsim checkpoint inspect ckpt"), std::string::npos) << inspect.out;
}

}  // namespace
}  // namespace fsdp::cli

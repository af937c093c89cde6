// SPDX-License-Identifier: Apache-2.0
// `--config FILE.toml` and `--profile NAME` on simulate and plan (docs/cli.md, "Config files and
// profiles"): a torchtitan file gives the figures of the equivalent flags, the command line wins,
// the fields not used are listed once, and bad input is one line with exit 1.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/subcommands.h"
#include "core/model/model_presets.h"
#include "tests/cli/cli_test_util.h"
#include "tests/temp_dir_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fsdp::cli {
namespace {

using testing::run_command;

std::string testdata(const std::string& name) {
  return std::string(FSDP_SOURCE_DIR) + "/tests/cli/testdata/torchtitan/" + name;
}

// The preset torchtitan's llama3 8B maps to: Llama 3.1's when this build has it.
std::string preset_8b() {
  return find_model_preset("llama-3.1-8b") != nullptr ? "llama-3.1-8b" : "llama-3-8b";
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string dir = fsdp::testing::fresh_dir("config_option_", name);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

TEST(ConfigOptionTest, TorchtitanFileGivesTheFiguresOfTheEquivalentFlags) {
  const auto from_file = run_command(run_simulate_command, {"--config", testdata("llama3_8b.toml"),
                                                            "--mesh", "dp=64", "--format", "json"});
  ASSERT_EQ(from_file.code, 0) << from_file.err;
  // What the file says, as flags (docs/cli.md, "Config files and profiles").
  const auto from_flags = run_command(run_simulate_command, {"--model",
                                                             preset_8b(),
                                                             "--mesh",
                                                             "dp=64",
                                                             "--strategy",
                                                             "zero3",
                                                             "--seq-len",
                                                             "8192",
                                                             "--micro-batch-size",
                                                             "1",
                                                             "--microbatches",
                                                             "1",
                                                             "--recompute",
                                                             "selective-op",
                                                             "--framework",
                                                             "fsdp2",
                                                             "--reshard-after-forward",
                                                             "all-but-last",
                                                             "--param-dtype",
                                                             "bf16",
                                                             "--reduce-dtype",
                                                             "fp32",
                                                             "--compute-dtype",
                                                             "bf16",
                                                             "--optimizer",
                                                             "adam",
                                                             "--format",
                                                             "json"});
  ASSERT_EQ(from_flags.code, 0) << from_flags.err;
  nlohmann::json a = nlohmann::json::parse(from_file.out);
  const nlohmann::json b = nlohmann::json::parse(from_flags.out);
  ASSERT_TRUE(a.contains("config_ignored_fields"));
  EXPECT_FALSE(b.contains("config_ignored_fields"));
  const auto ignored = a.at("config_ignored_fields").get<std::vector<std::string>>();
  EXPECT_EQ(ignored.front(), "job.dump_folder");
  EXPECT_NE(std::find(ignored.begin(), ignored.end(), "optimizer.lr"), ignored.end());
  a.erase("config_ignored_fields");
  EXPECT_EQ(a, b);
  EXPECT_EQ(count_of(from_file.err, "config: ignored fields: job.dump_folder, job.description"), 1u)
      << from_file.err;
}

TEST(ConfigOptionTest, CommandLineWinsOverTheFileAndTheFileOverTheProfile) {
  const auto r =
      run_command(run_simulate_command,
                  {"--profile", "megatron-fsdp", "--config", testdata("llama3_8b.toml"), "--mesh",
                   "dp=8", "--seq-len", "2048", "--recompute", "none", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("recompute").at("mode"), "none");
  // seq-len 2048 x micro-batch 1 (the file's) x 8 data ranks x 1 microbatch (the file's).
  EXPECT_EQ(j.at("tokens_per_step"), 2048 * 8);
  EXPECT_EQ(j.at("framework").at("framework"), "fsdp2");  // the file over the profile
  EXPECT_EQ(j.at("framework").at("reshard_after_forward"), "all-but-last");
  EXPECT_EQ(j.at("compute_model").at("kernels"), "te");  // the file says nothing: the profile's
}

TEST(ConfigOptionTest, ProfileDefaultsApply) {
  const auto plain = run_command(run_simulate_command,
                                 {"--mesh", "dp=8", "--microbatches", "1", "--format", "json"});
  const auto titan = run_command(run_simulate_command, {"--profile", "torchtitan", "--mesh", "dp=8",
                                                        "--microbatches", "1", "--format", "json"});
  const auto flags = run_command(
      run_simulate_command, {"--framework", "fsdp2", "--reshard-after-forward", "all-but-last",
                             "--reduce-dtype", "fp32", "--param-dtype", "bf16", "--kernels",
                             "torch", "--mesh", "dp=8", "--microbatches", "1", "--format", "json"});
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(titan.code, 0) << titan.err;
  ASSERT_EQ(flags.code, 0) << flags.err;
  EXPECT_EQ(titan.out, flags.out);
  EXPECT_NE(titan.out, plain.out);
  EXPECT_EQ(titan.err.find("config:"), std::string::npos);  // no file, no list
}

TEST(ConfigOptionTest, BadInputIsOneLineAndExitOne) {
  const std::string syntax = write_file("syntax.toml", "[training]\nseq_len = = 3\n");
  const std::string pp = write_file("pp.toml", "[parallelism]\npipeline_parallel_degree = 4\n");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--profile", "deepspeed"},
       "--profile is 'deepspeed'; expected torchtitan or megatron-fsdp"},
      {{"--config", "/nonexistent/job.toml"}, "/nonexistent/job.toml"},
      {{"--config", syntax}, "syntax.toml:2:"},
      {{"--config", pp, "--mesh", "dp=8"}, "pp.toml:2: parallelism.pipeline_parallel_degree"},
      {{"--config", testdata("llama3_70b.toml")}, "give --mesh, e.g. dp=64,tp=8"},
  };
  for (const auto& [args, part] : cases) {
    for (CommandFn command : {&run_simulate_command, &run_plan_command}) {
      std::vector<std::string> all = args;
      if (command == &run_plan_command) {
        if (part.find("--mesh") != std::string::npos) {
          continue;  // plan chooses the mesh itself
        }
        all.erase(std::remove(all.begin(), all.end(), "dp=8"), all.end());
        all.erase(std::remove(all.begin(), all.end(), "--mesh"), all.end());
        all.insert(all.end(), {"--gpus", "8", "--global-batch-size", "8"});
      }
      const auto r = run_command(command, all);
      EXPECT_EQ(r.code, 1) << all.front() << " " << r.err;
      EXPECT_EQ(count_of(r.err, "\n"), 1u) << r.err;
      EXPECT_NE(r.err.find(part), std::string::npos) << "'" << part << "' not in " << r.err;
    }
  }
}

TEST(ConfigOptionTest, PlanTakesJobSizeAndGlobalBatchFromTheFile) {
  const std::string job = write_file("job.toml", R"(
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 2
global_batch_size = 64
seq_len = 4096
[parallelism]
data_parallel_shard_degree = 8
tensor_parallel_degree = 2
[activation_checkpoint]
mode = "full"
)");
  const auto r = run_command(run_plan_command, {"--config", job, "--dry-run", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("gpus"), 16);                        // 8 x tp 2
  EXPECT_EQ(j.at("global_batch_tokens"), 64 * 4096);  // global_batch_size x seq_len
  // The planner chooses the checkpointing and the micro-batch size itself.
  EXPECT_EQ(j.at("config_ignored_fields"),
            (nlohmann::json{"training.local_batch_size", "activation_checkpoint.mode"}));
  EXPECT_EQ(count_of(r.err,
                     "config: ignored fields: training.local_batch_size, "
                     "activation_checkpoint.mode\n"),
            1u)
      << r.err;
  // The command line wins.
  const auto given = run_command(
      run_plan_command, {"--config", job, "--gpus", "32", "--dry-run", "--format", "json"});
  ASSERT_EQ(given.code, 0) << given.err;
  const auto g = nlohmann::json::parse(given.out);
  EXPECT_EQ(g.at("gpus"), 32);
  EXPECT_EQ(g.at("global_batch_tokens"), 64 * 4096);
  // The degrees gave neither the size nor the batch this time: listed as not used.
  EXPECT_EQ(g.at("config_ignored_fields"),
            (nlohmann::json{"training.local_batch_size", "parallelism.data_parallel_shard_degree",
                            "parallelism.tensor_parallel_degree", "activation_checkpoint.mode"}));
  // torchtitan's 8B file leaves the job size to the GPUs: plan asks for it.
  const auto missing = run_command(run_plan_command, {"--config", testdata("llama3_8b.toml")});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("give --gpus N or --nodes N"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace fsdp::cli

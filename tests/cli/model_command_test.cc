// SPDX-License-Identifier: Apache-2.0
// `fsdpsim model` through its command function: presets, files of both kinds, every format, and
// one-line errors with the documented exit codes.
#include <filesystem>
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

Result run_model(std::vector<std::string> args) {
  return testing::run_command(&run_model_command, std::move(args));
}

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(ModelCommandTest, TextListsUnitsTensorsAndTotals) {
  const Result r = run_model({"--preset", "llama-3-8b"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("model llama-3-8b (preset llama-3-8b)"), std::string::npos);
  EXPECT_NE(r.out.find("unit layers.31: 9 tensors, 218,112,000 parameters"), std::string::npos)
      << r.out.substr(0, 2000);
  EXPECT_NE(r.out.find("model.layers.0.mlp.down_proj.weight"), std::string::npos);
  EXPECT_NE(r.out.find("[4096, 14336]"), std::string::npos);
  EXPECT_NE(r.out.find("parameters           8,030,261,248 (8.03 B)"), std::string::npos);
  EXPECT_TRUE(r.err.empty());
}

TEST(ModelCommandTest, SummaryOmitsTensors) {
  const Result r = run_model({"--preset", "llama-3-8b", "--summary"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("down_proj"), std::string::npos);
  EXPECT_NE(r.out.find("unit head"), std::string::npos);
}

TEST(ModelCommandTest, JsonCarriesIntegerParameters) {
  const Result r = run_model({"--preset", "mixtral-8x7b", "--format", "json", "--seq-len", "2048"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_TRUE(doc["parameters"].is_number_integer());
  EXPECT_EQ(doc["parameters"].get<std::int64_t>(), 46'702'792'704);
  EXPECT_EQ(doc["seq_len"].get<std::int64_t>(), 2048);
  EXPECT_EQ(doc["units"].size(), 34U);
  EXPECT_EQ(doc["flops_per_token"]["training"].get<std::int64_t>(),
            3 * doc["flops_per_token"]["forward"].get<std::int64_t>());
}

TEST(ModelCommandTest, TableHasOneRowPerUnitAndATotal) {
  const Result r = run_model({"--preset", "qwen2.5-7b", "--format", "table"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
  }
  EXPECT_EQ(rows, 1 + 30 + 1);
  EXPECT_NE(r.out.find("7,615,616,512"), std::string::npos);
}

TEST(ModelCommandTest, ConfigFilesOfBothKindsAndModelFormat) {
  const Result model_file = run_model({"--preset", "gpt3-175b", "--format", "model"});
  ASSERT_EQ(model_file.code, 0) << model_file.err;
  const std::string ours = write_temp("fsdpsim_model_cmd_ours.json", model_file.out);
  Result r = run_model({"--config", ours, "--format", "json", "--summary"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["parameters"].get<std::int64_t>(), 174'604'259'328);
  const std::string hub = write_temp(
      "fsdpsim_model_cmd_hub.json",
      R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
          "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 100})");
  r = run_model({"--config", hub});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("fp32"), std::string::npos);
}

TEST(ModelCommandTest, ListShowsThePresets) {
  const Result r = run_model({"--list"});
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("deepseek-v3"), std::string::npos);
  EXPECT_NE(r.out.find("gpt3-175b"), std::string::npos);
}

TEST(ModelCommandTest, BadInputIsOneErrorLine) {
  const std::string bad = write_temp(
      "fsdpsim_model_cmd_bad.json",
      R"({"model_type": "llama", "hidden_size": 100, "intermediate_size": 128,
          "num_attention_heads": 3, "num_hidden_layers": 2, "vocab_size": 100})");
  Result r = run_model({"--config", bad});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "fsdpsim: error: " + bad +
                       ": field 'num_attention_heads': expected a divisor of hidden_size 100, "
                       "got 3\n");
  EXPECT_TRUE(r.out.empty());
  r = run_model({"--preset", "nope"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("expected one of llama-3-8b"), std::string::npos);
  r = run_model({"--config", "/nonexistent.json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("fsdpsim: error: /nonexistent.json: cannot open the file", 0), 0U);
}

TEST(ModelCommandTest, SizesShrinkAPresetIntoTheNetworkTrainRuns) {
  const Result r = run_model({"--preset", "llama-3-8b", "--layers", "2", "--hidden", "256",
                              "--heads", "4", "--kv-heads", "2", "--ffn", "512", "--vocab", "512",
                              "--dtype", "fp32", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["units"].size(), 4U);
  // embedding + head 2 x 512 x 256, per layer q/o 256^2, k/v 128 x 256, MLP 3 x 256 x 512, norms.
  const std::int64_t layer = 2 * 256 * 256 + 2 * 128 * 256 + 3 * 256 * 512 + 2 * 256;
  EXPECT_EQ(doc["parameters"].get<std::int64_t>(), 2 * 512 * 256 + 2 * layer + 256);
  const Result same = run_model({"--preset", "llama-3-8b", "--layers", "2", "--hidden", "256",
                                 "--heads", "4", "--kv-heads", "2", "--ffn", "512", "--vocab",
                                 "512", "--dtype", "fp32", "--format", "model"});
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_NE(same.out.find("\"fp32\""), std::string::npos) << same.out.substr(0, 400);
}

TEST(ModelCommandTest, BadSizesAreOneErrorLine) {
  Result r = run_model({"--preset", "llama-3-8b", "--heads", "3"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "fsdpsim: error: --heads: expected heads that divide the hidden size 4096, got 3\n");
  r = run_model({"--preset", "llama-3-8b", "--layers", "0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "fsdpsim: error: --layers: expected a positive integer, got 0\n");
  r = run_model({"--preset", "llama-3-8b", "--dtype", "int4"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--dtype"), std::string::npos) << r.err;
}

TEST(ModelCommandTest, UsageErrors) {
  EXPECT_EQ(run_model({}).code, 2);
  EXPECT_EQ(run_model({"--preset", "llama-3-8b", "--config", "x.json"}).code, 2);
  EXPECT_EQ(run_model({"--preset", "llama-3-8b", "--format", "yaml"}).code, 2);
  EXPECT_EQ(run_model({"--preset", "llama-3-8b", "--seq-len", "0"}).code, 2);
  EXPECT_EQ(run_model({"--preset", "llama-3-8b", "--seq-len", "x"}).code, 2);
  EXPECT_EQ(run_model({"--help"}).code, 0);
}

}  // namespace
}  // namespace fsdp::cli

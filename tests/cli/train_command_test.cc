// SPDX-License-Identifier: Apache-2.0
// `fsdpsim train --backend`: cuda without a usable GPU (or without CUDA in the binary) is one
// line and exit 1, never a crash; an unknown backend is a usage error. A short CPU run prints
// every step's loss and passes --check.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/backend_registry.h"
#include "cli/subcommands.h"
#include "core/base/strings.h"
#include "tests/cli/cli_test_util.h"

namespace fsdp::cli {
namespace {

using testing::run_command;

TEST(TrainCommandTest, CudaWithoutAUsableGpuIsOneLineAndExitOne) {
  auto cuda = make_train_backend("cuda");
  if (cuda && (*cuda)->check_usable().ok()) {
    GTEST_SKIP() << "a GPU is visible (scripts/gpu-check.sh runs train --backend cuda)";
  }
  const std::string expected =
      cuda ? "fsdpsim: error: backend cuda: no usable GPU (cudaGetDeviceCount: "
           : "fsdpsim: error: --backend cuda: the CUDA backend is not built in this binary";
  const auto r = run_command(run_train_command, {"--backend", "cuda", "--mesh", "dp=2",
                                                 "--steps", "1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line
  EXPECT_EQ(r.out.find("loss"), std::string::npos) << r.out;
}

TEST(TrainCommandTest, UnknownBackendIsAUsageError) {
  const auto r = run_command(run_train_command, {"--backend", "tpu"});
  EXPECT_EQ(r.code, 2);
  // The registry's list: "cpu or cuda", or "cpu" in a binary without CUDA.
  EXPECT_NE(r.err.find("--backend is 'tpu'; expected " + available_backends_text()),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

TEST(TrainCommandTest, CpuRunPrintsEveryStepAndPassesTheCheck) {
  const auto r = run_command(run_train_command,
                             {"--backend", "cpu", "--mesh", "dp=2", "--steps", "2", "--layers",
                              "1", "--hidden", "8", "--ffn", "16", "--vocab", "16", "--seq-len",
                              "4", "--check"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step 1 loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 2 loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": ok"), std::string::npos) << r.out;
  // Each step line gives its time and throughput; the summary gives the global batch: dp=2 x 1
  // microbatch x micro-batch-size 2 (the default) x seq-len 4 = 16 tokens.
  std::istringstream lines(r.out);
  int timed = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("step ", 0) == 0) {
      EXPECT_NE(line.find(" ms, "), std::string::npos) << line;
      EXPECT_NE(line.find(" tokens/s)"), std::string::npos) << line;
      ++timed;
    }
  }
  EXPECT_EQ(timed, 2) << r.out;
  EXPECT_NE(r.out.find("2 steps: median "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens/s (16 tokens per step)"), std::string::npos) << r.out;
}

// The small decoder under both full modes: full recomputes its layers (its embedding and head are
// not blocks), full-all-units every unit; both train as the unsharded reference does.
TEST(TrainCommandTest, SmallDecoderTrainsUnderBothFullModes) {
  for (const char* mode : {"full", "full-all-units"}) {
    const auto r =
        run_command(run_train_command,
                    {"--mesh", "dp=2", "--steps", "2", "--layers", "2", "--hidden", "8", "--ffn",
                     "16", "--vocab", "16", "--seq-len", "4", "--recompute", mode, "--check"});
    ASSERT_EQ(r.code, 0) << mode << ": " << r.err;
    EXPECT_NE(r.out.find(": ok"), std::string::npos) << r.out;
  }
}

// FSDP alone, and beside tensor parallelism (issue 19: dp=2 x tp=2 ranks as threads, a
// vocabulary tp does not divide); the unsharded whole model is the reference.
TEST(TrainCommandTest, LlamaModelTrainsAndPassesTheCheck) {
  for (const auto& [mesh, vocab, recompute] :
       {std::tuple<const char*, const char*, const char*>{"dp=2", "32", ""},
        {"dp=2", "32", "--recompute"},
        {"dp=2", "32", "--recompute=full-all-units"},
        {"dp=2,tp=2", "31", ""},
        {"dp=2,tp=2", "31", "--recompute"},
        {"dp=2,tp=2", "31", "--recompute=full-all-units"}}) {
    std::vector<std::string> args = {
        "--model",    "llama-3-8b", "--layers", "2",  "--hidden",       "16",  "--heads",   "4",
        "--kv-heads", "2",          "--ffn",    "32", "--vocab",        vocab, "--seq-len", "8",
        "--mesh",     mesh,         "--steps",  "3",  "--microbatches", "2",   "--check"};
    if (*recompute != '\0') {
      args.emplace_back(recompute);
    }
    const auto r = run_command(run_train_command, args);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("step 3 loss"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(": ok"), std::string::npos) << r.out;
  }
}

TEST(TrainCommandTest, MixtralTrainsWithExpertParallelismAndPassesTheCheck) {
  for (const char* mesh : {"dp=2,ep=2", "dp=4"}) {
    const std::vector<std::string> args = {"--model",        "mixtral-8x7b",
                                           "--layers",       "2",
                                           "--hidden",       "16",
                                           "--heads",        "4",
                                           "--ffn",          "32",
                                           "--vocab",        "32",
                                           "--seq-len",      "8",
                                           "--mesh",         mesh,
                                           "--steps",        "3",
                                           "--microbatches", "2",
                                           "--check"};
    const auto r = run_command(run_train_command, args);
    ASSERT_EQ(r.code, 0) << mesh << ": " << r.err;
    EXPECT_NE(r.out.find("step 3 loss"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(": ok"), std::string::npos) << r.out;
  }
}

TEST(TrainCommandTest, SplitsItCannotTrainAreOneLine) {
  const std::vector<std::string> llama = {"--model",    "llama-3-8b", "--layers", "1",
                                          "--hidden",   "16",         "--heads",  "4",
                                          "--kv-heads", "2",          "--ffn",    "32"};
  const auto one_line = [&](std::vector<std::string> extra, std::string_view needle,
                            bool with_llama = true) {
    std::vector<std::string> args = with_llama ? llama : std::vector<std::string>{};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_command(run_train_command, args);
    EXPECT_EQ(r.code, 1) << needle;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  };
  one_line({"--mesh", "dp=2,tp=4"}, "decoder config: tp=4 must divide kv_heads, got kv_heads = 2");
  one_line({"--mesh", "dp=2,tp=2"},
           "tp=2 needs a Llama-family model (--model); the small decoder has no attention heads",
           /*with_llama=*/false);
  one_line({"--mesh", "dp=2,tp=2", "--save", "/tmp/fsdpsim-never-written"},
           "checkpoints of a tensor- or expert-parallel run (mesh dp=2,tp=2) are not implemented");
  one_line({"--mesh", "dp=2,ep=2"},
           "decoder config: ep=2 needs a mixture-of-experts model (model_type mixtral)");
  // An axis fsdpsim does not model is never taken for a data-parallel one.
  one_line({"--mesh", "pp=2,dp=2"},
           "--mesh: axis 'pp' is not modelled (pipeline parallelism); expected dp, dp_outer, "
           "dp_inner, dp_shard, dp_replicate, edp, outer, inner, tp or ep");
  const std::vector<std::string> mixtral = {
      "--model", "mixtral-8x7b", "--layers", "1",       "--hidden", "16", "--heads",
      "4",       "--ffn",        "8",        "--vocab", "32"};
  const auto with_mixtral = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = mixtral;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  one_line(with_mixtral({"--mesh", "dp=1,ep=3"}),
           "decoder config: ep=3 must divide experts, got experts = 8", false);
  one_line(with_mixtral({"--mesh", "dp=2,ep=2", "--capacity-factor", "1.1"}),
           "slots per expert) must be a whole number", false);
  one_line(with_mixtral({"--mesh", "dp=2,ep=2", "--save", "/tmp/fsdpsim-never-written"}),
           "checkpoints of a tensor- or expert-parallel run (mesh dp=2,ep=2)", false);
}

TEST(TrainCommandTest, ModelsItCannotTrainAreOneLine) {
  const auto one_line = [](std::vector<std::string> args, std::string_view needle) {
    const auto r = run_command(run_train_command, args);
    EXPECT_EQ(r.code, 1) << needle;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_EQ(r.out.find("loss"), std::string::npos) << r.out;
  };
  one_line({"--model", "deepseek-v3", "--layers", "1"},
           "--model: model 'deepseek-v3': field 'model_type': expected llama, mistral, qwen2 or "
           "mixtral");
  one_line({"--heads", "2"}, "--heads: expected --model too (the small decoder has no attention)");
  one_line({"--model", "llama-3-8b", "--kv-heads", "5"},
           "--kv-heads: expected a divisor of the number of heads 32, got 5");
  one_line({"--model", "lama-3-8b"}, "expected one of llama-3-8b");
  // The training backends recompute whole units only.
  for (const char* mode : {"selective-op", "selective-layer:2", "core-attention"}) {
    one_line({"--recompute", mode},
             str_cat("train --recompute is '", mode,
                     "'; the training backends recompute whole units only: expected none, full "
                     "or full-all-units"));
  }
  one_line({"--recompute", "sometimes"}, "--recompute is 'sometimes'; expected none, full,");
  // The whole 8B network would need ~180 GiB: refused before anything is allocated.
  one_line({"--model", "llama-3-8b", "--steps", "1"}, "training needs about ");
}

// The ranks named in a trace file's "X" events.
std::set<int> ranks_in_trace(const std::string& path) {
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::set<int> ranks;
  if (doc.is_object() && doc.contains("traceEvents")) {
    for (const auto& ev : doc["traceEvents"]) {
      if (ev.value("ph", "") == "X") {
        ranks.insert(ev.value("pid", -1));
      }
    }
  }
  return ranks;
}

TEST(TrainCommandTest, TraceWithRankPlaceholderWritesOneFilePerRank) {
  const std::string dir = ::testing::TempDir() + "/fsdp_train_trace_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::vector<std::string> tiny = {"--backend", "cpu", "--mesh",    "dp=2", "--steps", "1",
                                         "--layers",  "1",   "--hidden",  "8",    "--ffn",   "16",
                                         "--vocab",   "16",  "--seq-len", "4"};
  auto args = tiny;
  args.insert(args.end(), {"--trace", dir + "/r{rank}-of-{rank}.json"});
  auto r = run_command(run_train_command, args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ranks_in_trace(dir + "/r0-of-0.json"), std::set<int>{0});
  EXPECT_EQ(ranks_in_trace(dir + "/r1-of-1.json"), std::set<int>{1});
  EXPECT_FALSE(std::filesystem::exists(dir + "/r{rank}-of-{rank}.json"));
  args = tiny;
  args.insert(args.end(), {"--trace", dir + "/all.json"});
  r = run_command(run_train_command, args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ranks_in_trace(dir + "/all.json"), (std::set<int>{0, 1}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fsdp::cli

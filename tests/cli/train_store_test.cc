// SPDX-License-Identifier: Apache-2.0
// `fsdpsim train --backend cuda --rank R --world-size N --store S` (and FSDP_RANK,
// FSDP_WORLD_SIZE, FSDP_STORE): every malformed launch is one usage-error line naming the flag or
// variable, checked before any GPU probe or store; a valid launch on a machine without a GPU
// reaches the GPU check (and creates no store directory).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/backend_registry.h"
#include "cli/store_launch.h"
#include "cli/subcommands.h"
#include "tests/cli/cli_test_util.h"

namespace fsdp::cli {
namespace {

using testing::run_command;

// Clears the launch variables for the test and restores nothing: each case runs in its own
// process under ctest, and no other test reads them.
class TrainStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {kRankEnv, kWorldSizeEnv, kStoreEnv, "OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                          "PMI_SIZE", "PMI_RANK"}) {
      ::unsetenv(v);
    }
  }
  void TearDown() override { SetUp(); }

  static testing::Result train(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--backend", "cuda", "--mesh", "dp=2", "--steps", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_command(run_train_command, args);
  }

  // One usage-error line (exit 2) that contains `text`.
  static void expect_usage_error(const testing::Result& r, const std::string& text) {
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("fsdpsim train: usage error: " + text), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    EXPECT_EQ(r.out.find("loss"), std::string::npos) << r.out;
  }
};

TEST_F(TrainStoreTest, StoreWithoutRankOrWorldSizeIsAUsageError) {
  expect_usage_error(train({"--store", "file:/tmp/x", "--world-size", "2"}),
                     "--store is set but no rank; expected all of --store, --rank and "
                     "--world-size (or FSDP_STORE, FSDP_RANK, FSDP_WORLD_SIZE)");
  expect_usage_error(train({"--store", "file:/tmp/x", "--rank", "0"}),
                     "--store is set but no world size");
  expect_usage_error(train({"--rank", "0", "--world-size", "2"}), "--rank is set but no store");
}

TEST_F(TrainStoreTest, RankOutsideTheWorldIsAUsageError) {
  expect_usage_error(train({"--store", "file:/tmp/x", "--rank", "2", "--world-size", "2"}),
                     "--rank is 2; expected an integer in [0, 2)");
  expect_usage_error(train({"--store", "file:/tmp/x", "--rank", "-1", "--world-size", "2"}),
                     "--rank is -1; expected an integer in [0, 2)");
  expect_usage_error(train({"--store", "file:/tmp/x", "--rank", "one", "--world-size", "2"}),
                     "--rank is 'one'; expected an integer");
}

TEST_F(TrainStoreTest, WorldSizeMustEqualTheMeshSize) {
  expect_usage_error(train({"--store", "file:/tmp/x", "--rank", "0", "--world-size", "4"}),
                     "--world-size is 4; expected the mesh size, 2");
  expect_usage_error(train({"--store", "file:/tmp/x", "--rank", "0", "--world-size", "0"}),
                     "--world-size is 0; expected at least 1");
}

TEST_F(TrainStoreTest, MalformedStoreIsAUsageError) {
  expect_usage_error(train({"--store", "nfs:/x", "--rank", "0", "--world-size", "2"}),
                     "--store: store 'nfs:/x': unknown kind; expected file:<directory> or "
                     "tcp:<host>:<port>");
  expect_usage_error(train({"--store", "tcp:host:99999", "--rank", "0", "--world-size", "2"}),
                     "--store: store 'tcp:host:99999': port '99999' is not an integer in "
                     "1..65535");
}

TEST_F(TrainStoreTest, StoreNeedsTheCudaBackend) {
  auto r = run_command(run_train_command, {"--backend", "cpu", "--mesh", "dp=2", "--store",
                                           "file:/tmp/x", "--rank", "0", "--world-size", "2"});
  expect_usage_error(r, "--store is set with --backend cpu; expected --backend cuda");
}

TEST_F(TrainStoreTest, UnderMpirunAStoreIsAUsageError) {
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  expect_usage_error(train({"--store", "file:/tmp/x", "--rank", "0", "--world-size", "2"}),
                     "--store is set, but mpirun started this process");
}

TEST_F(TrainStoreTest, VariablesAreReadAndNamedInErrors) {
  ::setenv(kStoreEnv, "file:/tmp/x", 1);
  ::setenv(kWorldSizeEnv, "2", 1);
  ::setenv(kRankEnv, "5", 1);
  expect_usage_error(train({}), "FSDP_RANK is 5; expected an integer in [0, 2)");
  ::setenv(kStoreEnv, "tcp:host", 1);
  ::setenv(kRankEnv, "1", 1);
  expect_usage_error(train({}), "FSDP_STORE: store 'tcp:host': no port");
  ::setenv(kWorldSizeEnv, "two", 1);
  expect_usage_error(train({}), "FSDP_WORLD_SIZE is 'two'; expected an integer");
}

TEST_F(TrainStoreTest, FlagsWinOverVariables) {
  ::setenv(kStoreEnv, "tcp:host", 1);  // malformed, but the flag replaces it
  ::setenv(kWorldSizeEnv, "2", 1);
  ::setenv(kRankEnv, "7", 1);
  expect_usage_error(train({"--store", "file:/tmp/x", "--rank", "3"}),
                     "--rank is 3; expected an integer in [0, 2)");
}

TEST_F(TrainStoreTest, AValidLaunchWithoutAGpuStopsAtTheGpuCheck) {
  auto cuda = make_train_backend("cuda");
  if (cuda && (*cuda)->check_usable().ok()) {
    GTEST_SKIP() << "a GPU is visible (scripts/gpu-check.sh runs the store launch)";
  }
  const std::string expected = cuda ? "fsdpsim: error: backend cuda: no usable GPU"
                                    : "the CUDA backend is not built in this binary";
  const std::string dir = ::testing::TempDir() + "/fsdp_train_store_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const auto r = train({"--store", "file:" + dir, "--rank", "1", "--world-size", "2"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir));  // nothing touched before the check
}

}  // namespace
}  // namespace fsdp::cli

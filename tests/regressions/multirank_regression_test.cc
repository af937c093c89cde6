// SPDX-License-Identifier: Apache-2.0
// Issue 16, class 5 (multi-rank faults): under mpirun, a rank that stalls must not hang the
// others; the error names the rank(s) that did not arrive, is printed once, and the job ends
// within the --timeout. The stall is the test-only hook of cpu::MpiSession::exchange
// (FSDP_TEST_STALL_RANK) or, inside a running collective, of the MPI communicators
// (FSDP_TEST_STALL_COLLECTIVE); a failed setup is sweep's hook (FSDP_TEST_SWEEP_FAIL_SETUP_RANK).
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/regressions/run_fsdpsim.h"

namespace fsdp::regressions {
namespace {

// mpirun from PATH, or empty.
std::string find_mpirun() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = dir + "/mpirun";
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// Runs `mpirun -np N --oversubscribe -x VAR ... fsdpsim args`, with `env` set for the children.
ProcessResult run_mpi(int np, const std::vector<std::pair<std::string, std::string>>& env,
                      const std::vector<std::string>& args) {
  // mpirun as root in CI; Open MPI's own allocations are not ours to leak-check.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
  std::vector<std::string> argv = {find_mpirun(), "-np", std::to_string(np), "--oversubscribe"};
  for (const auto& [name, value] : env) {
    setenv(name.c_str(), value.c_str(), 1);
    argv.push_back("-x");
    argv.push_back(name);
  }
  argv.push_back(FSDPSIM_EXE);
  argv.insert(argv.end(), args.begin(), args.end());
  Limits l;
  // No address-space limit here: RLIMIT_AS would bind mpirun and every rank it starts, and Open
  // MPI maps far more than 1 GB of address space.
  l.address_space_bytes = 0;
  l.timeout_s = 90.0;
  ProcessResult r = run_program(argv, l);
  for (const auto& entry : env) {
    unsetenv(entry.first.c_str());
  }
  return r;
}

const std::vector<std::string> kSweep = {
    "sweep", "--model", FSDP_SOURCE_DIR "/tests/cli/testdata/tiny_llama.json", "--ranks", "8",
    "--strategies", "zero3", "--microbatches", "1", "--prefetch", "0", "--seq-len", "256",
    "--jobs", "1", "--timeout", "3"};

TEST(MultirankRegression, SweepWithAStalledRankNamesItInsteadOfHangingRankZero) {
  // `sweep` under mpirun had no timeout: a stalled rank hung rank 0 forever.
  if (find_mpirun().empty()) {
    GTEST_SKIP() << "no mpirun";
  }
  const ProcessResult r = run_mpi(3, {{"FSDP_TEST_STALL_RANK", "2"}}, kSweep);
  EXPECT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, "did not reach"), 1U) << r.err;  // printed once, not by every rank
  EXPECT_NE(r.err.find("rank 2 did not reach the sweep's setup within 3 s"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(MultirankRegression, SweepSaysWhichRankFailedToSetUpAndWhy) {
  // Rank 0 said only "another MPI rank could not set up the sweep".
  if (find_mpirun().empty()) {
    GTEST_SKIP() << "no mpirun";
  }
  const ProcessResult r = run_mpi(2, {{"FSDP_TEST_SWEEP_FAIL_SETUP_RANK", "1"}}, kSweep);
  EXPECT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // One line of fsdpsim's (mpirun adds its own banner about the exit code), from rank 0 only.
  EXPECT_EQ(count(r.err, "fsdpsim"), 1U) << r.err;
  EXPECT_NE(r.err.find("MPI rank 1 could not set up the sweep: setup failed by"),
            std::string::npos)
      << r.err;
}

TEST(MultirankRegression, TrainWithAStalledRankNamesTheRankThatDidNotArrive) {
  // Every healthy rank's watchdog named only itself ("rank 0: MPI all-gather ... did not
  // complete"), three interleaved lines for one stalled rank.
  if (find_mpirun().empty()) {
    GTEST_SKIP() << "no mpirun";
  }
  const ProcessResult r =
      run_mpi(3, {}, {"train", "--mesh", "dp=3", "--steps", "1", "--hidden", "8", "--ffn", "16",
                      "--vocab", "16", "--seq-len", "4", "--timeout", "3",
                      "--inject-stall-rank", "2"});
  EXPECT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, "fsdpsim: error"), 1U) << r.err;
  EXPECT_NE(r.err.find("rank 2 did not reach the start of training within 3 s"),
            std::string::npos)
      << r.err;
}

const std::vector<std::string> kTinyTrain = {"--steps", "2", "--hidden", "8", "--ffn", "16",
                                             "--vocab", "16", "--seq-len", "4", "--timeout", "3"};

std::vector<std::string> train_args(std::vector<std::string> args) {
  args.insert(args.begin(), "train");
  args.insert(args.end(), kTinyTrain.begin(), kTinyTrain.end());
  return args;
}

TEST(MultirankRegression, StallInsideARunningCollectiveNamesTheRankThatDidNotArrive) {
  // A rank that stopped mid-run (here: rank 2 sleeps before its third collective, the test-only
  // FSDP_TEST_STALL_COLLECTIVE) left each healthy rank's watchdog naming only itself and the
  // collective, once per rank.
  if (find_mpirun().empty()) {
    GTEST_SKIP() << "no mpirun";
  }
  const ProcessResult r =
      run_mpi(3, {{"FSDP_TEST_STALL_COLLECTIVE", "2:3"}}, train_args({"--mesh", "dp=3"}));
  EXPECT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_EQ(count("\n" + r.err, "\nfsdpsim"), 1U) << r.err;  // printed once
  EXPECT_NE(r.err.find("on mesh axis 'dp' ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did not complete within 3 s: rank 2 did not arrive; aborting every rank"),
            std::string::npos)
      << r.err;
}

TEST(MultirankRegression, StalledRankOfTwoGroupsIsNamedOnce) {
  // On an HSDP 2x2 mesh rank 1 is in an 'outer' group and an 'inner' group: both groups' ranks
  // time out on it (at about the same moment), and the job still prints one line, naming rank 1
  // rather than a healthy rank that waits on it in the other group.
  if (find_mpirun().empty()) {
    GTEST_SKIP() << "no mpirun";
  }
  const ProcessResult r =
      run_mpi(4, {{"FSDP_TEST_STALL_COLLECTIVE", "1:7"}},
              train_args({"--mesh", "outer=2,inner=2", "--strategy", "hsdp", "--microbatches",
                          "2"}));
  EXPECT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_EQ(count("\n" + r.err, "\nfsdpsim"), 1U) << r.err;
  EXPECT_NE(r.err.find("did not complete within 3 s: rank 1 did not arrive; aborting every rank"),
            std::string::npos)
      << r.err;
}

TEST(MultirankRegression, StalledRankZeroOfTwoGroupsIsNamedOnceByTheFirstClaim) {
  // Rank 0 stalls on an HSDP 2x2 mesh: its 'inner' group's speaker is rank 1 and its 'outer'
  // group's rank 2, a quarter of a second apart in their waits. In some timings both printed
  // (the abort of the first had not reached the second); now both claim rank 0's watchdog and only
  // the first claim prints.
  if (find_mpirun().empty()) {
    GTEST_SKIP() << "no mpirun";
  }
  const ProcessResult r =
      run_mpi(4, {{"FSDP_TEST_STALL_COLLECTIVE", "0:7"}},
              train_args({"--mesh", "outer=2,inner=2", "--strategy", "hsdp", "--microbatches",
                          "2"}));
  EXPECT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_EQ(count("\n" + r.err, "\nfsdpsim"), 1U) << r.err;
  EXPECT_NE(r.err.find("did not complete within 3 s: rank 0 did not arrive; aborting every rank"),
            std::string::npos)
      << r.err;
}

TEST(MultirankRegression, CommbenchPlainMpiHalfHonoursTheTimeout) {
  // The plain MPI half of commbench ignored --timeout (bare MPI_Barrier between blocks).
  if (find_mpirun().empty()) {
    GTEST_SKIP() << "no mpirun";
  }
  const ProcessResult r =
      run_mpi(2, {{"FSDP_TEST_STALL_RANK", "1"}},
              {"commbench", "--sizes", "4096", "--iters", "2", "--repeats", "1", "--timeout", "3"});
  EXPECT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, "did not reach"), 1U) << r.err;
  EXPECT_NE(r.err.find("rank 1 did not reach a backend block of commbench within 3 s"),
            std::string::npos)
      << r.err;
}

TEST(MultirankRegression, CommbenchBadCommandLineIsPrintedOnceNotByEveryRank) {
  // Every rank printed the same validation error: three ranks, three identical lines.
  if (find_mpirun().empty()) {
    GTEST_SKIP() << "no mpirun";
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"commbench", "--repeats", "0"},
        {"commbench", "--sizes", "0"},
        {"commbench", "--timeout", "nan"},
        {"commbench", "--bogus"}}) {
    SCOPED_TRACE(args.back());
    const ProcessResult r = run_mpi(3, {}, args);
    EXPECT_FALSE(r.timed_out) << r.err;
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_EQ(count("\n" + r.err, "\nfsdpsim"), 1U) << r.err;  // mpirun adds its own banner
    EXPECT_EQ(r.out, "");
  }
}

TEST(MultirankRegression, TrainAndCalibrateBadOptionsArePrintedOnceNotByEveryRank) {
  // Every rank printed the same validation error of train (and calibrate): one line per rank.
  if (find_mpirun().empty()) {
    GTEST_SKIP() << "no mpirun";
  }
  for (const std::vector<std::string>& args :
       {train_args({"--mesh", "dp=3", "--steps", "-1"}),
        train_args({"--mesh", "dp=3", "--save-every", "2"}),
        train_args({"--mesh", "dp=3", "--bogus"}),
        train_args({"--mesh", "dp=3", "--heads", "3"}),
        std::vector<std::string>{"calibrate", "--out", "a.json", "--predict", "b.json"},
        std::vector<std::string>{"calibrate", "--backend", "cuda", "--out", "a.json"}}) {
    SCOPED_TRACE(args[args.size() - 1] + " " + args[1] + " " + args[2] + " " + args[3]);
    const ProcessResult r = run_mpi(3, {}, args);
    EXPECT_FALSE(r.timed_out) << r.err;
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_EQ(count("\n" + r.err, "\nfsdpsim"), 1U) << r.err;  // mpirun adds its own banner
    EXPECT_EQ(r.out, "");
  }
}

TEST(MultirankRegression, CalibrateHonoursTheTimeout) {
  // calibrate's measurement rounds met at bare MPI_Barrier/MPI_Allreduce: no --timeout.
  if (find_mpirun().empty()) {
    GTEST_SKIP() << "no mpirun";
  }
  const std::string dir = make_temp_dir("multirank_calibrate");
  const ProcessResult r =
      run_mpi(2, {{"FSDP_TEST_STALL_RANK", "1"}},
              {"calibrate", "--mesh", "dp=2", "--timeout", "3", "--out", dir + "/cpu.json"});
  EXPECT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, "did not reach"), 1U) << r.err;
  EXPECT_NE(r.err.find("rank 1 did not reach a calibration round within 3 s"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(list_dir(dir).empty());
}

}  // namespace
}  // namespace fsdp::regressions

// SPDX-License-Identifier: Apache-2.0
// Names people know (docs/cli.md): the values users of torchtitan and Megatron-LM type must mean
// what they mean there, be spelled one way in every subcommand, and a mesh axis fsdpsim does not
// model must be an error, never a silent data-parallel axis.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/regressions/expect_error.h"
#include "tests/regressions/run_fsdpsim.h"

namespace fsdp::regressions {
namespace {

constexpr const char* kModelledAxes =
    "expected dp, dp_outer, dp_inner, dp_shard, dp_replicate, edp, outer, inner, tp or ep";

// The small decoder `fsdpsim train` runs in a moment.
std::vector<std::string> small_train(std::vector<std::string> more) {
  std::vector<std::string> args = {"train",    "--steps",   "2",     "--layers", "2",
                                   "--hidden", "8",         "--ffn", "16",       "--vocab",
                                   "16",       "--seq-len", "4"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// `--mesh pp=8,dp=8` simulated 64 data-parallel ranks: pp was taken for one more DP axis.
TEST(NamesRegression, AnAxisNotModelledIsAnErrorInEveryCommandThatTakesAMesh) {
  for (const char* command : {"simulate", "schedule"}) {
    SCOPED_TRACE(command);
    const ProcessResult r = run_fsdpsim({command, "--mesh", "pp=8,dp=8"});
    expect_one_line_error(
        r, 1,
        std::string("--mesh: axis 'pp' is not modelled (pipeline parallelism); ") + kModelledAxes);
    EXPECT_EQ(r.out, "");
  }
  expect_one_line_error(
      run_fsdpsim(small_train({"--mesh", "pp=2,dp=2"})), 1,
      std::string("--mesh: axis 'pp' is not modelled (pipeline parallelism); ") + kModelledAxes);
  expect_one_line_error(run_fsdpsim({"simulate", "--mesh", "dp=4,cp=2"}), 1,
                        "--mesh: axis 'cp' is not modelled (context parallelism); expected dp,");
  expect_one_line_error(run_fsdpsim({"schedule", "--mesh", "sp=2,tp=2"}), 1,
                        "--mesh: axis 'sp' is not modelled (sequence parallelism: "
                        "--sequence-parallel with a tp axis); expected dp,");
  // An unknown name is not a DP axis either; nothing names what it would be.
  expect_one_line_error(run_fsdpsim({"simulate", "--mesh", "dp=4,rows=2"}), 1,
                        std::string("--mesh: axis 'rows' is not modelled; ") + kModelledAxes);
  // sweep builds its meshes from --ranks, --dp-inner, --tp and --ep: there is no --mesh to
  // carry an axis it does not model.
  expect_one_line_error(run_fsdpsim({"sweep", "--mesh", "pp=8,dp=8"}), 2,
                        "unrecognised option '--mesh'");
  expect_one_line_error(run_fsdpsim({"sweep", "--pp", "8"}), 2, "unrecognised option '--pp'");
}

// Every data-parallel name, tp and ep keep working (torchtitan's dp_shard/dp_replicate too).
TEST(NamesRegression, EveryModelledAxisNameIsAccepted) {
  for (const char* mesh : {"dp=8", "dp_outer=2,dp_inner=4", "dp_replicate=2,dp_shard=4",
                           "outer=2,inner=4", "edp=8", "dp=4,tp=2"}) {
    SCOPED_TRACE(mesh);
    const std::string strategy = std::string(mesh).find(',') != std::string::npos &&
                                         std::string(mesh).find("tp") == std::string::npos
                                     ? "hsdp"
                                     : "zero3";
    const ProcessResult r = run_fsdpsim({"schedule", "--mesh", mesh, "--strategy", strategy});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_EQ(run_fsdpsim(small_train({"--mesh", "dp_replicate=2,dp_shard=2", "--strategy", "hsdp"}))
                .exit_code,
            0);
}

// The documented spelling `sgd-momentum` was refused by every command; the underscore spelling
// the code read is now refused on command lines (checkpoint manifests still read it).
TEST(NamesRegression, SgdMomentumIsSpelledOneWayInEverySubcommand) {
  EXPECT_EQ(run_fsdpsim({"simulate", "--optimizer", "sgd-momentum"}).exit_code, 0);
  EXPECT_EQ(run_fsdpsim({"schedule", "--optimizer", "sgd-momentum"}).exit_code, 0);
  EXPECT_EQ(run_fsdpsim(small_train({"--optimizer", "sgd-momentum"})).exit_code, 0);
  const ProcessResult sweep = run_fsdpsim({"sweep", "--ranks", "8", "--strategies", "zero3",
                                           "--layouts", "padded", "--optimizer", "sgd-momentum"});
  EXPECT_EQ(sweep.exit_code, 0) << sweep.err;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"simulate", "--optimizer", "sgd_momentum"},
        small_train({"--optimizer", "sgd_momentum"}),
        std::vector<std::string>{"sweep", "--ranks", "8", "--optimizer", "sgd_momentum"}}) {
    expect_one_line_error(
        run_fsdpsim(args), 1,
        "optimizer 'sgd_momentum' is unknown; expected sgd, sgd-momentum or adam");
  }
}

// `--recompute full` recomputed the embedding and the head too, where torchtitan's and
// Megatron-LM's full checkpointing wrap the transformer blocks only.
TEST(NamesRegression, RecomputeFullIsTheBlocksOnly) {
  const ProcessResult full = run_fsdpsim({"simulate", "--format", "json", "--recompute", "full"});
  const ProcessResult layer =
      run_fsdpsim({"simulate", "--format", "json", "--recompute", "selective-layer:1"});
  const ProcessResult all =
      run_fsdpsim({"simulate", "--format", "json", "--recompute", "full-all-units"});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  ASSERT_EQ(layer.exit_code, 0) << layer.err;
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(full.out.find("\"mode\": \"full\""), std::string::npos);
  EXPECT_NE(all.out.find("\"mode\": \"full-all-units\""), std::string::npos);
  // The same figures as selective-layer:1: only the mode's name differs.
  std::string renamed = layer.out;
  const std::string from = "\"mode\": \"selective-layer:1\"";
  const std::size_t at = renamed.find(from);
  ASSERT_NE(at, std::string::npos);
  renamed.replace(at, from.size(), "\"mode\": \"full\"");
  EXPECT_EQ(full.out, renamed);
  EXPECT_NE(full.out, all.out);
  // A bare --recompute is full.
  const ProcessResult bare = run_fsdpsim({"simulate", "--format", "json", "--recompute"});
  EXPECT_EQ(bare.out, full.out);
}

}  // namespace
}  // namespace fsdp::regressions

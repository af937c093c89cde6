// SPDX-License-Identifier: Apache-2.0
// Sharded checkpoints (backends/exec/checkpoint.h, docs/design/backends.md "Checkpoints"): a run
// saved and resumed equals the uninterrupted run bit for bit on the same configuration, and
// within 1e-6 when it resumes resharded onto another mesh, strategy or layout; the shards hold
// every element exactly once; broken checkpoints are one-line errors naming the file and tensor;
// an interrupted save leaves the previous checkpoint loadable.
#include "backends/exec/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "backends/cpu/in_process_training.h"
#include "backends/exec/checkpoint_manifest.h"
#include "backends/exec/trainer.h"
#include "tests/backends/exec/train_test_util.h"
#include "tests/temp_dir_util.h"

namespace fsdp::exec {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  return fsdp::testing::fresh_dir("fsdp_ckpt_", name);
}

TrainSpec base_spec(std::int64_t steps) {
  TrainSpec spec = testing::tiny_train_spec();
  spec.steps = steps;
  return spec;
}

TrainSpec hsdp_spec(std::int64_t steps) {
  TrainSpec spec = base_spec(steps);
  spec.mesh = parse_device_mesh("outer=2,inner=2").value();
  spec.strategy = Strategy::kHsdp;
  return spec;
}

RankResult run(const TrainSpec& spec) {
  auto ranks = cpu::train_in_process(spec);
  EXPECT_TRUE(ranks.has_value()) << ranks.error().message();
  return ranks ? (*ranks)[0] : RankResult{};
}

std::string run_error(const TrainSpec& spec) {
  auto ranks = cpu::train_in_process(spec);
  return ranks ? std::string("no error") : ranks.error().message();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// 10 steps, against 5 steps + save + resume + 5 steps, on `spec`'s configuration.
void expect_bit_identical_resume(const TrainSpec& spec, const std::string& dir) {
  TrainSpec full = spec;
  full.steps = 10;
  const RankResult whole = run(full);
  ASSERT_EQ(whole.losses.size(), 10U);

  TrainSpec first = spec;
  first.steps = 5;
  first.checkpoint.save_dir = dir;
  const RankResult a = run(first);
  ASSERT_EQ(a.losses.size(), 5U);
  EXPECT_EQ(read_text(dir + "/latest"), "step-5\n");

  TrainSpec second = spec;
  second.steps = 10;
  second.checkpoint.resume_from = dir;
  const RankResult b = run(second);
  EXPECT_EQ(b.first_step, 5);
  ASSERT_EQ(b.losses.size(), 5U);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(a.losses[i], whole.losses[i]) << "step " << i;
    EXPECT_EQ(b.losses[i], whole.losses[5 + i]) << "step " << 5 + i;
  }
  EXPECT_EQ(b.final_params, whole.final_params);
}

TEST(CheckpointTest, ZeroThreeResumeIsBitIdentical) {
  expect_bit_identical_resume(base_spec(10), fresh_dir("zero3"));
}

TEST(CheckpointTest, HsdpResumeIsBitIdentical) {
  expect_bit_identical_resume(hsdp_spec(10), fresh_dir("hsdp"));
}

// Saved with replicated optimizer state (HSDP 2x2: ranks 0/2 and 1/3 hold the same ranges), the
// shard files still hold every element of every tensor exactly once.
TEST(CheckpointTest, ReplicatedStateIsSavedOnce) {
  const std::string dir = fresh_dir("replicas");
  TrainSpec spec = hsdp_spec(2);
  spec.checkpoint.save_dir = dir;
  run(spec);
  auto m = read_checkpoint_manifest(dir + "/step-2");
  ASSERT_TRUE(m.has_value()) << m.error().message();
  ASSERT_EQ(m->shards.size(), 4U);
  std::map<std::pair<int, int>, std::vector<int>> seen;  // tensor -> count per element
  for (std::size_t u = 0; u < m->units.size(); ++u) {
    for (std::size_t p = 0; p < m->units[u].params.size(); ++p) {
      seen[{static_cast<int>(u), static_cast<int>(p)}].assign(
          static_cast<std::size_t>(m->units[u].params[p].numel()), 0);
    }
  }
  for (const ManifestShard& s : m->shards) {
    for (const TensorSlice& r : s.records) {
      for (std::int64_t e = r.range.start; e < r.range.end(); ++e) {
        ++seen[{r.unit, r.param}][static_cast<std::size_t>(e)];
      }
    }
  }
  // Ranks 2 and 3 replicate ranks 0 and 1: they save nothing.
  EXPECT_TRUE(m->shards[2].records.empty());
  EXPECT_TRUE(m->shards[3].records.empty());
  for (const auto& [tensor, counts] : seen) {
    for (std::size_t e = 0; e < counts.size(); ++e) {
      ASSERT_EQ(counts[e], 1) << tensor_name(*m, tensor.first, tensor.second) << " element " << e;
    }
  }
  EXPECT_EQ(m->step, 2);
  EXPECT_EQ(m->data.next_step, 2);
  EXPECT_EQ(m->config.strategy, "hsdp");
  EXPECT_EQ(m->optimizer.kind, "adam");
  EXPECT_EQ(m->optimizer.num_states, 2);
}

// Resumes `to` from `from`'s checkpoint at step 5; losses within 1e-6 of the uninterrupted `from`.
void expect_reshard(const TrainSpec& from, TrainSpec to, const std::string& dir) {
  TrainSpec full = from;
  full.steps = 10;
  const RankResult whole = run(full);
  TrainSpec first = from;
  first.steps = 5;
  first.checkpoint.save_dir = dir;
  run(first);
  to.steps = 10;
  to.checkpoint.resume_from = dir + "/step-5";
  const RankResult b = run(to);
  ASSERT_EQ(b.losses.size(), 5U);
  const std::vector<double> tail(whole.losses.begin() + 5, whole.losses.end());
  EXPECT_LE(max_relative_error(b.losses, tail), 1e-6);
  EXPECT_LE(max_relative_error(b.final_params, whole.final_params), 1e-5);
}

TEST(CheckpointTest, ReshardsFromFourPaddedRanksToTwoUnpadded) {
  TrainSpec to = base_spec(10);
  to.mesh = one_axis_mesh(2);
  to.shard_layout = ShardLayout::kUnpadded;
  // The same 8 samples per step on half the ranks: two microbatches each, and the gradient
  // rule's 1/W averaging halved back (grad_scale / W * sum over 4 microbatch gradients).
  to.microbatches = 2;
  to.grad_scale = 0.5;
  expect_reshard(base_spec(10), to, fresh_dir("to_dp2"));
}

TEST(CheckpointTest, ReshardsFromZeroThreeToHsdp) {
  expect_reshard(base_spec(10), hsdp_spec(10), fresh_dir("to_hsdp"));
}

// The Llama network (attention, RoPE, SwiGLU, biases): the same rules hold, resume bit-identical
// and resharded dp=4 padded -> dp=2 unpadded with recomputation.
TEST(CheckpointTest, LlamaResumesBitIdenticalAndReshards) {
  TrainSpec llama = base_spec(10);
  llama.model = testing::tiny_train_llama(llama.model);
  expect_bit_identical_resume(llama, fresh_dir("llama"));
  TrainSpec to = llama;
  to.mesh = one_axis_mesh(2);
  to.shard_layout = ShardLayout::kUnpadded;
  to.microbatches = 2;
  to.grad_scale = 0.5;
  to.recompute = RecomputePolicy::full_all_units();
  expect_reshard(llama, to, fresh_dir("llama_to_dp2"));
}

// Across the other strategies and placements, and the optimizers with one and no state: the
// saver's replicas or owners never matter to the reader.
TEST(CheckpointTest, ReshardsAcrossStrategiesAndOptimizers) {
  struct Pair {
    const char* name;
    Strategy from;
    bool from_atomic;
    Strategy to;
    bool to_atomic;
    OptimizerKind optimizer;
  };
  for (const Pair& p : {Pair{"noshard_to_zero1", Strategy::kNoShard, false, Strategy::kZero1, false,
                             OptimizerKind::kAdam},
                        Pair{"zero2_atomic_to_zero3", Strategy::kZero2, true, Strategy::kZero3,
                             false, OptimizerKind::kSgdMomentum},
                        Pair{"zero3_to_zero1_atomic", Strategy::kZero3, false, Strategy::kZero1,
                             true, OptimizerKind::kSgd}}) {
    SCOPED_TRACE(p.name);
    TrainSpec from = base_spec(10);
    from.strategy = p.from;
    from.tensor_atomic = p.from_atomic;
    from.optimizer = p.optimizer;
    TrainSpec to = from;
    to.strategy = p.to;
    to.tensor_atomic = p.to_atomic;
    expect_reshard(from, to, fresh_dir(p.name));
  }
}

// Manifests written before 2026-12-04 spell the optimizer "sgd_momentum"; the command line now
// says sgd-momentum only (docs/cli.md), and such a checkpoint still resumes bit-identically.
TEST(CheckpointTest, AManifestWithTheOldMomentumSpellingResumes) {
  const std::string dir = fresh_dir("old_momentum_spelling");
  TrainSpec spec = base_spec(10);
  spec.optimizer = OptimizerKind::kSgdMomentum;
  TrainSpec whole = spec;
  const RankResult all = run(whole);
  TrainSpec first = spec;
  first.steps = 5;
  first.checkpoint.save_dir = dir;
  run(first);
  const std::string manifest = dir + "/step-5/manifest.json";
  std::string text = read_text(manifest);
  const std::string now = "\"sgd-momentum\"";
  const std::size_t at = text.find(now);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, now.size(), "\"sgd_momentum\"");
  std::ofstream(manifest, std::ios::trunc) << text;
  ASSERT_EQ(read_checkpoint_manifest(dir + "/step-5").value().optimizer.kind, "sgd-momentum");
  TrainSpec second = spec;
  second.checkpoint.resume_from = dir;
  const RankResult b = run(second);
  ASSERT_EQ(b.losses.size(), 5U);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(b.losses[i], all.losses[5 + i]) << "step " << 5 + i;
  }
  EXPECT_EQ(b.final_params, all.final_params);
}

// A saved checkpoint at step 3 of the tiny spec on dp=4 zero3, in `dir`.
TrainSpec save_three(const std::string& dir) {
  TrainSpec spec = base_spec(3);
  spec.checkpoint.save_dir = dir;
  run(spec);
  TrainSpec resume = base_spec(4);
  resume.checkpoint.resume_from = dir;
  return resume;
}

void expect_one_line(const std::string& e, const std::vector<std::string>& parts) {
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  for (const std::string& p : parts) {
    EXPECT_NE(e.find(p), std::string::npos) << "missing '" << p << "' in: " << e;
  }
}

TEST(CheckpointTest, TruncatedShardIsAnErrorNamingFileAndTensor) {
  const std::string dir = fresh_dir("truncated");
  const TrainSpec resume = save_three(dir);
  const std::string file = dir + "/step-3/rank-1.bin";
  fs::resize_file(file, fs::file_size(file) - 10);
  expect_one_line(run_error(resume), {"rank-1.bin", "truncated", "tensor '"});
}

TEST(CheckpointTest, FlippedByteFailsTheChecksum) {
  const std::string dir = fresh_dir("flipped");
  const TrainSpec resume = save_three(dir);
  const std::string file = dir + "/step-3/rank-0.bin";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-5, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-5, std::ios::end);
    f.put(static_cast<char>(c ^ 0x10));
  }
  expect_one_line(run_error(resume), {"rank-0.bin", "fails its checksum", "tensor '"});
  // A flip in the record index is caught by the index checksum.
  const std::string dir2 = fresh_dir("flipped_index");
  const TrainSpec resume2 = save_three(dir2);
  {
    std::fstream f(dir2 + "/step-3/rank-2.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(50);
    f.put('\x7f');
  }
  expect_one_line(run_error(resume2), {"rank-2.bin", "checksum", "tensor '"});
  // Resharded onto 2 ranks, only rank 1 reads rank-3.bin's records: the error reported is its
  // own, not rank 0's word that a peer failed.
  const std::string dir3 = fresh_dir("flipped_reshard");
  TrainSpec resume3 = save_three(dir3);
  resume3.mesh = one_axis_mesh(2);
  resume3.microbatches = 2;
  {
    std::fstream f(dir3 + "/step-3/rank-3.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x55');
  }
  expect_one_line(run_error(resume3), {"rank-3.bin", "fails its checksum", "tensor '"});
}

TEST(CheckpointTest, MissingShardFileIsAnErrorNamingFileAndTensor) {
  const std::string dir = fresh_dir("missing");
  const TrainSpec resume = save_three(dir);
  fs::remove(dir + "/step-3/rank-2.bin");
  expect_one_line(run_error(resume), {"rank-2.bin", "cannot open", "tensor '"});
}

TEST(CheckpointTest, ManifestOfAnotherModelIsAnErrorNamingTheTensor) {
  const std::string dir = fresh_dir("other_model");
  TrainSpec resume = save_three(dir);
  resume.model.ffn = 8;
  expect_one_line(run_error(resume), {"manifest.json", "another model", "tensor 'layers.0.",
                                      "has shape [16, 8]; the model's is [8, 8]"});
  TrainSpec deeper = save_three(fresh_dir("other_depth"));
  deeper.model.layers = 3;
  expect_one_line(run_error(deeper), {"manifest.json", "another model", "unit 3"});
  TrainSpec sgd = save_three(fresh_dir("other_optimizer"));
  sgd.optimizer = OptimizerKind::kSgd;
  expect_one_line(run_error(sgd), {"manifest.json", "adam state", "this run uses sgd"});
}

// The data stream continues only with the saved seed and samples per step.
TEST(CheckpointTest, AnotherSeedOrBatchIsAnError) {
  TrainSpec seed = save_three(fresh_dir("other_seed"));
  seed.model.seed = 8;
  expect_one_line(run_error(seed), {"manifest.json", "data seed is 7", "--seed is 8"});
  TrainSpec batch = save_three(fresh_dir("other_batch"));
  batch.microbatches = 2;
  expect_one_line(run_error(batch),
                  {"manifest.json", "took 8 samples per step", "this run takes 16"});
}

TEST(CheckpointTest, InterruptedSaveLeavesThePreviousCheckpointLoadable) {
  const std::string dir = fresh_dir("interrupted");
  const TrainSpec resume = save_three(dir);
  // A save of step 4 that died before its rename: a tmp directory with a partial shard.
  fs::create_directories(dir + "/step-4.tmp-save");
  std::ofstream(dir + "/step-4.tmp-save/rank-0.bin") << "partial";
  EXPECT_EQ(read_text(dir + "/latest"), "step-3\n");
  TrainSpec whole = base_spec(4);
  const RankResult reference = run(whole);
  const RankResult resumed = run(resume);
  EXPECT_EQ(resumed.first_step, 3);
  ASSERT_EQ(resumed.losses.size(), 1U);
  EXPECT_EQ(resumed.losses[0], reference.losses[3]);
}

TEST(CheckpointTest, SaveEveryKeepsEachStepAndPointsLatestAtTheLast) {
  const std::string dir = fresh_dir("every");
  TrainSpec spec = base_spec(5);
  spec.checkpoint.save_dir = dir;
  spec.checkpoint.save_every = 2;
  run(spec);
  for (const char* step : {"step-2", "step-4", "step-5"}) {
    EXPECT_TRUE(fs::is_regular_file(dir + "/" + step + "/manifest.json")) << step;
    EXPECT_TRUE(fs::is_regular_file(dir + "/" + step + "/rank-3.bin")) << step;
  }
  EXPECT_FALSE(fs::exists(dir + "/step-3"));
  EXPECT_EQ(read_text(dir + "/latest"), "step-5\n");
  // Past the requested total: one line, nothing run.
  TrainSpec resume = base_spec(4);
  resume.checkpoint.resume_from = dir;
  expect_one_line(run_error(resume), {"is at step 5", "--steps 4 counts all steps"});
}

TEST(CheckpointTest, NotACheckpointIsOneLine) {
  const std::string dir = fresh_dir("empty");
  fs::create_directories(dir);
  TrainSpec resume = base_spec(2);
  resume.checkpoint.resume_from = dir;
  expect_one_line(run_error(resume), {dir, "not a checkpoint"});
}

}  // namespace
}  // namespace fsdp::exec

// SPDX-License-Identifier: Apache-2.0
// The planner (docs/design/planner.md): only configurations with the requested global batch; its
// memory and time bounds hold for every simulated configuration; its pruned top K is the top K
// of simulating everything; errors are one line.
#include "planner/plan.h"

#include <algorithm>

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "planner/step_report.h"

namespace fsdp::planner {
namespace {

// A shrunk Llama 3 8B (known architecture) on 16 GPUs: a small space that simulates quickly.
PlanRequest small_request() {
  PlanRequest r;
  r.base.model = "llama-3-8b";
  r.base.sizes.layers = 2;
  r.base.sizes.hidden = 512;
  r.base.sizes.heads = 8;
  r.base.sizes.kv_heads = 4;
  r.base.sizes.ffn = 1024;
  r.base.sizes.vocab = 4096;
  r.base.seq_len = 1024;
  r.base.framework = "fsdp2";
  r.gpus = 16;
  r.global_batch_tokens = 16 * 4 * 1024;  // 4 sequences per GPU without tp
  r.tp_sizes = {1, 2};
  r.strategies = {"zero3", "hsdp", "zero2"};
  r.top = 3;
  r.jobs = 2;
  return r;
}

TEST(PlanTest, EveryConfigurationHasTheGlobalBatch) {
  const PlanResult r = run_plan(small_request(), {}, {}).value();
  ASSERT_FALSE(r.candidates.empty());
  std::set<std::string> meshes;
  for (const PlanCandidate& c : r.candidates) {
    EXPECT_EQ(c.data_ranks * c.options.microbatches * c.options.micro_batch_size *
                  c.options.seq_len,
              16 * 4 * 1024)
        << c.options.mesh;
    meshes.insert(c.options.mesh);
  }
  // Both tp sizes, the two-axis meshes with a shard group of a node's data ranks and more.
  EXPECT_TRUE(meshes.count("dp=16"));
  EXPECT_TRUE(meshes.count("dp=8,tp=2"));
  EXPECT_TRUE(meshes.count("dp_outer=2,dp_inner=8"));
  EXPECT_TRUE(meshes.count("dp_outer=2,dp_inner=4,tp=2"));
  EXPECT_EQ(r.simulated + r.cannot_fit + r.cannot_win + r.invalid + r.failed,
            static_cast<std::int64_t>(r.candidates.size()));
}

TEST(PlanTest, BoundsHoldForEverySimulatedConfiguration) {
  PlanRequest req = small_request();
  req.top = 1000;  // more than the space: nothing is ruled out by the top
  const PlanResult r = run_plan(req, {}, {}).value();
  std::int64_t checked = 0;
  const std::int64_t device = load_hardware_argument("h100")->memory_bytes();
  for (const PlanCandidate& c : r.candidates) {
    if (c.status != CandidateStatus::kSimulated) {
      continue;
    }
    ++checked;
    EXPECT_GE(c.step_time_s, c.step_time_lower_bound_s) << c.index;
    EXPECT_GE(c.compute_s, c.step_time_lower_bound_s) << c.index;
    // The reservation plus the runtime is the device less the headroom.
    EXPECT_LE(c.memory_lower_bound_bytes, device - c.headroom_bytes) << c.index;
  }
  EXPECT_GT(checked, 20);
  EXPECT_EQ(r.cannot_win, 0);
}

TEST(PlanTest, PrunedTopIsTheTopOfEverything) {
  PlanRequest all = small_request();
  all.top = 1000;
  const PlanResult everything = run_plan(all, {}, {}).value();
  const PlanResult pruned = run_plan(small_request(), {}, {}).value();
  EXPECT_LT(pruned.simulated, everything.simulated);
  EXPECT_GT(pruned.cannot_win, 0);
  ASSERT_GE(pruned.ranking.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(pruned.ranking[k], everything.ranking[k]) << k;
  }
  // Ranked best first, each set of equal figures once.
  for (std::size_t k = 1; k < everything.ranking.size(); ++k) {
    const PlanCandidate& a = everything.candidates[static_cast<std::size_t>(everything.ranking[k - 1])];
    const PlanCandidate& b = everything.candidates[static_cast<std::size_t>(everything.ranking[k])];
    EXPECT_GE(a.tokens_per_second_per_gpu, b.tokens_per_second_per_gpu);
    EXPECT_TRUE(a.step_time_s != b.step_time_s || a.peak_reserved_bytes != b.peak_reserved_bytes);
    EXPECT_TRUE(a.fits);
  }
  EXPECT_GE(pruned.explanation.size(), 3u);
  EXPECT_EQ(pruned.explanation[0].rfind("best: #", 0), 0u) << pruned.explanation[0];
}

TEST(PlanTest, AMemoryBoundAboveTheDeviceIsNeverSimulated) {
  PlanRequest req = small_request();
  req.base.sizes = {};  // the whole 8B model on 16 GPUs: noshard and zero1 cannot hold Adam
  req.strategies = {"noshard", "zero3"};
  req.tp_sizes = {1};
  req.recompute = {"none"};
  req.reshard = {"all"};
  req.prefetch = {1};
  req.global_batch_tokens = 16 * 1024;
  const PlanResult r = run_plan(req, {}, {}).value();
  std::int64_t noshard = 0;
  for (const PlanCandidate& c : r.candidates) {
    if (c.options.strategy == "noshard") {
      ++noshard;
      EXPECT_EQ(c.status, CandidateStatus::kCannotFit) << c.note;
    }
  }
  EXPECT_GT(noshard, 0);
}

TEST(PlanTest, BadRequestsAreOneLine) {
  PlanRequest req = small_request();
  req.global_batch_tokens = 1000;  // not a multiple of 1024
  auto r = run_plan(req, {}, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("--global-batch-tokens is 1000"), std::string::npos)
      << r.error().message();
  req = small_request();
  req.gpus = 0;
  r = run_plan(req, {}, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("--gpus is 0"), std::string::npos);
  req = small_request();
  req.strategies = {"zero4"};
  r = run_plan(req, {}, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("--strategies"), std::string::npos);
  req = small_request();
  req.global_batch_tokens = 1024 * 3;  // 3 sequences over 16 or 8 data ranks
  r = run_plan(req, {}, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("do not divide"), std::string::npos) << r.error().message();
}

// The planner stops a simulation when its reservation passes the device; a full simulation of
// the same configuration must then not fit either, and one the planner ran to the end must agree.
TEST(PlanTest, RunsStoppedAtTheirOverflowAreExactlyThoseThatDoNotFit) {
  PlanRequest req = small_request();
  req.base.sizes.layers = 8;
  req.base.sizes.hidden = 4096;
  req.base.sizes.heads = 32;
  req.base.sizes.kv_heads = 8;
  req.base.sizes.ffn = 14336;
  req.base.sizes.vocab = 128256;
  req.base.seq_len = 8192;
  req.gpus = 8;
  req.global_batch_tokens = 8 * 8 * 8192;
  req.strategies = {"zero3", "zero1"};
  req.tp_sizes = {1};
  req.reshard = {"all"};
  req.prefetch = {1};
  req.top = 1000;
  const PlanResult r = run_plan(req, {}, {}).value();
  int stopped = 0;
  int completed = 0;
  for (const PlanCandidate& c : r.candidates) {
    const bool was_stopped = c.status == CandidateStatus::kDoesNotFit;
    if ((!was_stopped && c.status != CandidateStatus::kSimulated) ||
        (was_stopped ? stopped : completed) >= 3) {
      continue;
    }
    (was_stopped ? stopped : completed) += 1;
    const SimulatedStep full = simulate_step(c.options, req.sim).value();
    EXPECT_EQ(full.memory.fits, !was_stopped) << c.index << " " << c.note;
    // The memory bound holds for the whole step, stopped or not.
    EXPECT_LE(c.memory_lower_bound_bytes, full.memory.device_bytes - full.memory.headroom_bytes)
        << c.index;
    EXPECT_GE(full.throughput.step_time_s, c.step_time_lower_bound_s) << c.index;
    if (!was_stopped) {
      EXPECT_DOUBLE_EQ(full.throughput.step_time_s, c.step_time_s);
      EXPECT_EQ(full.memory.headroom_bytes, c.headroom_bytes);
    }
  }
  EXPECT_GT(stopped, 0);
  EXPECT_GT(completed, 0);
  EXPECT_EQ(r.does_not_fit, static_cast<std::int64_t>(std::count_if(
                                r.candidates.begin(), r.candidates.end(), [](const PlanCandidate& c) {
                                  return c.status == CandidateStatus::kDoesNotFit;
                                })));
}

TEST(PlanTest, DryRunSimulatesNothing) {
  PlanRequest req = small_request();
  req.dry_run = true;
  std::int64_t announced_total = -1;
  std::int64_t announced_left = -1;
  const PlanResult r = run_plan(req,
                                [&](std::int64_t total, std::int64_t left) {
                                  announced_total = total;
                                  announced_left = left;
                                },
                                {})
                           .value();
  EXPECT_EQ(r.simulated, 0);
  EXPECT_EQ(announced_total, static_cast<std::int64_t>(r.candidates.size()));
  EXPECT_EQ(announced_left, announced_total - r.cannot_fit - r.invalid);
}

}  // namespace
}  // namespace fsdp::planner

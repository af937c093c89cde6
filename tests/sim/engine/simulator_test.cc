// SPDX-License-Identifier: Apache-2.0
#include "sim/engine/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/schedule/happens_before.h"
#include "core/schedule/schedule_verifier.h"
#include "tests/sim/sim_test_util.h"

namespace fsdp::sim {
namespace {

using testing::collective_op;
using testing::compute_op;
using testing::memory_op;
using testing::program_of;
using testing::round_hardware;
using testing::single_class;
using testing::sync_op;

constexpr std::int64_t kMs = 1'000'000'000;  // ps

TEST(SimulatorTest, TwoComputeOpsRunBackToBack) {
  // 1e12 and 2e12 FLOPs at 1e15 * 0.5: 2 ms then 4 ms.
  const Schedule s = single_class(
      "dp=1", program_of({compute_op(OpKind::kForward, 1'000'000'000'000),
                          compute_op(OpKind::kBackward, 2'000'000'000'000)},
                         0, 0));
  const SimResult r = simulate(s, round_hardware()).value();
  EXPECT_EQ(r.step_time.ps(), 6 * kMs);
  ASSERT_EQ(r.classes.size(), 1u);
  EXPECT_EQ(r.classes[0].compute.ps(), 6 * kMs);
  EXPECT_EQ(r.classes[0].communication.ps(), 0);
  EXPECT_DOUBLE_EQ(r.classes[0].overlap_fraction, 1.0);
}

// AG(unit 0) on the all-gather stream, then compute waits for it, computes, and the next AG
// overlaps with that compute.
Schedule gather_then_compute(const std::string& mesh) {
  return single_class(
      mesh, program_of({collective_op(OpKind::kAllGather, StreamKind::kAllGather, 1'000'000),
                        sync_op(OpKind::kRecord, StreamKind::kAllGather, 0),
                        collective_op(OpKind::kAllGather, StreamKind::kAllGather, 1'000'000),
                        sync_op(OpKind::kRecord, StreamKind::kAllGather, 1),
                        sync_op(OpKind::kWait, StreamKind::kCompute, 0),
                        compute_op(OpKind::kForward, 100'000'000'000),  // 200 us
                        sync_op(OpKind::kWait, StreamKind::kCompute, 1),
                        compute_op(OpKind::kForward, 100'000'000'000)},
                       2, 0));
}

TEST(SimulatorTest, WaitOrdersStreamsAndCollectivesOverlapCompute) {
  // dp=8 intra-node: each AG is 7 us latency + 7 * 2e6 B / 1e11 B/s = 147 us.
  const SimResult r = simulate(gather_then_compute("dp=8"), round_hardware()).value();
  const std::int64_t ag = 147'000'000;
  const std::int64_t fwd = 200'000'000;
  // Second AG ends at 2 * ag < ag + fwd, so it is hidden: the step is ag + 2 fwd.
  EXPECT_EQ(r.step_time.ps(), ag + 2 * fwd);
  const ClassResult& c = r.classes[0];
  EXPECT_EQ(c.communication.ps(), 2 * ag);
  EXPECT_EQ(c.exposed_communication.ps(), ag);
  EXPECT_DOUBLE_EQ(c.overlap_fraction, 0.5);
  ASSERT_EQ(c.comm.size(), 1u);
  EXPECT_EQ(c.comm[0].count, 2);
  EXPECT_EQ(c.comm[0].exposed.ps(), ag);
  ASSERT_EQ(r.collectives.size(), 1u);
  EXPECT_EQ(r.collectives[0].count, 2);
  // Achieved bus bandwidth is below the link's because of the latency term.
  EXPECT_LT(r.collectives[0].bus_bytes_per_s(), 1e11);
  EXPECT_GT(r.collectives[0].bus_bytes_per_s(), 0.9e11);
}

// Compute on two streams at once (a hand-written schedule may do it): a collective under both is
// hidden once, not twice, so its exposure is 0, not negative. The exposure subtracts the time
// during which any compute runs.
TEST(SimulatorTest, CollectiveUnderTwoConcurrentComputeOpsIsHiddenOnce) {
  Op side = compute_op(OpKind::kForward, 100'000'000'000);  // 200 us
  side.stream = StreamKind::kReduceScatter;
  const Schedule s = single_class(
      "dp=8", program_of({collective_op(OpKind::kAllGather, StreamKind::kAllGather, 1'000'000),
                          compute_op(OpKind::kForward, 100'000'000'000), side},
                         0, 0));
  const SimResult r = simulate(s, round_hardware()).value();
  const ClassResult& c = r.classes[0];
  const std::int64_t ag = 147'000'000;
  EXPECT_EQ(r.step_time.ps(), 200'000'000);
  EXPECT_EQ(c.compute.ps(), 400'000'000);  // the sum of the compute ops' durations
  EXPECT_EQ(c.communication.ps(), ag);
  EXPECT_EQ(c.exposed_communication.ps(), 0);
  ASSERT_EQ(c.comm.size(), 1u);
  EXPECT_EQ(c.comm[0].exposed.ps(), 0);
  EXPECT_DOUBLE_EQ(c.overlap_fraction, 1.0);
}

TEST(SimulatorTest, MemoryFollowsAllocAndFreeAndReturnsToRest) {
  RankProgram p = program_of(
      {memory_op(OpKind::kAlloc, StreamKind::kAllGather, 0, 1000),
       memory_op(OpKind::kAlloc, StreamKind::kAllGather, 1, 500, BufferClass::kActivations),
       sync_op(OpKind::kRecord, StreamKind::kAllGather, 0),
       sync_op(OpKind::kWait, StreamKind::kCompute, 0),
       compute_op(OpKind::kForward, 1'000'000'000),
       memory_op(OpKind::kFree, StreamKind::kCompute, 0, 0),
       memory_op(OpKind::kAlloc, StreamKind::kCompute, 2, 200),
       memory_op(OpKind::kFree, StreamKind::kCompute, 2, 0),
       memory_op(OpKind::kFree, StreamKind::kCompute, 1, 0, BufferClass::kActivations)},
      1, 3);
  ResidentBuffer resident;
  resident.buffer_class = BufferClass::kShardedWeights;
  resident.bytes = 4000;
  p.resident.push_back(resident);
  SimOptions o;
  o.record_trace = true;
  const SimResult r = simulate(single_class("dp=1", p), round_hardware(), o).value();
  const MemoryResult& m = r.classes[0].memory;
  EXPECT_EQ(m.resident_bytes, 4000);
  EXPECT_EQ(m.peak_bytes, 5500);
  EXPECT_EQ(m.peak_by_class[static_cast<std::size_t>(BufferClass::kShardedWeights)], 4000);
  EXPECT_EQ(m.peak_by_class[static_cast<std::size_t>(BufferClass::kUnshardedWeights)], 1000);
  EXPECT_EQ(m.peak_by_class[static_cast<std::size_t>(BufferClass::kActivations)], 500);
  EXPECT_EQ(m.end_bytes, 4000);
  EXPECT_TRUE(m.fits);
  ASSERT_FALSE(r.memory_trace.empty());
  for (const MemorySample& sample : r.memory_trace) {
    EXPECT_GE(sample.bytes, m.resident_bytes);
  }
  EXPECT_EQ(r.memory_trace.back().bytes, 4000);
  // Each sample splits its bytes by buffer class: the first (buffer 0's alloc) holds the
  // resident weights and the 1000 gathered bytes; the last holds the resident weights only.
  const auto cls_bytes = [](const MemorySample& sample, BufferClass b) {
    return sample.by_class[static_cast<std::size_t>(b)];
  };
  EXPECT_EQ(cls_bytes(r.memory_trace.front(), BufferClass::kShardedWeights), 4000);
  EXPECT_EQ(cls_bytes(r.memory_trace.front(), BufferClass::kUnshardedWeights), 1000);
  EXPECT_EQ(cls_bytes(r.memory_trace.front(), BufferClass::kActivations), 0);
  EXPECT_EQ(cls_bytes(r.memory_trace[1], BufferClass::kActivations), 500);
  EXPECT_EQ(cls_bytes(r.memory_trace.back(), BufferClass::kShardedWeights), 4000);
  EXPECT_EQ(cls_bytes(r.memory_trace.back(), BufferClass::kActivations), 0);
}

// The per-class split of every sample of a real FSDP step (gathered weights, activations, grads)
// sums to its total, never goes negative, and agrees with the result's own per-class figures: each
// class's most over the samples is its high-water mark, and the first sample at the peak has the
// peak's composition.
TEST(SimulatorTest, MemorySamplesByBufferClassSumToTheTotal) {
  FsdpOptions fo;
  fo.num_microbatches = 2;
  const Schedule s = testing::build(testing::layered_model(4, 512, 256), "dp=2", fo);
  SimOptions o;
  o.record_trace = true;
  const SimResult r = simulate(s, round_hardware(), o).value();
  ASSERT_FALSE(r.memory_trace.empty());
  std::vector<std::array<std::int64_t, kNumBufferClasses>> most(r.classes.size());
  for (std::size_t c = 0; c < r.classes.size(); ++c) {
    most[c] = r.classes[c].memory.resident_by_class;
  }
  std::vector<bool> peak_seen(r.classes.size(), false);
  std::int32_t classes_seen = 0;
  for (const MemorySample& sample : r.memory_trace) {
    std::int64_t sum = 0;
    std::int32_t nonzero = 0;
    for (std::size_t b = 0; b < kNumBufferClasses; ++b) {
      EXPECT_GE(sample.by_class[b], 0);
      sum += sample.by_class[b];
      nonzero += sample.by_class[b] > 0 ? 1 : 0;
      auto& m = most[static_cast<std::size_t>(sample.cls)][b];
      m = std::max(m, sample.by_class[b]);
    }
    EXPECT_EQ(sum, sample.bytes) << "class " << sample.cls << " at " << sample.t.ps() << " ps";
    classes_seen = std::max(classes_seen, nonzero);
    const MemoryResult& mr = r.classes[static_cast<std::size_t>(sample.cls)].memory;
    if (!peak_seen[static_cast<std::size_t>(sample.cls)] && sample.bytes == mr.peak_bytes) {
      peak_seen[static_cast<std::size_t>(sample.cls)] = true;
      EXPECT_EQ(sample.t, mr.peak_time);
      EXPECT_EQ(sample.by_class, mr.peak_by_class);
    }
  }
  // Not a one-class trace: weights, gathered weights, activations and grads live at once.
  EXPECT_GE(classes_seen, 4);
  for (std::size_t c = 0; c < r.classes.size(); ++c) {
    EXPECT_TRUE(peak_seen[c]) << "class " << c;
    EXPECT_EQ(most[c], r.classes[c].memory.high_water_by_class) << "class " << c;
  }
}

TEST(SimulatorTest, ReportsTheFirstOpThatOverflowsMemory) {
  const Schedule s = single_class(
      "dp=1", program_of({memory_op(OpKind::kAlloc, StreamKind::kCompute, 0, 60'000'000'000),
                          memory_op(OpKind::kAlloc, StreamKind::kCompute, 1, 60'000'000'000),
                          memory_op(OpKind::kFree, StreamKind::kCompute, 1, 0),
                          memory_op(OpKind::kFree, StreamKind::kCompute, 0, 0)},
                         0, 2));
  const SimResult r = simulate(s, round_hardware()).value();
  EXPECT_FALSE(r.fits);
  EXPECT_FALSE(r.classes[0].memory.fits);
  EXPECT_EQ(r.classes[0].memory.first_overflow_op, 1);
  EXPECT_EQ(r.classes[0].memory.peak_bytes, 120'000'000'000);
}

// Programs that would deadlock the engine never reach it: Schedule::make's verifier rejects them.
TEST(SimulatorTest, AWaitOnAnEventNeverRecordedIsNoSchedule) {
  const auto s = testing::try_single_class(
      "dp=1", program_of({sync_op(OpKind::kWait, StreamKind::kCompute, 0),
                          compute_op(OpKind::kForward, 1000)},
                         1, 0));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(s.error().message().find("op 0 (wait, compute stream): waits on event 0, which no op "
                                     "records"),
            std::string::npos)
      << s.error().message();
}

TEST(SimulatorTest, CrossedWaitsAreNoSchedule) {
  // compute waits for e1 before recording e0; all-gather waits for e0 before recording e1.
  const auto s = testing::try_single_class(
      "dp=1", program_of({sync_op(OpKind::kWait, StreamKind::kCompute, 1),
                          sync_op(OpKind::kRecord, StreamKind::kCompute, 0),
                          sync_op(OpKind::kWait, StreamKind::kAllGather, 0),
                          sync_op(OpKind::kRecord, StreamKind::kAllGather, 1)},
                         2, 0));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kCycle);
  EXPECT_NE(s.error().message().find("(the step deadlocks)"), std::string::npos)
      << s.error().message();
}

// Two classes on dp=2; class 1's all-gather stream waits for an event nobody records.
TEST(SimulatorTest, ACollectiveOneClassNeverReachesIsNoSchedule) {
  RankProgram a = program_of({collective_op(OpKind::kAllGather, StreamKind::kAllGather, 100)},
                             0, 0, 0, 1);
  RankProgram b = program_of({sync_op(OpKind::kWait, StreamKind::kAllGather, 1),
                              collective_op(OpKind::kAllGather, StreamKind::kAllGather, 100)},
                             2, 0, 1, 1);
  const auto s = testing::try_schedule("dp=2", {a, b}, {0, 1});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("rank class 1 (rank 1): op 0 (wait, all-gather stream): "
                                     "waits on event 1, which no op records"),
            std::string::npos)
      << s.error().message();
}

TEST(SimulatorTest, CollectiveStartsWhenTheSlowestClassArrives) {
  // Class 0 reaches the AG at once; class 1 only after 2 ms of compute.
  RankProgram a = program_of({collective_op(OpKind::kAllGather, StreamKind::kAllGather, 1'000'000)},
                             0, 0, 0, 1);
  RankProgram b = program_of({compute_op(OpKind::kForward, 1'000'000'000'000),
                              sync_op(OpKind::kRecord, StreamKind::kCompute, 0),
                              sync_op(OpKind::kWait, StreamKind::kAllGather, 0),
                              collective_op(OpKind::kAllGather, StreamKind::kAllGather, 1'000'000)},
                             1, 0, 1, 1);
  const Schedule s = testing::try_schedule("dp=2", {a, b}, {0, 1}).value();
  const SimResult r = simulate(s, round_hardware()).value();
  // AG over 2 ranks: 1 us + 2e6 B / 1e11 B/s = 21 us, starting at 2 ms for both classes.
  const std::int64_t ag = 21'000'000;
  EXPECT_EQ(r.classes[0].end.ps(), 2 * kMs + ag);
  EXPECT_EQ(r.classes[1].end.ps(), 2 * kMs + ag);
  EXPECT_EQ(r.step_time.ps(), 2 * kMs + ag);
}

TEST(SimulatorTest, DifferentCollectiveSequencesAreNoSchedule) {
  RankProgram a = program_of({collective_op(OpKind::kAllGather, StreamKind::kAllGather, 10)},
                             0, 0, 0, 1);
  RankProgram b = program_of({collective_op(OpKind::kReduceScatter, StreamKind::kAllGather, 10)},
                             0, 0, 1, 1);
  const auto s = testing::try_schedule("dp=2", {a, b}, {0, 1});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("rank class 1 (rank 1) op 0 (reduce-scatter"),
            std::string::npos)
      << s.error().message();
}

TEST(SimulatorTest, FreeingAnUnallocatedBufferIsNoSchedule) {
  const auto s = testing::try_single_class(
      "dp=1", program_of({memory_op(OpKind::kFree, StreamKind::kCompute, 0, 0)}, 0, 1));
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("frees buffer 0 before it is allocated"), std::string::npos)
      << s.error().message();
}

TEST(SimulatorTest, AllocatingABufferTwiceIsNoSchedule) {
  const auto s = testing::try_single_class(
      "dp=1", program_of({memory_op(OpKind::kAlloc, StreamKind::kCompute, 0, 100),
                          memory_op(OpKind::kAlloc, StreamKind::kCompute, 0, 100)},
                         0, 1));
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("allocates buffer 0 again (first allocated by op 0"),
            std::string::npos)
      << s.error().message();
}

// --- built schedules ---------------------------------------------------------------------------

using testing::build;
using testing::layered_model;

TEST(SimulatorTest, SingleClassStepEqualsTheCriticalPath) {
  FsdpOptions o;
  o.num_microbatches = 2;
  const Schedule s = build(layered_model(4, 1024, 1024), "dp=4", o);
  ASSERT_EQ(s.programs().size(), 1u);
  const Hardware hw = round_hardware();
  SimOptions so;
  so.contention = false;
  const SimResult r = simulate(s, hw, so).value();
  // With one class and no link sharing nothing but stream order and events delays an op, so the
  // DES must reproduce the longest path of the happens-before DAG weighted by the cost models.
  const auto links = axis_links(s.mesh(), hw);
  const auto cp = critical_path(s.programs()[0], [&](const Op& op) -> std::int64_t {
    if (is_collective(op.kind)) {
      std::int64_t e = op.elements;
      const auto& members = s.collectives()[static_cast<std::size_t>(op.collective)].member_elements;
      for (std::int64_t m : members) {
        e = std::max(e, m);
      }
      return collective_cost(op.kind, e, op.dtype, links[static_cast<std::size_t>(op.axis)], {})
          ->duration.ps();
    }
    return compute_cost(op, hw, {})->ps();
  });
  ASSERT_TRUE(cp) << cp.error().message();
  EXPECT_EQ(r.step_time.ps(), cp->length);
  EXPECT_GT(r.classes[0].communication.ps(), 0);
  EXPECT_EQ(r.classes[0].memory.end_bytes, r.classes[0].memory.resident_bytes);
}

TEST(SimulatorTest, OneRankStepIsTheSumOfComputeOps) {
  // dp=1: every collective is free, so the step is the compute stream's serial sum.
  const Schedule s = build(layered_model(3, 512, 256), "dp=1");
  const Hardware hw = round_hardware();
  std::int64_t sum = 0;
  for (const Op& op : s.programs()[0].ops) {
    sum += compute_cost(op, hw, {})->ps();
  }
  const SimResult r = simulate(s, hw).value();
  EXPECT_EQ(r.step_time.ps(), sum);
  EXPECT_EQ(r.classes[0].compute.ps(), sum);
}

TEST(SimulatorTest, IdenticalInputGivesIdenticalResult) {
  FsdpOptions o;
  o.num_microbatches = 3;
  const Schedule s = build(layered_model(5, 300, 7), "dp=3", o);
  SimOptions so;
  so.record_trace = true;
  const SimResult a = simulate(s, round_hardware(), so).value();
  const SimResult b = simulate(s, round_hardware(), so).value();
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a.trace.empty());
}

TEST(SimulatorTest, Zero3ModelStatesMatchTheZeroPaper) {
  // ZeRO (Rajbhandari et al. 2020, §5.1 and Fig. 1): with mixed-precision Adam the model states
  // take 16 bytes per parameter (2 bf16 weight + 2 bf16 grad + 12 fp32 weight and moments, here
  // stored as 4 fp32 main weight + 4 fp32 main grad + 8 moments), so 7.5B parameters on 64
  // ranks need 7.5e9 * 16 / 64 = 1.875e9 bytes per rank.
  const Model m = layered_model(30, 16'000, 15'625);
  const Schedule s = build(m, "dp=64");
  const SimResult r = simulate(s, round_hardware()).value();
  ASSERT_EQ(r.classes.size(), 1u);
  const MemoryResult& mem = r.classes[0].memory;
  const auto& by = mem.resident_by_class;
  const std::int64_t states = by[static_cast<std::size_t>(BufferClass::kShardedWeights)] +
                              by[static_cast<std::size_t>(BufferClass::kMainGrads)] +
                              by[static_cast<std::size_t>(BufferClass::kOptimizerState)];
  EXPECT_NEAR(static_cast<double>(states), 1.875e9, 1.875e9 * 0.001)
      << "sharded weights " << by[0] << ", main grads " << by[1] << ", optimizer " << by[2];
}

}  // namespace
}  // namespace fsdp::sim

// SPDX-License-Identifier: Apache-2.0
// Closed forms for link contention, SM contention, stragglers and serial (no-overlap) execution.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "sim/engine/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace fsdp::sim {
namespace {

using testing::collective_op;
using testing::compute_op;
using testing::program_of;
using testing::round_hardware;
using testing::single_class;
using testing::sync_op;

constexpr std::int64_t kUs = 1'000'000;  // ps

// An all-gather on the AG stream and a reduce-scatter on the RS stream, both issued at t = 0,
// on axes `ag_axis` and `rs_axis`.
Schedule two_collectives(const std::string& mesh, std::int64_t ag_elements,
                         std::int64_t rs_elements, std::int32_t ag_axis = 0,
                         std::int32_t rs_axis = 0, OpKind rs_kind = OpKind::kReduceScatter) {
  return single_class(
      mesh, program_of({collective_op(OpKind::kAllGather, StreamKind::kAllGather, ag_elements, 0,
                                      ag_axis),
                        collective_op(rs_kind, StreamKind::kReduceScatter, rs_elements, 1,
                                      rs_axis)},
                       0, 0));
}

TEST(ContentionTest, TwoInterNodeCollectivesShareTheNetwork) {
  // dp=16 spans two nodes: 15 ring steps of 2e6 B at 1e10 B/s = 3 ms of transfer, 150 us latency.
  const Schedule s = two_collectives("dp=16", 1'000'000, 1'000'000);
  SimOptions alone;
  alone.contention = false;
  EXPECT_EQ(simulate(s, round_hardware(), alone)->step_time.ps(), 3000 * kUs + 150 * kUs);
  // Shared: both transfers run at half rate and end at 6 ms, then their latency.
  const SimResult r = simulate(s, round_hardware()).value();
  EXPECT_EQ(r.step_time.ps(), 6000 * kUs + 150 * kUs);
}

TEST(ContentionTest, AShorterFlowReleasesItsShareWhenItEnds) {
  // AG needs 3 ms of transfer, RS 6 ms: AG ends at 6 ms (half rate); RS has 3 ms left, alone.
  const Schedule s = two_collectives("dp=16", 1'000'000, 2'000'000);
  SimOptions o;
  o.record_trace = true;
  const SimResult r = simulate(s, round_hardware(), o).value();
  ASSERT_EQ(r.trace.size(), 2u);
  for (const TraceRecord& t : r.trace) {
    const std::int64_t expected = t.stream == StreamKind::kAllGather ? 6000 * kUs : 9000 * kUs;
    EXPECT_EQ(t.end.ps(), expected + 150 * kUs) << to_string(t.stream);
  }
}

TEST(ContentionTest, IntraNodeAndInterNodeCollectivesDoNotContend) {
  // HSDP 2 x 8: the inner all-gather uses NVLink (7 us + 140 us), the outer all-reduce the
  // network (ring of 2: 2 steps of 10 us + 2e6 B at 1e10 B/s = 220 us).
  const Schedule s = two_collectives("dp_outer=2,dp_inner=8", 1'000'000, 1'000'000,
                                     /*ag_axis=*/1, /*rs_axis=*/0, OpKind::kAllReduce);
  SimOptions o;
  o.record_trace = true;
  const SimResult r = simulate(s, round_hardware(), o).value();
  EXPECT_EQ(r.step_time.ps(), 220 * kUs);
  for (const TraceRecord& t : r.trace) {
    EXPECT_EQ(t.end.ps(), t.stream == StreamKind::kAllGather ? 147 * kUs : 220 * kUs);
  }
}

TEST(ContentionTest, TwoIntraNodeAxesShareNvlink) {
  // Both axes of a 2 x 4 mesh sit inside one 8-GPU node, so their collectives share NVLink.
  const Schedule s = two_collectives("a=2,b=4", 1'000'000, 1'000'000, /*ag_axis=*/1,
                                     /*rs_axis=*/0);
  // Alone: b moves 3 steps of 2e6 B at 1e11 B/s (60 us), a 1 step (20 us). Shared, a's transfer
  // ends at 40 us, when b has 40 us left alone: b ends at 80 us plus 3 us of latency.
  EXPECT_EQ(simulate(s, round_hardware())->step_time.ps(), 83 * kUs);
}

TEST(ContentionTest, ComputeSlowsWhileACollectiveRuns) {
  // 2 ms of compute while a 147 us all-gather runs: at half speed for 147 us, so
  // 2000 - 147 / 2 us of work remain after it: the compute ends at 147 + 1926.5 us.
  const Schedule s = single_class(
      "dp=8", program_of({collective_op(OpKind::kAllGather, StreamKind::kAllGather, 1'000'000),
                          compute_op(OpKind::kForward, 1'000'000'000'000)},
                         0, 0));
  SimOptions o;
  o.cost.sm_slowdown = 2.0;
  const SimResult r = simulate(s, round_hardware(), o).value();
  EXPECT_EQ(r.step_time.ps(), 147 * kUs + 1'926'500'000);
  EXPECT_EQ(simulate(s, round_hardware())->step_time.ps(), 2000 * kUs);
}

// Compute 2 ms, then an all-gather of 1e6 elements on dp=8 (7 us + 140 us).
Schedule compute_then_gather() {
  return single_class(
      "dp=8", program_of({compute_op(OpKind::kForward, 1'000'000'000'000),
                          sync_op(OpKind::kRecord, StreamKind::kCompute, 0),
                          sync_op(OpKind::kWait, StreamKind::kAllGather, 0),
                          collective_op(OpKind::kAllGather, StreamKind::kAllGather, 1'000'000)},
                         1, 0));
}

TEST(StragglerTest, ASlowRankGatesTheCollectiveOfEveryone) {
  SimOptions o;
  o.straggler = parse_straggler("rank=3,compute=1.5").value();
  const SimResult r = simulate(compute_then_gather(), round_hardware(), o).value();
  EXPECT_EQ(r.step_time.ps(), 3000 * kUs + 147 * kUs);
  EXPECT_EQ(r.baseline_step_time.ps(), 2000 * kUs + 147 * kUs);
  EXPECT_EQ(r.straggler_ranks, 1);
  ASSERT_EQ(r.classes.size(), 2u);
  EXPECT_EQ(r.classes[0].num_ranks, 7);
  EXPECT_FALSE(r.classes[0].straggler);
  EXPECT_EQ(r.classes[1].representative_rank, 3);
  EXPECT_TRUE(r.classes[1].straggler);
  // The fast ranks wait for the straggler, so they end together.
  EXPECT_EQ(r.classes[0].end, r.classes[1].end);
}

TEST(StragglerTest, ASlowLinkSlowsTheWholeRing) {
  SimOptions o;
  o.straggler = parse_straggler("fraction=0.1,link=2").value();
  const SimResult r = simulate(compute_then_gather(), round_hardware(), o).value();
  // ceil(0.1 * 8) = 1 straggler (rank 0); the ring moves at its pace: 7 + 2 * 140 us.
  EXPECT_EQ(r.straggler_ranks, 1);
  EXPECT_EQ(r.classes.back().representative_rank, 0);
  EXPECT_EQ(r.step_time.ps(), 2000 * kUs + 287 * kUs);
}

TEST(StragglerTest, ParsesAndRejects) {
  const Straggler s = parse_straggler(" rank=1, rank=4 ,compute=1.25").value();
  EXPECT_EQ(s.ranks, (std::vector<std::int64_t>{1, 4}));
  EXPECT_DOUBLE_EQ(s.compute_factor, 1.25);
  EXPECT_EQ(parse_straggler(to_string(s)).value(), s);
  for (const char* bad : {"", "rank=1", "compute=2", "rank=1,fraction=0.5,compute=2",
                          "rank=x,compute=2", "rank=1,compute=0.5", "fraction=1.5,link=2",
                          "rank=1,speed=2", "rank"}) {
    const auto r = parse_straggler(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_FALSE(r.error().message().empty());
    }
  }
  SimOptions o;
  o.straggler = parse_straggler("rank=8,compute=2").value();
  const auto r = simulate(compute_then_gather(), round_hardware(), o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("rank 8"), std::string::npos) << r.error().message();
}

TEST(StragglerTest, FractionPicksEvenlySpacedRanks) {
  const auto flags = straggler_flags(parse_straggler("fraction=0.25,link=2").value(), 16).value();
  std::vector<std::int64_t> picked;
  for (std::size_t r = 0; r < flags.size(); ++r) {
    if (flags[r] != 0) {
      picked.push_back(static_cast<std::int64_t>(r));
    }
  }
  EXPECT_EQ(picked, (std::vector<std::int64_t>{0, 4, 8, 12}));
}

TEST(OverlapTest, WithoutOverlapTheStepIsTheSumOfOpTimes) {
  // The program of gather_then_compute: two 147 us gathers and two 200 us forwards; overlapped
  // the second gather hides behind compute, serial it does not.
  const Schedule s = single_class(
      "dp=8", program_of({collective_op(OpKind::kAllGather, StreamKind::kAllGather, 1'000'000),
                          sync_op(OpKind::kRecord, StreamKind::kAllGather, 0),
                          collective_op(OpKind::kAllGather, StreamKind::kAllGather, 1'000'000),
                          sync_op(OpKind::kRecord, StreamKind::kAllGather, 1),
                          sync_op(OpKind::kWait, StreamKind::kCompute, 0),
                          compute_op(OpKind::kForward, 100'000'000'000),
                          sync_op(OpKind::kWait, StreamKind::kCompute, 1),
                          compute_op(OpKind::kForward, 100'000'000'000)},
                         2, 0));
  SimOptions o;
  o.overlap = false;
  EXPECT_EQ(simulate(s, round_hardware(), o)->step_time.ps(), 2 * 147 * kUs + 2 * 200 * kUs);
  EXPECT_EQ(simulate(s, round_hardware())->step_time.ps(), 147 * kUs + 2 * 200 * kUs);
}

}  // namespace
}  // namespace fsdp::sim

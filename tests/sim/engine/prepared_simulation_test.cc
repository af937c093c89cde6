// SPDX-License-Identifier: Apache-2.0
// PreparedSimulation: a prepared schedule runs any number of times, each run equal bit for bit to
// simulate(); errors split between preparation (bad schedules) and running (deadlocks).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>

#include "sim/engine/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace fsdp::sim {
namespace {

using testing::build;
using testing::collective_op;
using testing::compute_op;
using testing::layered_model;
using testing::memory_op;
using testing::program_of;
using testing::round_hardware;
using testing::single_class;
using testing::sync_op;

// Uneven shards (rows not divisible by the group) give several rank classes; stragglers split
// them further and add a baseline run; SM slowdown and contention rescale ops while they run.
SimOptions busy_options() {
  SimOptions o;
  o.straggler = parse_straggler("rank=2,compute=1.5,link=1.25").value();
  o.cost.sm_slowdown = 1.3;
  o.record_trace = true;
  o.record_ops = true;
  return o;
}

Schedule uneven_schedule() {
  FsdpOptions options;
  options.num_microbatches = 2;
  options.shard_layout = ShardLayout::kUnpadded;
  return build(layered_model(5, 103, 64), "dp=4", options);
}

TEST(PreparedSimulationTest, EveryRunEqualsSimulate) {
  const Schedule s = uneven_schedule();
  const SimOptions o = busy_options();
  const SimResult expected = simulate(s, round_hardware(), o).value();
  ASSERT_GT(expected.classes.size(), 2u);
  ASSERT_FALSE(expected.trace.empty());
  ASSERT_FALSE(expected.op_log.empty());
  ASSERT_NE(expected.step_time, expected.baseline_step_time);
  PreparedSimulation prepared = prepare_simulation(s, round_hardware(), o).value();
  for (int run = 0; run < 3; ++run) {
    const SimResult r = prepared.run().value();
    EXPECT_EQ(r, expected) << "run " << run;
    EXPECT_EQ(r.events, expected.events) << "run " << run;
  }
  // A moved prepared simulation keeps its state.
  PreparedSimulation moved = std::move(prepared);
  EXPECT_EQ(moved.run().value(), expected);
}

TEST(PreparedSimulationTest, DifferentOptionsGiveIndependentPreparations) {
  const Schedule s = uneven_schedule();
  SimOptions serial;
  serial.overlap = false;
  PreparedSimulation a = prepare_simulation(s, round_hardware()).value();
  PreparedSimulation b = prepare_simulation(s, round_hardware(), serial).value();
  const SimResult ra = a.run().value();
  const SimResult rb = b.run().value();
  EXPECT_EQ(ra, simulate(s, round_hardware()).value());
  EXPECT_EQ(rb, simulate(s, round_hardware(), serial).value());
  EXPECT_LT(ra.step_time, rb.step_time);  // overlap hides communication
  EXPECT_EQ(a.run().value(), ra);
}

TEST(PreparedSimulationTest, BadOpsAreNoScheduleAndDeadlocksFailEveryRun) {
  // Buffer 3 of a program with 1 buffer: the verifier refuses it before any simulation.
  const auto bad = testing::try_single_class(
      "dp=1", program_of({memory_op(OpKind::kAlloc, StreamKind::kCompute, 3, 1024)}, 0, 1));
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ErrorCode::kOutOfRange);
  EXPECT_NE(bad.error().message().find("buffer 3"), std::string::npos) << bad.error().message();

  // Two classes that issue the same collectives on each stream and are each acyclic, but order
  // them differently across streams: rank 0 gathers (X) before it reduce-scatters (Y), rank 1
  // the other way round. A verified schedule, and a deadlock only a run finds, every run alike.
  RankProgram a = program_of({collective_op(OpKind::kAllGather, StreamKind::kAllGather, 1000, 0),
                              sync_op(OpKind::kRecord, StreamKind::kAllGather, 0),
                              sync_op(OpKind::kWait, StreamKind::kReduceScatter, 0),
                              collective_op(OpKind::kReduceScatter, StreamKind::kReduceScatter,
                                            1000, 1)},
                             1, 0, 0, 1);
  RankProgram b = program_of({collective_op(OpKind::kReduceScatter, StreamKind::kReduceScatter,
                                            1000, 1),
                              sync_op(OpKind::kRecord, StreamKind::kReduceScatter, 0),
                              sync_op(OpKind::kWait, StreamKind::kAllGather, 0),
                              collective_op(OpKind::kAllGather, StreamKind::kAllGather, 1000, 0)},
                             1, 0, 1, 1);
  const Schedule stuck = testing::try_schedule("dp=2", {a, b}, {0, 1}).value();
  PreparedSimulation prepared = prepare_simulation(stuck, round_hardware()).value();
  const auto first = prepared.run();
  const auto second = prepared.run();
  ASSERT_FALSE(first.has_value());
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(first.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(first.error().message().find("deadlock"), std::string::npos)
      << first.error().message();
  EXPECT_EQ(first.error().message(), second.error().message());
  EXPECT_EQ(first.error().message(), simulate(stuck, round_hardware()).error().message());
}

}  // namespace
}  // namespace fsdp::sim

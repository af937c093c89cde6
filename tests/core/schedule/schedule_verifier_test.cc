// SPDX-License-Identifier: Apache-2.0
// The verifier and the happens-before analysis: happens-before by vector clocks, cycle detection
// through Boost.Graph, the critical path on a tiny program, and one broken schedule per check with
// its one-line error; Schedule::make refuses what the verifier rejects.
#include "core/schedule/schedule_verifier.h"

#include "core/base/strings.h"
#include "core/schedule/schedule_builder.h"
#include "tests/core/schedule/schedule_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fsdp {
namespace {

using testing::config_of;
using testing::three_group_model;

Op make_op(OpKind kind, StreamKind stream, std::int32_t event = -1) {
  Op op;
  op.kind = kind;
  op.stream = stream;
  op.event = event;
  return op;
}

RankProgram program_of(std::vector<Op> ops, std::int32_t num_events) {
  RankProgram p;
  p.num_ranks = 1;
  p.ops = std::move(ops);
  p.num_events = num_events;
  return p;
}

ScheduleParts one_rank_schedule(RankProgram p) {
  ScheduleParts parts(testing::mesh_of("dp=1"));
  parts.programs = {std::move(p)};
  parts.rank_class = {0};
  parts.unit_names = {"u"};
  return parts;
}

// The same schedule with other programs (unverified).
ScheduleParts with_programs(const Schedule& s, std::vector<RankProgram> programs) {
  ScheduleParts parts = s.parts();
  parts.programs = std::move(programs);
  return parts;
}

Schedule zero3() {
  return build_schedule(three_group_model(), config_of(Strategy::kZero3, "dp=4"), Workload{})
      .value();
}

std::size_t find_op(const RankProgram& p, OpKind kind, std::int32_t unit, Phase phase) {
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (p.ops[i].kind == kind && p.ops[i].unit == unit && p.ops[i].phase == phase) {
      return i;
    }
  }
  ADD_FAILURE() << "no " << to_string(kind) << " of unit " << unit;
  return 0;
}

// compute: A(0) record(1, e0) C(4); all-gather: B(2) wait(3, e0) D(5).
RankProgram two_stream_program() {
  return program_of({make_op(OpKind::kForward, StreamKind::kCompute),
                     make_op(OpKind::kRecord, StreamKind::kCompute, 0),
                     make_op(OpKind::kCast, StreamKind::kAllGather),
                     make_op(OpKind::kWait, StreamKind::kAllGather, 0),
                     make_op(OpKind::kBackward, StreamKind::kCompute),
                     make_op(OpKind::kCast, StreamKind::kAllGather)},
                    1);
}

TEST(HappensBeforeTest, StreamOrderAndEventsOrderOps) {
  const HappensBefore hb = HappensBefore::make(two_stream_program()).value();
  EXPECT_TRUE(hb.before(0, 1));
  EXPECT_TRUE(hb.before(0, 4));
  EXPECT_TRUE(hb.before(0, 5));   // through the record and the wait
  EXPECT_TRUE(hb.before(2, 5));   // stream order
  EXPECT_FALSE(hb.before(2, 4));  // nothing orders the AG stream before compute
  EXPECT_FALSE(hb.before(4, 5));
  EXPECT_FALSE(hb.before(5, 0));
  EXPECT_FALSE(hb.before(3, 3));
  EXPECT_EQ(hb.event_predecessor(3), 1);
  EXPECT_EQ(hb.stream_predecessor(3), 2);
  EXPECT_EQ(hb.stream_predecessor(0), -1);
  EXPECT_EQ(hb.topological_order().size(), 6u);
}

TEST(HappensBeforeTest, CycleIsKCycleNamingAnOpOnIt) {
  // compute waits for e1 then records e0; all-gather waits for e0 then records e1.
  const RankProgram p = program_of({make_op(OpKind::kWait, StreamKind::kCompute, 1),
                                    make_op(OpKind::kRecord, StreamKind::kCompute, 0),
                                    make_op(OpKind::kWait, StreamKind::kAllGather, 0),
                                    make_op(OpKind::kRecord, StreamKind::kAllGather, 1)},
                                   2);
  const auto hb = HappensBefore::make(p);
  ASSERT_FALSE(hb.has_value());
  EXPECT_EQ(hb.error().code(), ErrorCode::kCycle);
  EXPECT_NE(hb.error().message().find("lies on a cycle"), std::string::npos)
      << hb.error().message();
  const Status st = verify_schedule(one_rank_schedule(p));
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code(), ErrorCode::kCycle);
  EXPECT_EQ(st.error().message().rfind("rank class 0 (rank 0): op ", 0), 0u)
      << st.error().message();
}

TEST(HappensBeforeTest, WaitWithoutRecordIsAnError) {
  const RankProgram p = program_of({make_op(OpKind::kWait, StreamKind::kCompute, 0)}, 1);
  const auto hb = HappensBefore::make(p);
  ASSERT_FALSE(hb.has_value());
  EXPECT_EQ(hb.error().message(),
            "op 0 (wait, compute stream): waits on event 0, which no op "
            "records");
}

TEST(HappensBeforeTest, DoubleRecordIsAnError) {
  const RankProgram p = program_of({make_op(OpKind::kRecord, StreamKind::kCompute, 0),
                                    make_op(OpKind::kRecord, StreamKind::kAllGather, 0)},
                                   1);
  const auto hb = HappensBefore::make(p);
  ASSERT_FALSE(hb.has_value());
  EXPECT_EQ(hb.error().code(), ErrorCode::kFailedPrecondition);
}

TEST(HappensBeforeTest, EventOutOfRangeIsAnError) {
  const RankProgram p = program_of({make_op(OpKind::kRecord, StreamKind::kCompute, 3)}, 1);
  const auto hb = HappensBefore::make(p);
  ASSERT_FALSE(hb.has_value());
  EXPECT_EQ(hb.error().code(), ErrorCode::kOutOfRange);
}

TEST(ScheduleVerifierTest, WaitIssuedBeforeItsRecordIsAnError) {
  // Acyclic, but a backend issuing in program order would wait on an unrecorded event.
  const RankProgram p = program_of({make_op(OpKind::kWait, StreamKind::kAllGather, 0),
                                    make_op(OpKind::kRecord, StreamKind::kCompute, 0)},
                                   1);
  ASSERT_TRUE(HappensBefore::make(p).has_value());
  const Status st = check_events(one_rank_schedule(p));
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().message(),
            "rank class 0 (rank 0) op 0 (wait, all-gather stream): waits on event 0 before its "
            "record is issued (a stream issued in program order would not wait)");
}

// --- critical path -------------------------------------------------------------------------------

TEST(CriticalPathTest, LongestWeightedPathThroughStreamsAndEvents) {
  // compute: A(0, w3) record(1) C(4, w1); all-gather: B(2, w10) wait(3) D(5, w2).
  // Paths: B D = 12; A rec wait D = 5; A rec C = 4. B -> D wins.
  const RankProgram p = two_stream_program();
  const std::vector<std::int64_t> w = {3, 0, 10, 0, 1, 2};
  std::size_t next = 0;
  const auto weight = [&](const Op& op) {
    const auto i = static_cast<std::size_t>(&op - p.ops.data());
    ++next;
    return w[i];
  };
  const CriticalPath path = critical_path(p, weight).value();
  EXPECT_EQ(next, p.ops.size());  // one call per op
  EXPECT_EQ(path.length, 12);
  EXPECT_EQ(path.ops, (std::vector<std::int32_t>{2, 3, 5}));
}

TEST(CriticalPathTest, EventEdgeCarriesTheLongerPath) {
  // compute: A(0, w20) record(1) C(4, w1); all-gather: B(2, w1) wait(3) D(5, w1).
  const RankProgram p = two_stream_program();
  const std::vector<std::int64_t> w = {20, 0, 1, 0, 1, 1};
  const auto weight = [&](const Op& op) { return w[static_cast<std::size_t>(&op - p.ops.data())]; };
  const CriticalPath path = critical_path(p, weight).value();
  EXPECT_EQ(path.length, 21);
  // Ties (C and D both 21) go to the lower op index.
  EXPECT_EQ(path.ops, (std::vector<std::int32_t>{0, 1, 4}));
}

TEST(CriticalPathTest, EmptyProgramAndNegativeWeight) {
  const CriticalPath empty = critical_path(RankProgram{}, [](const Op&) { return 1; }).value();
  EXPECT_EQ(empty.length, 0);
  EXPECT_TRUE(empty.ops.empty());
  const auto bad = critical_path(two_stream_program(), [](const Op&) { return -1; });
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidArgument);
}

TEST(CriticalPathTest, BuiltScheduleWithComputeWeights) {
  const Schedule s = zero3();
  const RankProgram& p = s.programs()[0];
  const auto weight = [](const Op& op) { return is_compute(op.kind) ? std::int64_t{1} : 0; };
  const CriticalPath path = critical_path(p, weight).value();
  std::int64_t compute_ops = 0;
  for (const Op& op : p.ops) {
    compute_ops += op.stream == StreamKind::kCompute && is_compute(op.kind) ? 1 : 0;
  }
  // Every compute-stream op is on one chain; the post-step casts run on the AG stream after it.
  EXPECT_GE(path.length, compute_ops);
}

// --- the checks on built and broken schedules -----------------------------------------------

TEST(ScheduleVerifierTest, BuiltScheduleCheckPasses) {
  const Schedule s = zero3();
  EXPECT_TRUE(verify_schedule(s.parts()).has_value());
  EXPECT_TRUE(check_structure(s.parts()).has_value());
  EXPECT_TRUE(check_events(s.parts()).has_value());
  EXPECT_TRUE(check_operands(s.parts()).has_value());
  EXPECT_TRUE(check_buffer_lifetimes(s.parts()).has_value());
  EXPECT_TRUE(check_collective_order(s.parts()).has_value());
}

TEST(ScheduleVerifierTest, ComputeBeforeItsGatherIsReported) {
  const Schedule s = zero3();
  RankProgram p = s.programs()[0];
  // Drop the compute stream's wait on L0's unshard event in forward.
  const std::size_t fwd = find_op(p, OpKind::kForward, 1, Phase::kForward);
  std::size_t wait = fwd;
  while (!(p.ops[wait].kind == OpKind::kWait && p.ops[wait].unit == 1)) {
    --wait;
  }
  p.ops[wait].event = p.ops[0].event;  // the root's compute record: a harmless, earlier event
  const ScheduleParts broken = with_programs(s, {p});
  const Status st = check_operands(broken);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(st.error().message().rfind(
                "rank class 0 (rank 0) op " + std::to_string(fwd) +
                    " (forward, unit 'L0', microbatch 0, compute stream): uses transient buffer ",
                0),
            0u)
      << st.error().message();
  EXPECT_FALSE(verify_schedule(broken).has_value());
  EXPECT_FALSE(Schedule::make(broken).has_value());
}

TEST(ScheduleVerifierTest, FreeBeforeComputeIsReported) {
  const Schedule s = zero3();
  RankProgram p = s.programs()[0];
  // Move the forward of L1 after the free of its unsharded buffer (and of R's).
  const std::size_t fwd = find_op(p, OpKind::kForward, 2, Phase::kForward);
  const Op op = p.ops[fwd];
  p.ops.erase(p.ops.begin() + static_cast<std::ptrdiff_t>(fwd));
  const std::size_t bwd_start = find_op(p, OpKind::kRecord, -1, Phase::kBackward);
  p.ops.insert(p.ops.begin() + static_cast<std::ptrdiff_t>(bwd_start), op);
  const Status st = check_operands(with_programs(s, {p}));
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find("outside its lifetime"), std::string::npos)
      << st.error().message();
}

TEST(ScheduleVerifierTest, LeakedBufferIsReported) {
  const Schedule s = zero3();
  RankProgram p = s.programs()[0];
  const std::size_t free_op = find_op(p, OpKind::kFree, 2, Phase::kBackward);
  const std::int32_t buffer = p.ops[free_op].buffer;
  p.ops.erase(p.ops.begin() + static_cast<std::ptrdiff_t>(free_op));
  const Status st = check_buffer_lifetimes(with_programs(s, {p}));
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find(
                str_cat("allocates buffer ", buffer, ", which is not freed by the step's end")),
            std::string::npos)
      << st.error().message();
}

TEST(ScheduleVerifierTest, DoubleFreeAndFreeBeforeAllocAreReported) {
  const Schedule s = zero3();
  RankProgram p = s.programs()[0];
  const std::size_t free_op = find_op(p, OpKind::kFree, 1, Phase::kForward);
  p.ops.push_back(p.ops[free_op]);
  Status st = check_buffer_lifetimes(with_programs(s, {p}));
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find("again (first freed by op"), std::string::npos)
      << st.error().message();
  p = s.programs()[0];
  p.ops.insert(p.ops.begin(), p.ops[free_op]);
  st = check_buffer_lifetimes(with_programs(s, {p}));
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find("before it is allocated"), std::string::npos)
      << st.error().message();
}

TEST(ScheduleVerifierTest, CollectiveOrderMismatchBetweenClassesIsReported) {
  FsdpOptions o;
  o.shard_layout = ShardLayout::kUnpadded;
  std::vector<Unit> units;
  units.push_back(
      Unit::make("a", Unit::kNoParent, {testing::make_param("a.w", {5, 3})}, {}, {}).value());
  units.push_back(Unit::make("b", 0, {testing::make_param("b.w", {7})}, {}, {}).value());
  const Model m = Model::make("uneven", std::move(units)).value();
  const Schedule s = build_schedule(m, config_of(Strategy::kZero3, "dp=4", o), Workload{}).value();
  ASSERT_GT(s.programs().size(), 1u);
  ASSERT_TRUE(verify_schedule(s.parts()).has_value())
      << verify_schedule(s.parts()).error().message();
  std::vector<RankProgram> programs = s.programs();
  // Swap the first two all-gathers (a's and b's) of class 1.
  RankProgram& p = programs[1];
  std::vector<std::size_t> gathers;
  for (std::size_t i = 0; i < p.ops.size() && gathers.size() < 2; ++i) {
    if (p.ops[i].kind == OpKind::kAllGather) {
      gathers.push_back(i);
    }
  }
  ASSERT_EQ(gathers.size(), 2u);
  std::swap(p.ops[gathers[0]].collective, p.ops[gathers[1]].collective);
  std::swap(p.ops[gathers[0]].unit, p.ops[gathers[1]].unit);
  std::swap(p.ops[gathers[0]].elements, p.ops[gathers[1]].elements);
  std::swap(p.ops[gathers[0]].bytes, p.ops[gathers[1]].bytes);
  std::swap(p.ops[gathers[0]].first_operand, p.ops[gathers[1]].first_operand);
  const Status st = check_collective_order(with_programs(s, programs));
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().message().rfind(
                str_cat("rank class 1 (rank ", p.representative_rank, ") op ", gathers[0],
                        " (all-gather, unit 'b' group 0, microbatch 0, "
                        "all-gather stream): issues (all-gather, axis "
                        "'dp', collective "),
                0),
            0u)
      << st.error().message();
}

TEST(ScheduleVerifierTest, MemberElementsMustMatchTheRepresentative) {
  FsdpOptions o;
  o.shard_layout = ShardLayout::kUnpadded;
  std::vector<Unit> units;
  units.push_back(
      Unit::make("a", Unit::kNoParent, {testing::make_param("a.w", {5, 3})}, {}, {}).value());
  const Model m = Model::make("uneven", std::move(units)).value();
  const Schedule s = build_schedule(m, config_of(Strategy::kZero3, "dp=4", o), Workload{}).value();
  std::vector<RankProgram> programs = s.programs();
  for (Op& op : programs.back().ops) {
    if (op.kind == OpKind::kReduceScatter) {
      op.elements += 1;
      op.bytes += dtype_bytes(op.dtype);
      break;
    }
  }
  const Status st = check_collective_order(with_programs(s, programs));
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find("for member"), std::string::npos) << st.error().message();
}

TEST(ScheduleVerifierTest, RankClassMapMustMatchThePrograms) {
  const Schedule s = zero3();
  std::vector<RankProgram> programs = s.programs();
  programs[0].num_ranks = 3;
  const Status st = check_structure(with_programs(s, programs));
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().message(),
            "rank class 0 claims 3 ranks with representative rank 0, but rank_class maps 4 ranks "
            "to it, the lowest 0");
}

TEST(ScheduleVerifierTest, OutOfRangeIdsAreErrorsNotCrashes) {
  const Schedule s = zero3();
  for (int field = 0; field < 5; ++field) {
    RankProgram p = s.programs()[0];
    for (Op& op : p.ops) {
      if (field == 0 && op.kind == OpKind::kAlloc) {
        op.buffer = p.num_buffers;
      } else if (field == 1 && op.kind == OpKind::kWait) {
        op.event = -2;
      } else if (field == 2 && is_collective(op.kind)) {
        op.collective = 1000;
      } else if (field == 3 && op.unit >= 0) {
        op.unit = 99;
      } else if (field == 4) {
        op.stream = static_cast<StreamKind>(7);
      }
    }
    const ScheduleParts broken = with_programs(s, {p});
    for (const Status& st :
         {verify_schedule(broken), check_events(broken), check_operands(broken),
          check_buffer_lifetimes(broken), check_collective_order(broken)}) {
      ASSERT_FALSE(st.has_value()) << field;
      EXPECT_EQ(st.error().code(), ErrorCode::kOutOfRange) << st.error().message();
    }
  }
}

// The index of the first op of `p` of this kind on any unit, phase `phase`.
std::size_t first_of(const RankProgram& p, OpKind kind) {
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (p.ops[i].kind == kind) {
      return i;
    }
  }
  ADD_FAILURE() << "no " << to_string(kind);
  return 0;
}

TEST(ScheduleVerifierTest, EveryCollectiveNamesItsBuffers) {
  const Schedule s = zero3();
  RankProgram p = s.programs()[0];
  const std::size_t ag = first_of(p, OpKind::kAllGather);
  p.ops[ag].num_operands = 1;  // the receive buffer dropped
  const Status st = check_structure(with_programs(s, {p}));
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find(
                "has 1 operands; expected a send buffer it reads and a receive buffer it writes"),
            std::string::npos)
      << st.error().message();
}

TEST(ScheduleVerifierTest, AReadOfAnUnwrittenBufferIsReported) {
  const Schedule s = zero3();
  RankProgram p = s.programs()[0];
  // The forward of L0 reads its activation buffer instead of writing it: nothing wrote it.
  const std::size_t fwd = find_op(p, OpKind::kForward, 1, Phase::kForward);
  Operand& act = p.operands[static_cast<std::size_t>(p.ops[fwd].first_operand + 1)];
  ASSERT_EQ(act.access, Access::kWrite);
  act.access = Access::kRead;
  const Status st = check_operands(with_programs(s, {p}));
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find(
                str_cat("op ", fwd, " (forward, unit 'L0', microbatch 0, compute stream): reads "
                        "transient buffer ",
                        act.buffer, " (read) before any op writes it")),
            std::string::npos)
      << st.error().message();
}

TEST(ScheduleVerifierTest, AnUnorderedWriteIsARace) {
  const Schedule s = zero3();
  RankProgram p = s.programs()[0];
  // Without the completion callback's wait (the last compute-stream wait on a reduce-scatter
  // stream record), the optimizer step reads main grads the reduce-scatters may still write.
  std::size_t last = p.ops.size();
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (op.kind != OpKind::kWait || op.stream != StreamKind::kCompute) {
      continue;
    }
    for (const Op& rec : p.ops) {
      if (rec.kind == OpKind::kRecord && rec.event == op.event &&
          rec.stream == StreamKind::kReduceScatter) {
        last = i;
      }
    }
  }
  ASSERT_LT(last, p.ops.size());
  ASSERT_EQ(p.ops[0].kind, OpKind::kRecord);
  p.ops[last].event = p.ops[0].event;  // an earlier compute-stream record: no ordering
  const Status st = check_operands(with_programs(s, {p}));
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find("(optimizer-step, unit"), std::string::npos)
      << st.error().message();
  EXPECT_NE(st.error().message().find("without happening after"), std::string::npos)
      << st.error().message();
  EXPECT_NE(st.error().message().find("(reduce-scatter, unit"), std::string::npos)
      << st.error().message();
}

TEST(ScheduleVerifierTest, OperandsMustBelongToTheirGroup) {
  const Schedule s = zero3();
  RankProgram p = s.programs()[0];
  const std::size_t ag = first_of(p, OpKind::kAllGather);
  Operand& recv = p.operands[static_cast<std::size_t>(p.ops[ag].first_operand + 1)];
  recv.group = recv.group == 0 ? 1 : 0;
  const Status st = check_structure(with_programs(s, {p}));
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find("moves group"), std::string::npos)
      << st.error().message();
}

TEST(ScheduleVerifierTest, ComputeReadsTheWeightsOfEveryGroupOfItsUnit) {
  const Schedule s = zero3();
  RankProgram p = s.programs()[0];
  const std::size_t fwd = find_op(p, OpKind::kForward, 1, Phase::kForward);
  // Drop the weight operand (the first one) of L0's forward.
  ++p.ops[fwd].first_operand;
  --p.ops[fwd].num_operands;
  const Status st = check_structure(with_programs(s, {p}));
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find("reads the weights of 0 groups; its unit has 1"),
            std::string::npos)
      << st.error().message();
}

TEST(ScheduleVerifierTest, CollectivesMustNameAStepOfTheirGroupsLeg) {
  const Schedule s = zero3();
  ScheduleParts parts = s.parts();
  parts.collectives[0].leg_step = 5;
  Status st = check_structure(parts);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find("names no step of geometry group"), std::string::npos)
      << st.error().message();
  parts = s.parts();
  parts.collectives[0].leg = CollectiveLeg::kGradReduce;  // a reduce-scatter, not a gather
  st = check_structure(parts);
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find("its leg step is a reduce-scatter"), std::string::npos)
      << st.error().message();
}

TEST(ScheduleVerifierTest, TheFactoryVerifiesAndKeepsThePadding) {
  const Schedule s = zero3();
  EXPECT_TRUE(Schedule::make(s.parts()).has_value());
  EXPECT_EQ(Schedule::make(s.parts()).value(), s);
  ScheduleParts parts = s.parts();
  parts.rank_class[1] = 5;
  const auto broken = Schedule::make(parts);
  ASSERT_FALSE(broken.has_value());
  EXPECT_EQ(broken.error().code(), ErrorCode::kOutOfRange);
  // Padded layouts of three_group_model on 4 ranks: no padding, every shard whole rows.
  EXPECT_EQ(s.padding().data_elements, 8 + 64 + 64);
}

TEST(MemoryTallyTest, PeakAndEndInIssueOrder) {
  RankProgram p;
  p.num_ranks = 1;
  p.num_buffers = 2;
  Op a = make_op(OpKind::kAlloc, StreamKind::kCompute);
  a.buffer = 0;
  a.elements = 5;
  a.bytes = 10;
  Op b = a;
  b.buffer = 1;
  b.elements = 3;
  b.bytes = 6;
  Op fa = make_op(OpKind::kFree, StreamKind::kCompute);
  fa.buffer = 0;
  p.ops = {a, b, fa};
  const MemoryTally t = tally_memory(p).value();
  EXPECT_EQ(t.peak_transient_bytes, 16);
  EXPECT_EQ(t.end_transient_bytes, 6);
  const Status st = check_buffer_lifetimes(one_rank_schedule(p));
  ASSERT_FALSE(st.has_value());
  EXPECT_NE(st.error().message().find("allocates buffer 1, which is not freed"), std::string::npos)
      << st.error().message();
}

}  // namespace
}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// SimOptions::record_ops and MemoryResult::high_water_by_class, the read-only views the simulator/backend
// cross-checks compare with a real backend: every op of every class appears once, in program
// order per stream, with the memory it moved; high-water marks are per class, not the peak's mix.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "sim/engine/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace fsdp::sim {
namespace {

using testing::memory_op;
using testing::program_of;
using testing::round_hardware;
using testing::single_class;
using testing::sync_op;

TEST(OpLogTest, ListsEveryOpOncePerStreamInProgramOrder) {
  FsdpOptions fsdp_options;
  fsdp_options.num_microbatches = 2;
  const Schedule s = testing::build(testing::layered_model(3, 64, 32), "dp=4", fsdp_options);
  SimOptions options;
  options.record_ops = true;
  const SimResult r = simulate(s, round_hardware(), options).value();
  const RankProgram& program = s.programs()[0];
  std::map<StreamKind, std::vector<std::int32_t>> expected;
  for (std::size_t i = 0; i < program.ops.size(); ++i) {
    expected[program.ops[i].stream].push_back(static_cast<std::int32_t>(i));
  }
  std::map<StreamKind, std::vector<std::int32_t>> logged;
  for (const OpRecord& rec : r.op_log) {
    ASSERT_EQ(rec.cls, 0);
    EXPECT_LE(rec.start, rec.end);
    logged[rec.stream].push_back(rec.op);
    const Op& op = program.ops[static_cast<std::size_t>(rec.op)];
    if (op.kind == OpKind::kAlloc) {
      EXPECT_EQ(rec.memory_delta, op.bytes);
    } else if (op.kind != OpKind::kFree) {
      EXPECT_EQ(rec.memory_delta, 0);
    }
  }
  EXPECT_EQ(logged, expected);
  // Off by default.
  EXPECT_TRUE(simulate(s, round_hardware()).value().op_log.empty());
}

TEST(OpLogTest, HighWaterIsPerClassAndFreesGiveBackTheirAllocation) {
  // Class A peaks at 100 B first; later B peaks at 60 B while A holds 10 B (total 70 < 100).
  const RankProgram p = program_of(
      {memory_op(OpKind::kAlloc, StreamKind::kCompute, 0, 100, BufferClass::kActivations),
       memory_op(OpKind::kFree, StreamKind::kCompute, 0, 0, BufferClass::kActivations),
       memory_op(OpKind::kAlloc, StreamKind::kCompute, 1, 10, BufferClass::kActivations),
       memory_op(OpKind::kAlloc, StreamKind::kCompute, 2, 60, BufferClass::kUnitGrads),
       memory_op(OpKind::kFree, StreamKind::kCompute, 2, 0, BufferClass::kUnitGrads),
       memory_op(OpKind::kFree, StreamKind::kCompute, 1, 0, BufferClass::kActivations),
       sync_op(OpKind::kRecord, StreamKind::kCompute, 0)},
      /*num_events=*/1, /*num_buffers=*/3);
  SimOptions options;
  options.record_ops = true;
  const SimResult r = simulate(single_class("dp=1", p), round_hardware(), options).value();
  const MemoryResult& m = r.classes[0].memory;
  EXPECT_EQ(m.high_water_by_class[static_cast<std::size_t>(BufferClass::kActivations)], 100);
  EXPECT_EQ(m.high_water_by_class[static_cast<std::size_t>(BufferClass::kUnitGrads)], 60);
  EXPECT_EQ(m.peak_by_class[static_cast<std::size_t>(BufferClass::kUnitGrads)], 0);
  std::vector<std::int64_t> deltas;
  for (const OpRecord& rec : r.op_log) {
    deltas.push_back(rec.memory_delta);
  }
  EXPECT_EQ(deltas, (std::vector<std::int64_t>{100, -100, 10, 60, -60, -10, 0}));
}

}  // namespace
}  // namespace fsdp::sim

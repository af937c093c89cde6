// SPDX-License-Identifier: Apache-2.0
// build_schedule against the behaviour spec: the §4.7 collective counts, the §4.13 reference
// timeline (golden), rank equivalence classes, the §5 buffers, the model-weight sync and the
// is_last semantics of §4.7, and a 405B model on 16,384 ranks sharing one program.
#include "core/schedule/schedule_builder.h"

#include "core/base/strings.h"
#include "core/model/model_presets.h"
#include "core/policy/config_options.h"
#include "core/schedule/group_geometry.h"
#include "core/schedule/schedule_verifier.h"
#include "tests/core/schedule/schedule_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fsdp {
namespace {

using testing::config_of;
using testing::make_param;
using testing::render;
using testing::three_group_model;

Schedule build(const Model& model, const FsdpConfig& config) {
  auto s = build_schedule(model, config, Workload{});
  EXPECT_TRUE(s.has_value()) << s.error().message();
  return std::move(s).value();
}

FsdpOptions microbatches(std::int64_t n) {
  FsdpOptions o;
  o.num_microbatches = n;
  return o;
}

// Collective ops of `p` of this kind and `what` per microbatch (-1 for step-level ops).
std::map<std::int32_t, std::int64_t> count_by_microbatch(const Schedule& s, const RankProgram& p,
                                                         OpKind kind, const std::string& what) {
  std::map<std::int32_t, std::int64_t> out;
  for (const Op& op : p.ops) {
    if (op.kind == kind && to_string(s.collectives()[static_cast<std::size_t>(op.collective)].leg) == what) {
      ++out[op.microbatch];
    }
  }
  return out;
}

// --- §4.7 collective counts (3 groups: R's bias, L0's and L1's weights; 3 microbatches) ---------

TEST(ScheduleBuilderTest, HsdpThreeGroupsThreeMicrobatchesCounts) {
  const Schedule s = build(three_group_model(),
                           config_of(Strategy::kHsdp, "dp_outer=2,dp_inner=2", microbatches(3)));
  const CollectiveSummary sum = s.collective_summary();
  EXPECT_EQ(sum.at("reduce-scatter").at("dp_inner"), 9);
  EXPECT_EQ(sum.at("reduce-scatter").count("dp_outer"), 0u);
  EXPECT_EQ(sum.at("all-reduce").at("dp_outer"), 3);
  EXPECT_EQ(sum.at("all-reduce").count("dp_inner"), 0u);
  // The outer all-reduces finalise on the last microbatch only.
  EXPECT_EQ(count_by_microbatch(s, s.programs()[0], OpKind::kAllReduce, "grad_finalize"),
            (std::map<std::int32_t, std::int64_t>{{2, 3}}));
}

TEST(ScheduleBuilderTest, HfsdpThreeGroupsThreeMicrobatchesCounts) {
  const Schedule s = build(three_group_model(),
                           config_of(Strategy::kHfsdp, "dp_outer=2,dp_inner=2", microbatches(3)));
  const CollectiveSummary sum = s.collective_summary();
  EXPECT_EQ(sum.at("reduce-scatter").at("dp_inner") + sum.at("reduce-scatter").at("dp_outer"), 12);
  EXPECT_EQ(sum.at("reduce-scatter").at("dp_outer"), 3);
  EXPECT_EQ(sum.count("all-reduce"), 0u);
}

TEST(ScheduleBuilderTest, Zero3ThreeGroupsThreeMicrobatchesCounts) {
  const Schedule s =
      build(three_group_model(), config_of(Strategy::kZero3, "dp=4", microbatches(3)));
  const CollectiveSummary sum = s.collective_summary();
  EXPECT_EQ(sum.at("reduce-scatter").at("dp"), 9);
  EXPECT_EQ(sum.count("all-reduce"), 0u);
  EXPECT_EQ(count_by_microbatch(s, s.programs()[0], OpKind::kReduceScatter, "grad_reduce"),
            (std::map<std::int32_t, std::int64_t>{{0, 3}, {1, 3}, {2, 3}}));
}

TEST(ScheduleBuilderTest, Zero1ReducesOncePerGroupInTheLastMicrobatch) {
  const Schedule s =
      build(three_group_model(), config_of(Strategy::kZero1, "dp=4", microbatches(3)));
  EXPECT_EQ(s.collective_summary().at("reduce-scatter").at("dp"), 3);
  std::map<std::int32_t, std::int64_t> per_mb;
  for (const Op& op : s.programs()[0].ops) {
    if (op.kind == OpKind::kReduceScatter) {
      ++per_mb[op.microbatch];
    }
  }
  EXPECT_EQ(per_mb, (std::map<std::int32_t, std::int64_t>{{2, 3}}));
}

// --- §4.13 reference timeline ---------------------------------------------------------------

// The spec's prose lists hooks and leaves out the compute of R and L1; the golden string has
// every compute op where it runs (R's forward first: its bias is used first).
TEST(ScheduleBuilderTest, ReferenceTimelineZero3OneMicrobatch) {
  const Schedule s = build(three_group_model(), config_of(Strategy::kZero3, "dp=4"));
  ASSERT_EQ(s.programs().size(), 1u);
  const RankProgram& p = s.programs()[0];
  const Phase fwd = Phase::kForward;
  const Phase bwd = Phase::kBackward;
  EXPECT_EQ(render(s, p, &fwd),
            "AG(R) W(R) AG(L0) fwd(R) "    // R.pre: demand gather, wait, prefetch L0
            "W(L0) AG(L1) fwd(L0) F(L0) "  // L0.pre: already gathered; prefetch L1
            "W(L1) fwd(L1) F(L1) "         // L1.pre: no successor
            "F(R)");                       // R.post
  EXPECT_EQ(render(s, p, &bwd),
            "AG(R) W(R) AG(L1) "                           // R.pre_backward: gather, prefetch L1
            "W(L1) AG(L0) bwd(L1) F(L1) copy(L1) RS(L1) "  // L1: prefetch L0; reshard, reduce
            "W(L0) bwd(L0) F(L0) copy(L0) RS(L0) "         // L0: nothing left to prefetch
            "bwd(R) F(R) copy(R) RS(R)");                  // R's bias grad completes last
  const Phase step = Phase::kStep;
  EXPECT_EQ(render(s, p, &step), "step(R) step(L0) step(L1) cast(R) cast(L0) cast(L1)");
}

// The stream edges of §4.9 around the reference timeline: root pre_forward makes the AG stream
// wait on compute, root pre_backward the RS stream, the end of backward compute waits on RS, and
// the post-step sync runs on the AG stream between two waits.
TEST(ScheduleBuilderTest, ReferenceTimelineStreamEdges) {
  const Schedule s = build(three_group_model(), config_of(Strategy::kZero3, "dp=4"));
  const std::vector<Op>& ops = s.programs()[0].ops;
  ASSERT_GE(ops.size(), 2u);
  EXPECT_EQ(ops[0].kind, OpKind::kRecord);
  EXPECT_EQ(ops[0].stream, StreamKind::kCompute);
  EXPECT_EQ(ops[1].kind, OpKind::kWait);
  EXPECT_EQ(ops[1].stream, StreamKind::kAllGather);
  const auto first_bwd = std::find_if(ops.begin(), ops.end(),
                                      [](const Op& op) { return op.phase == Phase::kBackward; });
  ASSERT_NE(first_bwd, ops.end());
  EXPECT_EQ(first_bwd->kind, OpKind::kRecord);
  EXPECT_EQ(first_bwd->stream, StreamKind::kCompute);
  EXPECT_EQ((first_bwd + 1)->kind, OpKind::kWait);
  EXPECT_EQ((first_bwd + 1)->stream, StreamKind::kReduceScatter);
  const auto first_step =
      std::find_if(ops.begin(), ops.end(), [](const Op& op) { return op.phase == Phase::kStep; });
  ASSERT_NE(first_step, ops.begin());
  EXPECT_EQ((first_step - 1)->kind, OpKind::kWait);  // completion callback: compute <- RS
  EXPECT_EQ((first_step - 1)->stream, StreamKind::kCompute);
  EXPECT_EQ((first_step - 2)->kind, OpKind::kRecord);
  EXPECT_EQ((first_step - 2)->stream, StreamKind::kReduceScatter);
  EXPECT_EQ(ops.back().kind, OpKind::kWait);  // post-step sync: compute <- AG
  EXPECT_EQ(ops.back().stream, StreamKind::kCompute);
  for (const Op& op : ops) {
    if (op.kind == OpKind::kCast) {
      EXPECT_EQ(op.stream, StreamKind::kAllGather);
    }
    if (op.kind == OpKind::kAllGather) {
      EXPECT_EQ(op.stream, StreamKind::kAllGather);
    }
    if (op.kind == OpKind::kReduceScatter) {
      EXPECT_EQ(op.stream, StreamKind::kReduceScatter);
    }
  }
}

// Regression: the backward prefetch was skipped from the second microbatch on (units stayed
// marked as done with backward), so each later backward gathered on demand only.
TEST(ScheduleBuilderTest, EveryMicrobatchPrefetchesInBackward) {
  const Schedule s =
      build(three_group_model(), config_of(Strategy::kZero3, "dp=4", microbatches(3)));
  const RankProgram& p = s.programs()[0];
  const Phase bwd = Phase::kBackward;
  const std::string first = render(s, p, &bwd, 0);
  EXPECT_EQ(first,
            "AG(R) W(R) AG(L1) W(L1) AG(L0) bwd(L1) F(L1) copy(L1) RS(L1) W(L0) bwd(L0) F(L0) "
            "copy(L0) RS(L0) bwd(R) F(R) copy(R) RS(R)");
  EXPECT_EQ(render(s, p, &bwd, 1), first);
  EXPECT_EQ(render(s, p, &bwd, 2), first);
}

TEST(ScheduleBuilderTest, UnifiedStreamLeavesTheReduceScatterStreamEmpty) {
  FsdpOptions o = microbatches(2);
  o.schedule = SchedulePolicy::make(PrefetchPolicy(), PrefetchPolicy(), 0,
                                    /*unify_communication_stream=*/true)
                   .value();
  const Schedule s = build(three_group_model(), config_of(Strategy::kZero3, "dp=4", o));
  EXPECT_TRUE(s.unified_streams());
  std::int64_t rs = 0;
  for (const Op& op : s.programs()[0].ops) {
    EXPECT_NE(op.stream, StreamKind::kReduceScatter) << to_string(op.kind);
    rs += op.kind == OpKind::kReduceScatter ? 1 : 0;
  }
  EXPECT_EQ(rs, 6);
}

TEST(ScheduleBuilderTest, NoPrefetchGathersOnDemandOnly) {
  FsdpOptions o;
  o.schedule = SchedulePolicy::make(PrefetchPolicy::none(), PrefetchPolicy::none(), 0,
                                    /*unify_communication_stream=*/false)
                   .value();
  const Schedule s = build(three_group_model(), config_of(Strategy::kZero3, "dp=4", o));
  const Phase fwd = Phase::kForward;
  EXPECT_EQ(render(s, s.programs()[0], &fwd),
            "AG(R) W(R) fwd(R) AG(L0) W(L0) fwd(L0) F(L0) AG(L1) W(L1) fwd(L1) F(L1) F(R)");
}

TEST(ScheduleBuilderTest, RecomputeRunsTheForwardAgainBeforeBackward) {
  FsdpOptions o;
  o.recompute = RecomputePolicy::full_all_units();
  const Schedule s = build(three_group_model(), config_of(Strategy::kZero3, "dp=4", o));
  const Phase bwd = Phase::kBackward;
  EXPECT_EQ(render(s, s.programs()[0], &bwd),
            "AG(R) W(R) AG(L1) W(L1) AG(L0) re(L1) bwd(L1) F(L1) copy(L1) RS(L1) W(L0) re(L0) "
            "bwd(L0) F(L0) copy(L0) RS(L0) re(R) bwd(R) F(R) copy(R) RS(R)");
  // The forward keeps the checkpoint (16 B/token); the recompute brings back the other 48.
  const std::int64_t tokens = Workload{}.seq_len * Workload{}.micro_batch_size;
  std::vector<std::int64_t> activation_allocs;
  for (const Op& op : s.programs()[0].ops) {
    if (op.kind == OpKind::kAlloc && op.buffer_class == BufferClass::kActivations && op.unit == 1) {
      activation_allocs.push_back(op.bytes);
    }
  }
  EXPECT_EQ(activation_allocs, (std::vector<std::int64_t>{16 * tokens, 48 * tokens}));
}

// An embedding (no block) and two blocks with per-mode figures: each mode keeps, re-materialises
// and recomputes what the unit's figures say (docs/models.md, "Activation checkpointing modes").
Model checkpointed_model() {
  const UnitFlops flops{1000, 2};
  const CheckpointFigures op{.kept = 40, .transient = 50, .flops = {300, 0}};
  const CheckpointFigures core{.kept = 60, .transient = 8, .flops = {0, 2}};
  const CheckpointFigures none{.kept = 24};
  std::vector<Unit> units;
  units.push_back(Unit::make("E", Unit::kNoParent, {make_param("E.w", {8, 8})}, {},
                             {.stored = 24,
                              .recompute = 24,
                              .selective_op = none,
                              .core_attention = none,
                              .block = false})
                      .value());
  for (const char* name : {"L0", "L1"}) {
    units.push_back(
        Unit::make(name, Unit::kNoParent, {make_param(str_cat(name, ".w"), {8, 8})}, flops,
                   {.stored = 64, .recompute = 16, .selective_op = op, .core_attention = core})
            .value());
  }
  return Model::make("checkpointed", std::move(units)).value();
}

struct UnitOps {
  std::vector<std::int64_t> activation_allocs;  // bytes, in program order
  std::int64_t recompute_flops = -1;            // -1: no recompute op
  std::int64_t recompute_mem_bytes = -1;
};

std::vector<UnitOps> ops_by_unit(const Schedule& s, std::size_t units) {
  std::vector<UnitOps> out(units);
  for (const Op& op : s.programs()[0].ops) {
    if (op.unit < 0) {
      continue;
    }
    UnitOps& u = out[static_cast<std::size_t>(op.unit)];
    if (op.kind == OpKind::kAlloc && op.buffer_class == BufferClass::kActivations) {
      u.activation_allocs.push_back(op.bytes);
    }
    if (op.kind == OpKind::kRecompute) {
      EXPECT_EQ(u.recompute_flops, -1) << "two recomputes of unit " << op.unit;
      u.recompute_flops = op.flops;
      u.recompute_mem_bytes = op.mem_bytes;
    }
  }
  return out;
}

TEST(ScheduleBuilderTest, EachCheckpointingModeKeepsRecomputesAndReMaterialisesItsFigures) {
  const Model m = checkpointed_model();
  const Workload w{};
  const std::int64_t t = w.seq_len * w.micro_batch_size;
  const std::int64_t weights = 64 * 2;  // an 8 x 8 bf16 weight
  const auto run = [&](const char* mode) {
    FsdpOptions o;
    o.recompute = RecomputePolicy::parse(mode).value();
    auto s = build_schedule(m, config_of(Strategy::kZero3, "dp=2", o), w);
    EXPECT_TRUE(s.has_value()) << mode << ": " << s.error().message();
    return ops_by_unit(*s, m.num_units());
  };
  const std::int64_t fwd = (1000 + 2 * w.seq_len) * t;
  {
    const std::vector<UnitOps> u = run("none");
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(u[i].recompute_flops, -1) << i;
    }
    EXPECT_EQ(u[1].activation_allocs, (std::vector<std::int64_t>{64 * t}));
  }
  {
    // Every unit, the embedding included.
    const std::vector<UnitOps> u = run("full-all-units");
    EXPECT_EQ(u[0].recompute_flops, 0);
    EXPECT_EQ(u[1].activation_allocs, (std::vector<std::int64_t>{16 * t, 48 * t}));
    EXPECT_EQ(u[1].recompute_flops, fwd);
    EXPECT_EQ(u[1].recompute_mem_bytes, weights + 48 * t);
  }
  {
    // The frameworks' full: the blocks as above, the embedding (not a block) keeps its stored
    // bytes and is not recomputed.
    const std::vector<UnitOps> u = run("full");
    EXPECT_EQ(u[0].recompute_flops, -1);
    EXPECT_EQ(u[0].activation_allocs, (std::vector<std::int64_t>{24 * t}));
    for (std::size_t i : {1, 2}) {
      EXPECT_EQ(u[i].activation_allocs, (std::vector<std::int64_t>{16 * t, 48 * t})) << i;
      EXPECT_EQ(u[i].recompute_flops, fwd) << i;
      EXPECT_EQ(u[i].recompute_mem_bytes, weights + 48 * t) << i;
    }
  }
  {
    const std::vector<UnitOps> u = run("selective-op");
    EXPECT_EQ(u[0].recompute_flops, -1);  // not a block: nothing recomputed
    EXPECT_EQ(u[0].activation_allocs, (std::vector<std::int64_t>{24 * t}));
    for (std::size_t i : {1, 2}) {
      EXPECT_EQ(u[i].activation_allocs, (std::vector<std::int64_t>{40 * t, 50 * t})) << i;
      EXPECT_EQ(u[i].recompute_flops, 300 * t) << i;
      EXPECT_EQ(u[i].recompute_mem_bytes, weights + 50 * t) << i;
    }
  }
  {
    const std::vector<UnitOps> u = run("core-attention");
    EXPECT_EQ(u[1].activation_allocs, (std::vector<std::int64_t>{60 * t, 8 * t}));
    EXPECT_EQ(u[1].recompute_flops, 2 * w.seq_len * t);
    EXPECT_EQ(u[1].recompute_mem_bytes, 8 * t);  // the attention core reads no weights
  }
  {
    // torchtitan's ac_freq: the second block (L1) of every two is checkpointed whole.
    const std::vector<UnitOps> u = run("selective-layer:2");
    EXPECT_EQ(u[0].recompute_flops, -1);
    EXPECT_EQ(u[1].recompute_flops, -1);
    EXPECT_EQ(u[1].activation_allocs, (std::vector<std::int64_t>{64 * t}));
    EXPECT_EQ(u[2].recompute_flops, fwd);
    EXPECT_EQ(u[2].activation_allocs, (std::vector<std::int64_t>{16 * t, 48 * t}));
  }
  {
    const std::vector<UnitOps> u = run("selective-layer:1");
    EXPECT_EQ(u[0].recompute_flops, -1);
    EXPECT_EQ(u[1].recompute_flops, fwd);
    EXPECT_EQ(u[2].recompute_flops, fwd);
  }
}

// --- rank equivalence classes
// ---------------------------------------------------------------------

std::int64_t total_ranks(const Schedule& s) {
  std::int64_t n = 0;
  for (const RankProgram& p : s.programs()) {
    n += p.num_ranks;
  }
  return n;
}

TEST(ScheduleBuilderTest, PaddedLayoutsGiveOneClassOnAnyMesh) {
  const Model m = three_group_model();
  for (const auto& [strategy, mesh] :
       std::vector<std::pair<Strategy, std::string>>{{Strategy::kZero3, "dp=3"},
                                                     {Strategy::kZero2, "dp=7"},
                                                     {Strategy::kZero1, "dp=5"},
                                                     {Strategy::kNoShard, "dp=6"},
                                                     {Strategy::kHsdp, "a=3,b=2"},
                                                     {Strategy::kHfsdp, "a=2,b=3"}}) {
    const Schedule s = build(m, config_of(strategy, mesh));
    EXPECT_EQ(s.programs().size(), 1u) << to_string(strategy) << " on " << mesh;
    EXPECT_EQ(s.programs()[0].num_ranks, s.mesh().size());
  }
}

Model uneven_model() {
  std::vector<Unit> units;
  units.push_back(Unit::make("a", Unit::kNoParent, {make_param("a.w", {5, 3})}, {}, {}).value());
  units.push_back(
      Unit::make("b", Unit::kNoParent, {make_param("b.w", {7}), make_param("b.v", {2, 2})}, {}, {})
          .value());
  return Model::make("uneven", std::move(units)).value();
}

TEST(ScheduleBuilderTest, UnpaddedUnevenShardsSplitRanksIntoClasses) {
  FsdpOptions o;
  o.shard_layout = ShardLayout::kUnpadded;
  const Schedule s = build(uneven_model(), config_of(Strategy::kZero3, "dp=4", o));
  EXPECT_GT(s.programs().size(), 1u);
  EXPECT_EQ(total_ranks(s), 4);
  for (std::size_t c = 0; c < s.programs().size(); ++c) {
    const RankProgram& p = s.programs()[c];
    EXPECT_EQ(s.rank_class()[static_cast<std::size_t>(p.representative_rank)],
              static_cast<std::int32_t>(c));
  }
  bool listed = false;
  for (const CollectiveInfo& info : s.collectives()) {
    if (!info.member_elements.empty()) {
      listed = true;
      EXPECT_EQ(info.member_elements.size(), 4u);
    }
  }
  EXPECT_TRUE(listed);
}

TEST(ScheduleBuilderTest, TensorAtomicSplitsRanksIntoClasses) {
  const Schedule s =
      build(uneven_model(), config_of(Strategy::kZero3, "dp=3", {}, /*tensor_atomic=*/true));
  EXPECT_GT(s.programs().size(), 1u);
  EXPECT_EQ(total_ranks(s), 3);
}

// --- §5 memory
// ------------------------------------------------------------------------------------

std::int64_t resident_bytes(const RankProgram& p) {
  std::int64_t n = 0;
  for (const ResidentBuffer& b : p.resident) {
    n += b.bytes;
  }
  return n;
}

// ZeRO-3, bf16 parameters, fp32 main weights, Adam (fp32 states), bf16 main grads (the default:
// the grad dtype): per element of local(opt), 4 (main) + 2 (model) + 2 (main grad) + 8 (Adam).
TEST(ScheduleBuilderTest, Zero3ResidentBytesMatchSection51) {
  const Schedule s = build(three_group_model(), config_of(Strategy::kZero3, "dp=4"));
  const RankProgram& p = s.programs()[0];
  // Padded layouts on 4 ranks: bias [8] -> 2 per rank; [8, 8] -> 2 rows = 16 per rank.
  const std::int64_t local_opt = 2 + 16 + 16;
  EXPECT_EQ(resident_bytes(p), local_opt * (4 + 2 + 2 + 8));
  std::map<std::string, std::int64_t> by_what;
  for (const ResidentBuffer& b : p.resident) {
    by_what[std::string(to_string(b.kind))] += b.bytes;
  }
  EXPECT_EQ(by_what, (std::map<std::string, std::int64_t>{{"main_weight", local_opt * 4},
                                                          {"model_weight", local_opt * 2},
                                                          {"main_grad", local_opt * 2},
                                                          {"optimizer_state", local_opt * 8}}));
  const MemoryTally tally = tally_memory(p).value();
  EXPECT_EQ(tally.resident_bytes, resident_bytes(p));
  EXPECT_EQ(tally.end_transient_bytes, 0);
}

// §5.1: the model weight aliases the main weight when the dtypes agree (fp32 parameters).
TEST(ScheduleBuilderTest, Fp32ParametersAliasTheMainWeight) {
  std::vector<Unit> units;
  units.push_back(
      Unit::make("u", Unit::kNoParent, {make_param("w", {8, 4}, DType::kFp32)}, {}, {}).value());
  const Model m = Model::make("fp32", std::move(units)).value();
  const Schedule s = build(m, config_of(Strategy::kZero3, "dp=2"));
  std::int64_t casts = 0;
  for (const Op& op : s.programs()[0].ops) {
    casts += op.kind == OpKind::kCast ? 1 : 0;
  }
  EXPECT_EQ(casts, 0);
  std::int64_t local = 16;  // 32 elements over 2 ranks
  // main 4 + main grad 4 (fp32 grads) + Adam 8; no model weight.
  EXPECT_EQ(resident_bytes(s.programs()[0]), local * (4 + 4 + 8));
}

// §4.12/§5.1: an MXFP8 model weight holds both planes plus one scale byte per 32-element block
// of each; both planes are gathered per unshard.
TEST(ScheduleBuilderTest, Mxfp8WeightsHoldTwoPlanesAndScales) {
  std::vector<Unit> units;
  units.push_back(
      Unit::make("u", Unit::kNoParent, {make_param("w", {64, 32}, DType::kFp8)}, {}, {}).value());
  const Model m = Model::make("fp8", std::move(units)).value();
  const Schedule s = build(m, config_of(Strategy::kZero3, "dp=2"));
  const RankProgram& p = s.programs()[0];
  const std::int64_t local = 64 * 32 / 2;
  std::int64_t model_weight = 0;
  for (const ResidentBuffer& b : p.resident) {
    if (b.kind == ResidentKind::kModelWeight) {
      model_weight = b.bytes;
    }
  }
  EXPECT_EQ(model_weight, 2 * local + 2 * local / 32);
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kAlloc && op.buffer_class == BufferClass::kUnshardedWeights) {
      EXPECT_EQ(op.bytes, 2 * 2 * local + 2 * 2 * local / 32);
    }
    if (op.kind == OpKind::kAllGather) {
      EXPECT_EQ(op.bytes, 2 * local + 2 * local / 32);
    }
    if (op.kind == OpKind::kReduceScatter) {
      EXPECT_EQ(op.dtype, DType::kBf16);  // gradients never use fp8
      EXPECT_EQ(op.bytes, 2 * local);
    }
  }
}

TEST(ScheduleBuilderTest, RejectsMxfp8ShapesOffTheBlockGrid) {
  std::vector<Unit> units;
  units.push_back(
      Unit::make("u", Unit::kNoParent, {make_param("w", {64, 48}, DType::kFp8)}, {}, {}).value());
  const Model m = Model::make("fp8", std::move(units)).value();
  const auto s = build_schedule(m, config_of(Strategy::kZero3, "dp=2"), Workload{});
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().message(),
            "unit 'u' group 0 (fp8): MXFP8 parameter 'w' has shape (64, 48); expected 2 dims, "
            "both multiples of 32");
}

// §5.2: the unsharded weight is the full padded layout in the parameter dtype, allocated on the
// AG stream; the partial-grad buffer is the full layout in the grad dtype on the RS stream; the
// autograd grad is n(T) without padding and is live during the backward that writes it; the
// optimizer reads a cast fp32 copy of the bf16 main grad.
TEST(ScheduleBuilderTest, TransientBuffersMatchSection52) {
  std::vector<Unit> units;
  units.push_back(
      Unit::make("u", Unit::kNoParent, {make_param("w", {5, 2})}, {}, {}).value());  // 10 elems
  const Model m = Model::make("one", std::move(units)).value();
  const Schedule s = build(m, config_of(Strategy::kZero3, "dp=4"));
  const RankProgram& p = s.programs()[0];
  std::map<BufferClass, std::vector<std::pair<StreamKind, std::int64_t>>> allocs;
  std::size_t grad_alloc = 0;
  std::size_t backward = 0;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (op.kind == OpKind::kAlloc) {
      allocs[op.buffer_class].emplace_back(op.stream, op.bytes);
      if (op.buffer_class == BufferClass::kUnitGrads) {
        grad_alloc = i;
      }
    }
    if (op.kind == OpKind::kBackward) {
      backward = i;
    }
  }
  // Padded: 5 rows over 4 ranks -> 2 rows each, layout size 16 elements.
  using V = std::vector<std::pair<StreamKind, std::int64_t>>;
  EXPECT_EQ(allocs[BufferClass::kUnshardedWeights],
            (V{{StreamKind::kAllGather, 32}, {StreamKind::kAllGather, 32}}));
  EXPECT_EQ(allocs[BufferClass::kPartialGrads], (V{{StreamKind::kReduceScatter, 32}}));
  EXPECT_EQ(allocs[BufferClass::kUnitGrads], (V{{StreamKind::kCompute, 20}}));
  EXPECT_EQ(allocs[BufferClass::kMainGrads], (V{{StreamKind::kCompute, 4 * 4}}));
  EXPECT_LT(grad_alloc, backward);
}

// §5.2: from the second microbatch on main_grad holds gradients, so the reduction lands in a
// temporary of local(gradient) elements that is then added in.
TEST(ScheduleBuilderTest, LaterMicrobatchesReduceIntoATemporary) {
  const Schedule s =
      build(three_group_model(), config_of(Strategy::kZero3, "dp=4", microbatches(2)));
  std::map<std::int32_t, std::vector<std::int64_t>> partial_bytes;
  for (const Op& op : s.programs()[0].ops) {
    if (op.kind == OpKind::kAlloc && op.buffer_class == BufferClass::kPartialGrads &&
        op.unit == 1) {
      partial_bytes[op.microbatch].push_back(op.bytes);
    }
  }
  EXPECT_EQ(partial_bytes,
            (std::map<std::int32_t, std::vector<std::int64_t>>{{0, {128}}, {1, {128, 32}}}));
}

// §4.6.3b/§5.1: ZeRO-1 and HFSDP keep no main grad across steps: it is allocated at the first
// reduction of the step (local(gradient)), replaced by the finalised local(optimizer) buffer on
// the last microbatch, and released after the optimizer step.
TEST(ScheduleBuilderTest, Zero1MainGradIsPerStep) {
  const Schedule s =
      build(three_group_model(), config_of(Strategy::kZero1, "dp=4", microbatches(2)));
  const RankProgram& p = s.programs()[0];
  for (const ResidentBuffer& b : p.resident) {
    EXPECT_NE(b.kind, ResidentKind::kMainGrad);
  }
  std::vector<std::pair<std::int32_t, std::int64_t>> main_grads;  // (microbatch, bytes) of L0
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kAlloc && op.buffer_class == BufferClass::kMainGrads && op.unit == 1) {
      main_grads.emplace_back(op.microbatch, op.bytes);
    }
  }
  // bf16: full 64 elements while accumulating, 16 once finalised; then the fp32 cast copy.
  EXPECT_EQ(main_grads,
            (std::vector<std::pair<std::int32_t, std::int64_t>>{{0, 128}, {1, 32}, {-1, 64}}));
}

// §3.2/§5.1: the finalising all-reduce copies main_grad into a new buffer and reduces that in
// place; the copy is live around the all-reduce.
TEST(ScheduleBuilderTest, HsdpFinalisingAllReduceHoldsACopy) {
  const Schedule s =
      build(three_group_model(), config_of(Strategy::kHsdp, "dp_outer=2,dp_inner=2"));
  std::vector<std::string> seq;
  for (const Op& op : s.programs()[0].ops) {
    if (op.unit != 1) {
      continue;
    }
    if (op.kind == OpKind::kAllReduce) {
      seq.push_back("AR");
    } else if ((op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) &&
               op.buffer_class == BufferClass::kMainGrads && op.stream != StreamKind::kCompute) {
      seq.push_back(str_cat(to_string(op.kind), op.kind == OpKind::kAlloc
                                                    ? str_cat(" ", op.bytes)
                                                    : std::string()));
    }
  }
  // Padded for 4 ranks, sharded over the 2 inner ranks: 32 bf16 elements.
  EXPECT_EQ(seq, (std::vector<std::string>{"alloc 64", "AR", "free"}));
}

// The forward order is a DFS over the unit tree (§4.1.3), whatever the order of Model's vector:
// here C is A's child but comes after the root B, so A prefetches C and C prefetches B.
TEST(ScheduleBuilderTest, ForwardOrderIsADepthFirstWalk) {
  std::vector<Unit> units;
  units.push_back(Unit::make("A", Unit::kNoParent, {make_param("a", {4})}, {}, {}).value());
  units.push_back(Unit::make("B", Unit::kNoParent, {make_param("b", {4})}, {}, {}).value());
  units.push_back(Unit::make("C", 0, {make_param("c", {4})}, {}, {}).value());
  const Model m = Model::make("out_of_order", std::move(units)).value();
  const Schedule s = build(m, config_of(Strategy::kZero3, "dp=2"));
  const Phase fwd = Phase::kForward;
  const Phase bwd = Phase::kBackward;
  EXPECT_EQ(render(s, s.programs()[0], &fwd),
            "AG(A) W(A) AG(C) fwd(A) W(C) AG(B) fwd(C) F(C) F(A) W(B) fwd(B) F(B)");
  // backward_order: [B, A, C].
  EXPECT_EQ(render(s, s.programs()[0], &bwd),
            "AG(B) W(B) AG(A) bwd(B) F(B) copy(B) RS(B) W(A) AG(C) W(C) bwd(C) F(C) copy(C) "
            "RS(C) bwd(A) F(A) copy(A) RS(A)");
}

// --- model-weight sync and is_last --------------------------------------------------------------

TEST(ScheduleBuilderTest, WeightSyncGathersOncePerStepOnTheFirstMicrobatch) {
  for (const auto& [strategy, mesh, axis] :
       std::vector<std::tuple<Strategy, std::string, std::string>>{
           {Strategy::kZero1, "dp=4", "dp"},
           {Strategy::kZero2, "dp=4", "dp"},
           {Strategy::kHfsdp, "dp_outer=2,dp_inner=2", "dp_outer"}}) {
    const Schedule s = build(three_group_model(), config_of(strategy, mesh, microbatches(3)));
    const RankProgram& p = s.programs()[0];
    EXPECT_EQ(count_by_microbatch(s, p, OpKind::kAllGather, "model_weight_sync"),
              (std::map<std::int32_t, std::int64_t>{{0, 3}}))
        << to_string(strategy);
    for (const Op& op : p.ops) {
      if (op.kind == OpKind::kAllGather &&
          to_string(s.collectives()[static_cast<std::size_t>(op.collective)].leg) == "model_weight_sync") {
        EXPECT_EQ(s.mesh().axis_name(op.axis), axis);
        EXPECT_EQ(op.phase, Phase::kForward);
      }
    }
  }
  for (const Strategy strategy : {Strategy::kZero3, Strategy::kHsdp, Strategy::kNoShard}) {
    const std::string mesh = strategy == Strategy::kHsdp ? "dp_outer=2,dp_inner=2" : "dp=4";
    const Schedule s = build(three_group_model(), config_of(strategy, mesh, microbatches(3)));
    EXPECT_TRUE(
        count_by_microbatch(s, s.programs()[0], OpKind::kAllGather, "model_weight_sync").empty())
        << to_string(strategy);
  }
}

// §4.7 [S]: a non-final microbatch postpones the end-of-backward synchronisation and every
// reduction to the optimizer placements; resharding is unaffected.
TEST(ScheduleBuilderTest, OnlyTheLastMicrobatchFinalises) {
  const Schedule s = build(three_group_model(),
                           config_of(Strategy::kHsdp, "dp_outer=2,dp_inner=2", microbatches(3)));
  const RankProgram& p = s.programs()[0];
  for (std::int32_t mb = 0; mb < 3; ++mb) {
    std::vector<const Op*> backward;
    std::int64_t finalise = 0;
    std::int64_t frees = 0;
    for (const Op& op : p.ops) {
      if (op.microbatch != mb) {
        continue;
      }
      if (op.phase == Phase::kBackward) {
        backward.push_back(&op);
      }
      if (is_collective(op.kind) &&
          to_string(s.collectives()[static_cast<std::size_t>(op.collective)].leg) == "grad_finalize") {
        ++finalise;
      }
      frees += op.kind == OpKind::kFree && op.buffer_class == BufferClass::kUnshardedWeights;
    }
    ASSERT_GE(backward.size(), 2u);
    const Op& last = *backward.back();
    const Op& before_last = *backward[backward.size() - 2];
    const bool callback = last.kind == OpKind::kWait && last.stream == StreamKind::kCompute &&
                          before_last.kind == OpKind::kRecord &&
                          before_last.stream == StreamKind::kReduceScatter;
    EXPECT_EQ(callback, mb == 2) << "microbatch " << mb;
    EXPECT_EQ(finalise, mb == 2 ? 3 : 0) << "microbatch " << mb;
    EXPECT_EQ(frees, 6) << "microbatch " << mb;  // 3 after forward, 3 after backward
  }
}

TEST(ScheduleBuilderTest, RejectsABadWorkload) {
  const auto s = build_schedule(three_group_model(), config_of(Strategy::kZero3, "dp=2"),
                                Workload{/*seq_len=*/0, /*micro_batch_size=*/1});
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.error().message(), "workload seq_len is 0; expected >= 1");
}

// --- the IR carries its geometry and names its operands ---------------------------------------

// For every collective op of every rank class, the geometry the schedule carries gives this
// rank's count (all-gather: its input; reduce-scatter: its output; all-reduce: the reduced range)
// equal to the elements the builder wrote: a consumer can issue the op from the schedule alone.
TEST(ScheduleBuilderTest, CollectiveGeometryAgreesWithTheOps) {
  FsdpOptions unpadded = microbatches(2);
  unpadded.shard_layout = ShardLayout::kUnpadded;
  struct Case {
    Strategy strategy;
    const char* mesh;
    FsdpOptions options;
    bool tensor_atomic;
  };
  const Case cases[] = {{Strategy::kZero3, "dp=4", microbatches(2), false},
                        {Strategy::kZero3, "dp=3", unpadded, false},
                        {Strategy::kZero3, "dp=3", microbatches(1), true},
                        {Strategy::kZero2, "dp=4", microbatches(2), false},
                        {Strategy::kZero1, "dp=4", microbatches(2), false},
                        {Strategy::kNoShard, "dp=2", microbatches(1), false},
                        {Strategy::kHsdp, "dp_outer=2,dp_inner=2", microbatches(2), false},
                        {Strategy::kHfsdp, "dp_outer=2,dp_inner=2", microbatches(2), false}};
  for (const Case& c : cases) {
    const Schedule s = build(three_group_model(),
                             config_of(c.strategy, c.mesh, c.options, c.tensor_atomic));
    for (std::int64_t rank = 0; rank < s.mesh().size(); ++rank) {
      const RankProgram& p = s.program_of_rank(rank);
      for (const Op& op : p.ops) {
        if (!is_collective(op.kind)) {
          continue;
        }
        const CollectiveInfo& info = s.collectives()[static_cast<std::size_t>(op.collective)];
        ASSERT_GE(info.geometry_group, 0);
        const CollectiveGeometry g =
            collective_geometry(s.geometry().groups[static_cast<std::size_t>(info.geometry_group)],
                                info.leg, static_cast<std::size_t>(info.leg_step), s.mesh(), rank)
                .value();
        const std::int64_t mine = op.kind == OpKind::kAllReduce
                                      ? g.counts[0]
                                      : g.counts[static_cast<std::size_t>(g.axis_rank)];
        EXPECT_EQ(mine, op.elements)
            << to_string(c.strategy) << " " << c.mesh << " rank " << rank << " collective "
            << op.collective << " (" << to_string(info.leg) << ")";
        EXPECT_EQ(g.kind, op.kind);
        EXPECT_EQ(g.mesh_axis, op.axis);
      }
    }
  }
}

// The builder binds buffers while it emits: the reduce-scatter of a group reads the partial
// buffer its grad copy wrote, and the forward reads the buffer its unshard gathered into.
TEST(ScheduleBuilderTest, OperandsBindTheBuffersTheBuilderAllocated) {
  const Schedule s = build(three_group_model(), config_of(Strategy::kZero3, "dp=4"));
  const RankProgram& p = s.programs()[0];
  std::map<std::int32_t, std::int32_t> written_by_copy;    // partial buffer -> copy op
  std::map<std::int32_t, std::int32_t> written_by_gather;  // unsharded buffer -> last AG
  std::int64_t reduces = 0;
  std::int64_t forwards = 0;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    const auto operands = p.operands_of(op);
    if (op.kind == OpKind::kGradCopy) {
      ASSERT_EQ(operands.size(), 2u);
      written_by_copy[operands[1].buffer] = static_cast<std::int32_t>(i);
    } else if (op.kind == OpKind::kAllGather) {
      ASSERT_EQ(operands.size(), 2u);
      EXPECT_EQ(operands[1].extent, Extent::kFull);
      written_by_gather[operands[1].buffer] = static_cast<std::int32_t>(i);
    } else if (op.kind == OpKind::kReduceScatter) {
      ASSERT_EQ(operands.size(), 3u);
      EXPECT_EQ(operands[0].space, BufferSpace::kTransient);
      EXPECT_TRUE(written_by_copy.count(operands[0].buffer)) << "op " << i;
      EXPECT_EQ(operands[2].space, BufferSpace::kResident);
      EXPECT_EQ(p.resident[static_cast<std::size_t>(operands[2].buffer)].kind,
                ResidentKind::kMainGrad);
      ++reduces;
    } else if (op.kind == OpKind::kForward) {
      ASSERT_EQ(operands.size(), 2u);  // one weight, the kept activations
      EXPECT_TRUE(written_by_gather.count(operands[0].buffer)) << "op " << i;
      EXPECT_EQ(operands[1].access, Access::kWrite);
      ++forwards;
    }
  }
  EXPECT_EQ(reduces, 3);
  EXPECT_EQ(forwards, 3);
}

// ZeRO-3 on both DP axes ([S, S]) on dp_outer=2,dp_inner=2: Partial^2 -> Shard^2 reduces in two
// reduce-scatters, inner axis first (docs/design/parallelism.md). The schedule of `microbatches`.
Schedule two_axis_zero3(std::int64_t microbatches) {
  const DeviceMesh mesh = testing::mesh_of("dp_outer=2,dp_inner=2");
  const Placement sh = Placement::shard();
  ConfigOptions options;
  options.mesh = mesh;
  options.placements =
      Placements::make(mesh, {std::int64_t{0}, std::int64_t{1}}, {sh, sh}, {sh, sh}, {sh, sh})
          .value();
  options.microbatches = microbatches;
  return build(three_group_model(), assemble_config(options).value());
}

// The first of the two reduce-scatters writes its output (half the group) in place in the
// partial buffer it reads (which holds the full layout); only the last writes the temporary or
// the main grad, which hold the final quarter. Every collective's written operand is a buffer big
// enough for the range the step writes, on every rank.
TEST(ScheduleBuilderTest, TwoAxisReduceScatterWorksInPlaceInThePartialBuffer) {
  const Schedule s = two_axis_zero3(2);
  std::int64_t in_place = 0;
  std::int64_t last = 0;
  for (std::int64_t rank = 0; rank < s.mesh().size(); ++rank) {
    const RankProgram& p = s.program_of_rank(rank);
    std::map<std::int32_t, std::int64_t> elements;  // transient buffer -> allocated elements
    for (const Op& op : p.ops) {
      if (op.kind == OpKind::kAlloc) {
        elements[op.buffer] = op.elements;
      }
    }
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const Op& op = p.ops[i];
      if (!is_collective(op.kind)) {
        continue;
      }
      const CollectiveInfo& info = s.collectives()[static_cast<std::size_t>(op.collective)];
      const GroupGeometry& g = s.geometry().groups[static_cast<std::size_t>(info.geometry_group)];
      const CollectiveGeometry cg =
          collective_geometry(g, info.leg, static_cast<std::size_t>(info.leg_step), s.mesh(), rank)
              .value();
      const auto operands = p.operands_of(op);
      const std::string where = str_cat("rank ", rank, " op ", i, " (", to_string(info.leg),
                                        " step ", info.leg_step, ")");
      for (std::size_t k = 1; k < operands.size(); ++k) {
        const Operand& o = operands[k];
        const Range held = extent_range(g, o.extent, rank).value();
        const std::int64_t size = o.space == BufferSpace::kTransient
                                      ? elements.at(o.buffer)
                                      : p.resident[static_cast<std::size_t>(o.buffer)].elements;
        EXPECT_GE(size, held.numel) << where << " operand " << k;
        EXPECT_LE(held.start, cg.out.start) << where << " operand " << k;
        EXPECT_GE(held.end(), cg.out.end()) << where << " operand " << k;
      }
      if (info.leg != CollectiveLeg::kGradReduce) {
        continue;
      }
      ASSERT_EQ(op.kind, OpKind::kReduceScatter) << where;
      ASSERT_GE(operands.size(), 2u) << where;
      EXPECT_EQ(operands[0].access, Access::kRead) << where;
      EXPECT_EQ(operands[0].extent, Extent::kFull) << where;
      EXPECT_EQ(elements.at(operands[0].buffer), g.layout.size()) << where;
      if (info.leg_step == 0) {
        // The inner axis first, in place: half of the full layout stays in the buffer.
        EXPECT_EQ(op.axis, 1) << where;
        ASSERT_EQ(operands.size(), 2u) << where;
        EXPECT_EQ(operands[1].buffer, operands[0].buffer) << where;
        EXPECT_EQ(operands[1].space, BufferSpace::kTransient) << where;
        EXPECT_EQ(operands[1].access, Access::kWrite) << where;
        EXPECT_EQ(operands[1].extent, Extent::kFull) << where;
        EXPECT_EQ(cg.out.numel * 2, cg.in.numel) << where;
        ++in_place;
      } else {
        // Then the outer axis from the partial buffer into the final quarter.
        EXPECT_EQ(info.leg_step, 1) << where;
        EXPECT_EQ(op.axis, 0) << where;
        ASSERT_EQ(operands.size(), 3u) << where;
        EXPECT_FALSE(operands[1].space == operands[0].space &&
                     operands[1].buffer == operands[0].buffer)
            << where;
        EXPECT_EQ(operands[1].extent, Extent::kGradient) << where;
        EXPECT_EQ(cg.out.numel * 4, g.layout.size()) << where;
        ++last;
      }
    }
  }
  // 3 groups x 2 microbatches x 4 ranks.
  EXPECT_EQ(in_place, 3 * 2 * 4);
  EXPECT_EQ(last, 3 * 2 * 4);
}

// The verifier refuses the IR this builder emitted before: the first reduce-scatter writing its
// half of the group into the buffer of the final quarter (the temporary or the main grad).
TEST(ScheduleBuilderTest, VerifierRefusesAReduceScatterStepThatWritesPastItsBuffer) {
  const Schedule s = two_axis_zero3(1);
  ScheduleParts parts = s.parts();
  RankProgram& p = parts.programs.front();
  bool moved = false;
  for (std::size_t i = 0; i + 1 < p.ops.size() && !moved; ++i) {
    const Op& op = p.ops[i];
    if (op.kind != OpKind::kReduceScatter ||
        parts.collectives[static_cast<std::size_t>(op.collective)].leg_step != 0) {
      continue;
    }
    // The next collective of the group is the last step: its receive operand.
    for (std::size_t j = i + 1; j < p.ops.size(); ++j) {
      if (p.ops[j].kind == OpKind::kReduceScatter && p.ops[j].unit == op.unit &&
          p.ops[j].group == op.group) {
        p.operands[static_cast<std::size_t>(op.first_operand) + 1] =
            p.operands[static_cast<std::size_t>(p.ops[j].first_operand) + 1];
        moved = true;
        break;
      }
    }
  }
  ASSERT_TRUE(moved);
  const Status st = verify_schedule(parts);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("of extent gradient holds ["), std::string::npos)
      << st.error().message();
  EXPECT_NE(st.error().message().find("the grad_reduce step 0 writes ["), std::string::npos)
      << st.error().message();
}

// ZeRO-1 reduces without communication: a grad accumulate adds the partial buffer into the
// (per-step) main grad, overwriting it in microbatch 0 and adding to it after.
TEST(ScheduleBuilderTest, Zero1AccumulatesThePartialGradientsLocally) {
  const Schedule s = build(three_group_model(), config_of(Strategy::kZero1, "dp=4", microbatches(2)));
  const RankProgram& p = s.programs()[0];
  std::map<std::int32_t, std::int64_t> by_microbatch;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kGradAccumulate) {
      continue;
    }
    const auto operands = p.operands_of(op);
    ASSERT_EQ(operands.size(), 2u);
    EXPECT_EQ(operands[1].access, op.microbatch == 0 ? Access::kWrite : Access::kReadWrite);
    EXPECT_EQ(operands[1].extent, Extent::kGradient);
    EXPECT_EQ(op.stream, StreamKind::kReduceScatter);
    EXPECT_GT(op.mem_bytes, 0);
    ++by_microbatch[op.microbatch];
  }
  EXPECT_EQ(by_microbatch, (std::map<std::int32_t, std::int64_t>{{0, 3}, {1, 3}}));
}

// --- scale -------------------------------------------------------------------------------------

TEST(ScheduleBuilderTest, Llama405bOn16384RanksHsdpSharesOneProgram) {
  const Model m = load_model_preset("llama-3.1-405b").value();
  const Schedule s =
      build(m, config_of(Strategy::kHsdp, "dp_outer=2048,dp_inner=8", microbatches(2)));
  ASSERT_EQ(s.programs().size(), 1u);
  EXPECT_EQ(s.programs()[0].num_ranks, 16384);
  EXPECT_EQ(s.rank_class().size(), 16384u);
  const CollectiveSummary sum = s.collective_summary();
  std::int64_t trainable_groups = 0;
  for (const CollectiveInfo& info : s.collectives()) {
    trainable_groups += info.leg == CollectiveLeg::kGradFinalize ? 1 : 0;
  }
  EXPECT_EQ(sum.at("reduce-scatter").at("dp_inner"), 2 * trainable_groups);
  EXPECT_EQ(sum.at("all-reduce").at("dp_outer"), trainable_groups);
}

}  // namespace
}  // namespace fsdp

namespace fsdp {
namespace {

// Forward, backward and recompute carry the unit's compute dtype, so the cost model prices fp32
// training at the GPU's fp32 rate (it read bf16 for every compute op, which made an fp32 run on
// an H200 predict 12x too fast; issue 18, question 4).
TEST(ScheduleBuilderTest, ComputeOpsCarryTheUnitsComputeDtype) {
  for (const DType compute : {DType::kFp32, DType::kBf16}) {
    FsdpOptions o;
    o.recompute = RecomputePolicy::full_all_units();
    o.mixed_precision = MixedPrecisionPolicy::make(DType::kFp32, std::nullopt, compute).value();
    const Schedule s = build(testing::three_group_model(), testing::config_of(Strategy::kZero3, "dp=2", o));
    int seen = 0;
    for (const Op& op : s.programs()[0].ops) {
      if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward ||
          op.kind == OpKind::kRecompute) {
        EXPECT_EQ(op.dtype, compute) << to_string(op.kind);
        ++seen;
      }
    }
    EXPECT_EQ(seen, 9);  // three units: forward, recompute and backward each
  }
}

}  // namespace
}  // namespace fsdp

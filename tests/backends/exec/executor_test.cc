// SPDX-License-Identifier: Apache-2.0
// The backends' central check: sharded training through the executor (ranks as threads, in-process
// collectives) equals the unsharded reference, per-step losses and final weights within 1e-5
// relative, for every layout, strategy, microbatch count, prefetch depth and grad_scale; plus the
// executor's faults and its timeline.
#include "backends/exec/executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "backends/cpu/in_process_comm.h"
#include "backends/cpu/in_process_training.h"
#include "backends/exec/trainer.h"
#include "core/schedule/group_geometry.h"
#include "tests/backends/cpu/timeout_test_util.h"
#include "tests/backends/exec/train_test_util.h"

namespace fsdp::exec {
namespace {

TrainSpec tiny_spec() { return testing::tiny_train_spec(); }

struct Case {
  std::string name;
  std::string mesh = "dp=4";
  Strategy strategy = Strategy::kZero3;
  ShardLayout layout = ShardLayout::kPadded;
  bool tensor_atomic = false;
  std::int64_t microbatches = 1;
  std::int64_t prefetch = 1;  // next(k) both ways; 0 = none
  double grad_scale = 1.0;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  bool recompute = false;
  bool unified_streams = false;
  bool llama = false;  // the Llama-family network (backends/model/decoder.h) with every bias
  bool tp_llama = false;  // the Llama network split for the mesh's tp axis (tiny_tp_llama)
  bool moe = false;       // the Mixtral network split for the mesh's ep axis (tiny_moe)
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

TrainSpec spec_of(const Case& c) {
  TrainSpec spec = tiny_spec();
  if (c.llama) {
    spec.model = testing::tiny_train_llama(spec.model);
  }
  spec.mesh = parse_device_mesh(c.mesh).value();
  if (c.tp_llama) {
    spec.model = testing::tiny_tp_llama(spec.model, spec.mesh);
  }
  if (c.moe) {
    spec.model = testing::tiny_moe(spec.model, spec.mesh);
  }
  spec.strategy = c.strategy;
  spec.shard_layout = c.layout;
  spec.tensor_atomic = c.tensor_atomic;
  spec.microbatches = c.microbatches;
  spec.grad_scale = c.grad_scale;
  spec.optimizer = c.optimizer;
  spec.recompute = c.recompute ? RecomputePolicy::full_all_units() : RecomputePolicy{};
  PrefetchPolicy p = c.prefetch == 0 ? PrefetchPolicy::none()
                                     : PrefetchPolicy::next_units(c.prefetch).value();
  spec.schedule = SchedulePolicy::make(p, p, 0, c.unified_streams).value();
  return spec;
}

// Every one of the 4 ranks of `sharded` has the losses and final weights of the unsharded
// reference of `spec` within 1e-5 relative, and training moved the weights (so matching them is
// not trivial).
void expect_matches_reference(const TrainSpec& spec,
                              const Expected<std::vector<RankResult>>& sharded) {
  ASSERT_TRUE(sharded.has_value()) << sharded.error().message();
  auto reference = train_reference(spec);
  ASSERT_TRUE(reference.has_value()) << reference.error().message();
  ASSERT_EQ(sharded->size(), 4U);
  for (const RankResult& r : *sharded) {
    ASSERT_EQ(r.losses.size(), static_cast<std::size_t>(spec.steps));
    EXPECT_LE(max_relative_error(r.losses, reference->losses), 1e-5) << "rank " << r.rank;
    EXPECT_LE(max_relative_error(r.final_params, reference->final_params), 1e-5)
        << "rank " << r.rank;
  }
  EXPECT_GT(max_relative_error(reference->final_params,
                               backend::initial_parameters(spec.model)),
            1e-3);
}

class ShardedEqualsUnshardedTest : public ::testing::TestWithParam<Case> {};

TEST_P(ShardedEqualsUnshardedTest, LossesAndFinalWeightsMatch) {
  const TrainSpec spec = spec_of(GetParam());
  expect_matches_reference(spec, cpu::train_in_process(spec));
}

INSTANTIATE_TEST_SUITE_P(
    Configs, ShardedEqualsUnshardedTest,
    ::testing::Values(
        Case{"Zero3PaddedOneMicrobatch"},
        Case{"Zero3PaddedFourMicrobatches", "dp=4", Strategy::kZero3, ShardLayout::kPadded, false,
             4},
        Case{"Zero3UnpaddedFourMicrobatches", "dp=4", Strategy::kZero3, ShardLayout::kUnpadded,
             false, 4},
        Case{"Zero3TensorAtomic", "dp=4", Strategy::kZero3, ShardLayout::kPadded, true, 1},
        Case{"Zero2TensorAtomicFourMicrobatches", "dp=4", Strategy::kZero2, ShardLayout::kPadded,
             true, 4},
        Case{"Zero2PaddedFourMicrobatches", "dp=4", Strategy::kZero2, ShardLayout::kPadded, false,
             4},
        Case{"Zero1PaddedFourMicrobatches", "dp=4", Strategy::kZero1, ShardLayout::kPadded, false,
             4},
        Case{"Zero1UnpaddedOneMicrobatch", "dp=4", Strategy::kZero1, ShardLayout::kUnpadded, false,
             1},
        Case{"NoShardFourMicrobatches", "dp=4", Strategy::kNoShard, ShardLayout::kPadded, false, 4},
        Case{"HsdpTwoByTwoFourMicrobatches", "outer=2,inner=2", Strategy::kHsdp,
             ShardLayout::kPadded, false, 4},
        Case{"HsdpTwoByTwoOneMicrobatch", "outer=2,inner=2", Strategy::kHsdp, ShardLayout::kPadded,
             false, 1},
        Case{"HfsdpTwoByTwoFourMicrobatches", "outer=2,inner=2", Strategy::kHfsdp,
             ShardLayout::kPadded, false, 4},
        Case{"HfsdpTwoByTwoOneMicrobatchPrefetchTwo", "outer=2,inner=2", Strategy::kHfsdp,
             ShardLayout::kPadded, false, 1, 2},
        Case{"Zero3PrefetchNone", "dp=4", Strategy::kZero3, ShardLayout::kPadded, false, 4, 0},
        Case{"Zero3PrefetchTwo", "dp=4", Strategy::kZero3, ShardLayout::kUnpadded, false, 1, 2},
        Case{"Zero3GradScaleHalfSgd", "dp=4", Strategy::kZero3, ShardLayout::kPadded, false, 4, 1,
             0.5, OptimizerKind::kSgd},
        Case{"HsdpGradScaleTwoMomentum", "outer=2,inner=2", Strategy::kHsdp, ShardLayout::kPadded,
             false, 4, 1, 2.0, OptimizerKind::kSgdMomentum},
        Case{"Zero3RecomputeUnifiedStreams", "dp=4", Strategy::kZero3, ShardLayout::kPadded, false,
             2, 1, 1.0, OptimizerKind::kAdam, /*recompute=*/true,
             /*unified_streams=*/true},
        // The Llama network: every strategy, both row layouts, TensorAtomic and recomputation.
        Case{"LlamaZero3Padded", "dp=4", Strategy::kZero3, ShardLayout::kPadded, false, 1, 1, 1.0,
             OptimizerKind::kAdam, false, false, /*llama=*/true},
        Case{"LlamaZero3UnpaddedTwoMicrobatches", "dp=4", Strategy::kZero3, ShardLayout::kUnpadded,
             false, 2, 1, 1.0, OptimizerKind::kAdam, false, false, true},
        Case{"LlamaZero3Recompute", "dp=4", Strategy::kZero3, ShardLayout::kPadded, false, 2, 1,
             1.0, OptimizerKind::kAdam, /*recompute=*/true, false, true},
        Case{"LlamaZero2TensorAtomic", "dp=4", Strategy::kZero2, ShardLayout::kPadded, true, 2, 1,
             1.0, OptimizerKind::kAdam, false, false, true},
        Case{"LlamaZero1Unpadded", "dp=4", Strategy::kZero1, ShardLayout::kUnpadded, false, 1, 1,
             1.0, OptimizerKind::kAdam, false, false, true},
        Case{"LlamaNoShardRecompute", "dp=4", Strategy::kNoShard, ShardLayout::kPadded, false, 1, 1,
             1.0, OptimizerKind::kAdam, true, false, true},
        Case{"LlamaHsdpTwoByTwoRecompute", "outer=2,inner=2", Strategy::kHsdp, ShardLayout::kPadded,
             false, 2, 1, 1.0, OptimizerKind::kAdam, true, false, true},
        Case{"LlamaHfsdpTwoByTwo", "outer=2,inner=2", Strategy::kHfsdp, ShardLayout::kPadded, false,
             1, 1, 1.0, OptimizerKind::kAdam, false, false, true},
        // Tensor parallelism beside FSDP (issue 19): FSDP over dp of each tp rank's slices, the
        // tp axis inner or outer, recomputation repeating the forward's collectives, ZeRO-1 and
        // TensorAtomic layouts of the slices, replicas with momentum and a grad scale.
        Case{"TensorParallelDp2Tp2Zero3", "dp=2,tp=2", Strategy::kZero3, ShardLayout::kPadded,
             false, 2, 1, 1.0, OptimizerKind::kAdam, false, false, false, /*tp_llama=*/true},
        Case{"TensorParallelTpOuterRecompute", "tp=2,dp=2", Strategy::kZero3,
             ShardLayout::kUnpadded, false, 2, 1, 1.0, OptimizerKind::kAdam, true, false, false,
             true},
        Case{"TensorParallelZero1TensorAtomic", "dp=2,tp=2", Strategy::kZero1, ShardLayout::kPadded,
             true, 1, 2, 1.0, OptimizerKind::kAdam, false, false, false, true},
        Case{"TensorParallelNoShardGradScaleMomentum", "dp=2,tp=2", Strategy::kNoShard,
             ShardLayout::kPadded, false, 2, 1, 0.5, OptimizerKind::kSgdMomentum, false, false,
             false, true},
        // Expert parallelism beside FSDP: dense tensors over dp x ep (a two-step reduce-scatter
        // under ZeRO-3/2), the experts over dp only, the ep axis inner or outer, recomputation
        // repeating the all-to-alls, and a grad scale the expert groups share.
        Case{"ExpertParallelDp2Ep2Zero3", "dp=2,ep=2", Strategy::kZero3, ShardLayout::kPadded,
             false, 2, 1, 1.0, OptimizerKind::kAdam, false, false, false, false, /*moe=*/true},
        Case{"ExpertParallelEpOuterRecompute", "ep=2,dp=2", Strategy::kZero3, ShardLayout::kPadded,
             false, 1, 1, 1.0, OptimizerKind::kAdam, /*recompute=*/true, false, false, false, true},
        Case{"ExpertParallelZero2GradScaleSgd", "dp=2,ep=2", Strategy::kZero2, ShardLayout::kPadded,
             false, 2, 1, 0.5, OptimizerKind::kSgd, false, false, false, false, true},
        Case{"ExpertParallelZero1TwoMicrobatches", "dp=2,ep=2", Strategy::kZero1,
             ShardLayout::kPadded, false, 2, 1, 1.0, OptimizerKind::kAdam, false, false, false,
             false, true},
        Case{"ExpertParallelEp4Zero3Momentum", "dp=1,ep=4", Strategy::kZero3, ShardLayout::kPadded,
             false, 1, 1, 2.0, OptimizerKind::kSgdMomentum, false, false, false, false, true}),
    [](const ::testing::TestParamInfo<Case>& param_info) { return param_info.param.name; });

// --recompute full is the frameworks' full checkpointing (docs/models.md): the schedule
// recomputes the transformer blocks and not the embedding or the head, the decoders drop the
// intermediates of exactly those units, and training still matches the unsharded reference.
// full-all-units recomputes every unit.
TEST(ExecutorTest, RecomputeFullIsTheBlocksOnlyOnBothNetworks) {
  for (const bool llama : {false, true}) {
    SCOPED_TRACE(llama ? "llama" : "mlp");
    for (const char* mode : {"full", "full-all-units"}) {
      SCOPED_TRACE(mode);
      TrainSpec spec = tiny_spec();
      if (llama) {
        spec.model = testing::tiny_train_llama(spec.model);
      }
      spec.recompute = RecomputePolicy::parse(mode).value();
      const TrainSetup setup = prepare_training(spec).value();
      std::set<std::string> recomputed;
      for (const Op& op : setup.schedule.program_of_rank(0).ops) {
        if (op.kind == OpKind::kRecompute) {
          recomputed.insert(setup.model.units()[static_cast<std::size_t>(op.unit)].name());
        }
      }
      std::set<std::string> expected;
      for (const Unit& u : setup.model.units()) {
        if (u.name().starts_with("layers.") || std::string_view(mode) == "full-all-units") {
          expected.insert(u.name());
        }
      }
      EXPECT_EQ(recomputed, expected);
      // The decoder keeps a recomputed unit's input only and every other unit's intermediates.
      auto decoder = backend::HostDecoder::make(spec.model, 1, 0, 1).value();
      set_decoder_recompute(setup, *decoder);
      decoder->begin_step(0);
      const backend::ParamValues params = backend::initial_parameters(spec.model);
      const std::int64_t tokens = spec.model.micro_batch_size * spec.model.seq_len;
      std::int64_t kept = 0;
      for (std::int32_t u = 0; u < setup.model.num_units(); ++u) {
        const auto i = static_cast<std::size_t>(u);
        decoder->forward(u, 0, backend::testing::const_ptrs(params[i]));
        const Unit& unit = setup.model.units()[i];
        const UnitActivations& a = unit.activations();
        // The Llama embedding's token ids live all step outside activation_bytes (decoder.h).
        if (!(llama && u == 0)) {
          kept += tokens * (expected.count(unit.name()) != 0 ? a.recompute : a.stored);
        }
        EXPECT_EQ(decoder->activation_bytes(), kept) << "after the forward of " << unit.name();
      }
      expect_matches_reference(spec, cpu::train_in_process(spec));
    }
  }
}

// ZeRO-3 on both DP axes ([S, S] on dp_outer=2,dp_inner=2; no strategy names it, so the placements
// are given): the gradients reduce in two reduce-scatters, inner axis first, the first in place in
// the partial buffer (docs/design/parallelism.md). The small decoder then trains as unsharded
// training does, with several microbatches (the temporary of the last step) and with one (the
// last step writes the main grad directly).
TEST(ExecutorTest, TwoShardedDpAxesReduceInTwoStepsAndMatchUnsharded) {
  for (const std::int64_t microbatches : {1, 3}) {
    TrainSpec spec = tiny_spec();
    spec.mesh = parse_device_mesh("dp_outer=2,dp_inner=2").value();
    spec.strategy = Strategy::kHsdp;  // replaced by the explicit placements
    spec.microbatches = microbatches;
    const TrainSetup setup =
        testing::setup_with_placements(spec, testing::shard_on_two_axes(spec.mesh));
    // The schedule does reduce in two steps (the case this test exists for).
    std::int64_t two_step_groups = 0;
    for (const GroupGeometry& g : setup.schedule.geometry().groups) {
      two_step_groups += g.trainable && g.leg(CollectiveLeg::kGradReduce).steps.size() == 2;
    }
    ASSERT_GT(two_step_groups, 0);
    SCOPED_TRACE(::testing::Message() << microbatches << " microbatches");
    expect_matches_reference(spec, collect_ranks(cpu::run_ranks_in_process(setup, spec, {})));
  }
}

// The executor checks every collective the decoder issues inside a unit against the schedule's
// activation collective ops: a decoder that computes on other shapes than the schedule's (here
// one sample per microbatch where the schedule was built for two) stops the step with both.
TEST(ExecutorTest, DecoderCollectivesThatDifferFromTheScheduleEndTheStep) {
  TrainSpec spec = tiny_spec();
  spec.mesh = parse_device_mesh("dp=2,tp=2").value();
  spec.model = testing::tiny_tp_llama(spec.model, spec.mesh);
  const TrainSetup setup = prepare_training(spec).value();
  TrainSpec other = spec;
  other.model.micro_batch_size = 1;
  const auto outcomes = cpu::run_ranks_in_process(setup, other, {});
  const Error* e = first_failure(outcomes);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message().find("the schedule lists all-reduce embedding.out of unit "
                              "'embedding' (64 elements); the decoder issued all-reduce "
                              "embedding.out (32 elements)"),
            std::string::npos)
      << e->message();
}

TEST(ExecutorTest, LossFalls) {
  TrainSpec spec = tiny_spec();
  spec.steps = 12;
  auto runs = cpu::train_in_process(spec);
  ASSERT_TRUE(runs.has_value()) << runs.error().message();
  const std::vector<double>& losses = (*runs)[0].losses;
  EXPECT_LT(losses.back(), losses.front());
}

TEST(ExecutorTest, TimelineFollowsTheProgramOnEveryStream) {
  TrainSpec spec = tiny_spec();
  spec.steps = 1;
  spec.microbatches = 2;
  auto setup = prepare_training(spec);
  ASSERT_TRUE(setup.has_value()) << setup.error().message();
  auto runs = cpu::train_in_process(spec);
  ASSERT_TRUE(runs.has_value()) << runs.error().message();
  const RankProgram& program = setup->schedule.program_of_rank(0);
  std::map<StreamKind, std::vector<std::int32_t>> expected;
  for (std::size_t i = 0; i < program.ops.size(); ++i) {
    expected[program.ops[i].stream].push_back(static_cast<std::int32_t>(i));
  }
  std::map<StreamKind, std::vector<std::int32_t>> ran;
  std::int64_t collective_bytes = 0;
  for (const OpTiming& t : (*runs)[0].timeline) {
    ran[t.stream].push_back(t.op);
    EXPECT_LE(t.start_ns, t.end_ns);
    collective_bytes += t.bytes;
  }
  EXPECT_EQ(ran, expected);
  std::int64_t ir_bytes = 0;
  std::int64_t ir_alloc = 0;
  for (const Op& op : program.ops) {
    ir_bytes += is_collective(op.kind) ? op.bytes : 0;
    ir_alloc += op.kind == OpKind::kAlloc ? op.bytes : 0;
  }
  EXPECT_EQ(collective_bytes, ir_bytes);
  std::int64_t logged_alloc = 0;
  for (const ArenaRecord& r : (*runs)[0].arena_log) {
    logged_alloc += r.is_alloc ? r.bytes : 0;
  }
  EXPECT_EQ(logged_alloc, ir_alloc);
  EXPECT_GT((*runs)[0].high_water[static_cast<std::size_t>(BufferClass::kUnshardedWeights)], 0);
}

// Under tp the activation collectives run inside their unit's compute op: the timeline gives
// each the call's own interval (within the compute op it ran in) and takes that time off the
// compute op, so a trace or `calibrate --fit` sees what the collectives and the kernels took.
TEST(ExecutorTest, TensorParallelCollectivesReportTheirOwnTime) {
  TrainSpec spec = tiny_spec();
  spec.steps = 1;
  spec.mesh = parse_device_mesh("dp=2,tp=2").value();
  spec.model = testing::tiny_tp_llama(spec.model, spec.mesh);
  auto setup = prepare_training(spec);
  ASSERT_TRUE(setup.has_value()) << setup.error().message();
  auto runs = cpu::train_in_process(spec);
  ASSERT_TRUE(runs.has_value()) << runs.error().message();
  const RankProgram& program = setup->schedule.program_of_rank(0);
  // Per compute op: its reported interval and the activation ops after it. Each of those ran
  // inside the compute task, so it starts after the compute op starts and ends by the task's
  // original end (the reported end plus what was taken off); the check task that follows the
  // compute task would start only after that end.
  struct Group {
    const OpTiming* compute = nullptr;
    std::vector<const OpTiming*> collectives;
  };
  std::vector<Group> groups;
  int activations = 0;
  std::int64_t activation_ns = 0;
  for (const OpTiming& t : (*runs)[0].timeline) {
    EXPECT_LE(t.start_ns, t.end_ns);
    if (t.stream != StreamKind::kCompute) {
      continue;
    }
    const Op& op = program.ops[static_cast<std::size_t>(t.op)];
    if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward) {
      groups.push_back({&t, {}});
    } else if (is_collective(op.kind) &&
               setup->schedule.collectives()[static_cast<std::size_t>(op.collective)].activation >=
                   0) {
      ASSERT_FALSE(groups.empty()) << "op " << t.op;
      groups.back().collectives.push_back(&t);
      ++activations;
      activation_ns += t.end_ns - t.start_ns;
    }
  }
  for (const Group& g : groups) {
    std::int64_t taken = 0;
    for (const OpTiming* c : g.collectives) {
      taken += c->end_ns - c->start_ns;
    }
    for (const OpTiming* c : g.collectives) {
      EXPECT_GE(c->start_ns, g.compute->start_ns) << "op " << c->op;
      EXPECT_LE(c->end_ns, g.compute->end_ns + taken) << "op " << c->op;
    }
  }
  // Per microbatch: embedding 1, 2 layers x 4, head 2.
  EXPECT_EQ(activations, 11);
  EXPECT_GT(activation_ns, 0);
}

TEST(ExecutorTest, MissingRankEndsEveryRankWithAClearError) {
  TrainSpec spec = tiny_spec();
  spec.timeout_s = 0.3;
  auto setup = prepare_training(spec);
  ASSERT_TRUE(setup.has_value()) << setup.error().message();
  auto outcomes = cpu::run_ranks_in_process(*setup, spec,
                                            [](std::int64_t r) { return r == 3; });
  ASSERT_EQ(outcomes.size(), 4U);
  for (std::int64_t r = 0; r < 3; ++r) {
    const auto& o = outcomes[static_cast<std::size_t>(r)];
    ASSERT_FALSE(o.has_value()) << "rank " << r;
    const std::vector<std::string> missing = test::missing_ranks(o.error().message());
    EXPECT_NE(std::find(missing.begin(), missing.end(), "3"), missing.end())
        << o.error().message();
  }
}

TEST(ExecutorTest, LayoutRejectedShapeStopsBeforeAnyAllocation) {
  TrainSpec spec = tiny_spec();
  spec.block_size = 3;  // hidden 8 rows of the embedding are not a multiple of 3
  auto setup = prepare_training(spec);
  ASSERT_FALSE(setup.has_value());
  EXPECT_NE(setup.error().message().find("unit '"), std::string::npos)
      << setup.error().message();
}

TEST(ExecutorTest, NonFp32TrainingIsRejectedBeforeAnyAllocation) {
  TrainSpec spec = tiny_spec();
  spec.compute = DType::kBf16;
  auto setup = prepare_training(spec);
  ASSERT_TRUE(setup.has_value()) << setup.error().message();
  auto world = cpu::InProcessWorld::make(setup->config.mesh(), std::chrono::milliseconds(100));
  ASSERT_TRUE(world.has_value());
  auto comms = (*world)->communicators(0);
  cpu::CpuDevice device("rank 0");
  auto result = train_rank(*setup, spec, 0, device, *comms, {});
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().message().find("real training needs fp32"), std::string::npos)
      << result.error().message();
  EXPECT_TRUE(device.arena().log().empty());
}

}  // namespace
}  // namespace fsdp::exec

namespace fsdp::exec {
namespace {

// A CPU device that claims its memory is not host-addressable (as a GPU's is not).
class DeviceMemoryDevice final : public Device {
 public:
  explicit DeviceMemoryDevice(std::string name) : cpu_(std::move(name)) {}
  std::string name() const override { return cpu_.name(); }
  void submit(StreamKind s, TaskTag t, Task task) override { cpu_.submit(s, t, std::move(task)); }
  void record(StreamKind s, std::int32_t e, TaskTag t) override { cpu_.record(s, e, t); }
  void wait(StreamKind s, std::int32_t e, TaskTag t) override { cpu_.wait(s, e, t); }
  Status synchronize() override { return cpu_.synchronize(); }
  void reset_events(std::int32_t n) override { cpu_.reset_events(n); }
  void abort(const Error& e) override { cpu_.abort(e); }
  Fence fence(StreamKind s) override { return cpu_.fence(s); }
  bool host_addressable() const override { return false; }
  Arena& arena() override { return cpu_.arena(); }
  MemoryResource& memory() override { return cpu_.memory(); }
  Status copy(StreamKind s, float* d, const float* x, std::int64_t n) override {
    return cpu_.copy(s, d, x, n);
  }
  Status accumulate(StreamKind s, float* d, const float* x, std::int64_t n, float scale,
                    bool overwrite) override {
    return cpu_.accumulate(s, d, x, n, scale, overwrite);
  }
  Status optimizer_update(StreamKind s, OptimizerKind k, const backend::OptimizerHyper& h,
                          std::int64_t step, float* w, const float* g, float* st,
                          std::int64_t n) override {
    return cpu_.optimizer_update(s, k, h, step, w, g, st, n);
  }
  Status upload(StreamKind s, float* d, const float* h, std::int64_t n) override {
    return cpu_.upload(s, d, h, n);
  }
  Status download(StreamKind s, float* h, const float* d, std::int64_t n) override {
    return cpu_.download(s, h, d, n);
  }
  Expected<std::unique_ptr<backend::HostDecoder>> make_decoder(
      const backend::DecoderConfig& c, std::int64_t mb, std::int64_t r,
      std::int64_t w) override {
    return cpu_.make_decoder(c, mb, r, w);
  }
  std::int64_t now_ns() const override { return cpu_.now_ns(); }
  std::vector<TaskTiming> timeline() const override { return cpu_.timeline(); }

 private:
  cpu::CpuDevice cpu_;
};

// An observer reads the collective's buffers through host spans: on device memory that would be
// a read of device pointers on the host (issue 18, defect 8), so make() refuses it.
TEST(ExecutorTest, CollectiveObserverNeedsHostAddressableMemory) {
  TrainSpec spec = tiny_spec();
  spec.mesh = one_axis_mesh(1);
  auto setup = prepare_training(spec);
  ASSERT_TRUE(setup.has_value()) << setup.error().message();
  auto world = cpu::InProcessWorld::make(setup->config.mesh(), std::chrono::milliseconds(1000));
  ASSERT_TRUE(world.has_value());
  auto comms = (*world)->communicators(0);
  DeviceMemoryDevice device("rank 0");
  auto decoder = device.make_decoder(spec.model, spec.microbatches, 0, 1);
  ASSERT_TRUE(decoder.has_value()) << decoder.error().message();
  ExecutorOptions options;
  options.on_collective = [](const CollectiveObservation&) {};
  auto executor = Executor::make(setup->schedule, 0, setup->initial, decoder->get(), &device,
                                 comms.get(), options);
  ASSERT_FALSE(executor.has_value());
  EXPECT_NE(executor.error().message().find("host-addressable"), std::string::npos)
      << executor.error().message();
  options.on_collective = nullptr;  // without an observer the same device is fine
  auto plain = Executor::make(setup->schedule, 0, setup->initial, decoder->get(), &device,
                              comms.get(), options);
  EXPECT_TRUE(plain.has_value()) << plain.error().message();
}

}  // namespace
}  // namespace fsdp::exec

namespace fsdp::exec {
namespace {

// A prediction needs the plan, not the weights: prepare_plan builds the same schedule without
// generating the initial values (which for a GPU-sized decoder took minutes in a debug build).
TEST(TrainerTest, PreparePlanIsPrepareTrainingWithoutInitialValues) {
  const TrainSpec spec = tiny_spec();
  auto plan = prepare_plan(spec);
  auto full = prepare_training(spec);
  ASSERT_TRUE(plan.has_value()) << plan.error().message();
  ASSERT_TRUE(full.has_value()) << full.error().message();
  EXPECT_TRUE(plan->initial.empty());
  EXPECT_FALSE(full->initial.empty());
  EXPECT_EQ(plan->schedule.programs().size(), full->schedule.programs().size());
  EXPECT_EQ(plan->schedule.programs()[0].ops.size(), full->schedule.programs()[0].ops.size());
  TrainSpec bad = spec;
  bad.steps = 0;
  EXPECT_FALSE(prepare_plan(bad).has_value());
}

}  // namespace
}  // namespace fsdp::exec

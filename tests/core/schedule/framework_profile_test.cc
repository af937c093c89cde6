// SPDX-License-Identifier: Apache-2.0
// Framework profiles, precision and the memory real runs hold (issue 15, items 2-4): each
// buffer the builder adds for fsdp2/fsdp1, its lifetime, the collective bytes the precision
// flags move, and Megatron-FSDP (the default) unchanged. On Llama 3 8B at dp=8, 2 x 2048 tokens.
#include "core/policy/framework_profile.h"

#include "core/model/model_presets.h"
#include "core/schedule/schedule_builder.h"
#include "tests/core/schedule/schedule_test_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fsdp {
namespace {

using testing::config_of;

constexpr std::int64_t kVocab = 128256;
const Workload kWork{.seq_len = 2048, .micro_batch_size = 2};
constexpr std::int64_t kTokens = 2048 * 2;

const Model& llama() {
  static const Model m = load_model_preset("llama-3-8b").value();
  return m;
}

Schedule build(FsdpOptions o, const Workload& w = kWork) {
  auto s = build_schedule(llama(), config_of(Strategy::kZero3, "dp=8", std::move(o)), w);
  EXPECT_TRUE(s.has_value()) << s.error().message();
  return std::move(s).value();
}

FsdpOptions framework(Framework f, ReshardAfterForward r = ReshardAfterForward::kAll) {
  FsdpOptions o;
  o.framework = FrameworkProfile::make(f, r);
  return o;
}

std::int32_t unit_index(const Schedule& s, const std::string& name) {
  for (std::size_t i = 0; i < s.unit_names().size(); ++i) {
    if (s.unit_names()[i] == name) {
      return static_cast<std::int32_t>(i);
    }
  }
  ADD_FAILURE() << "no unit " << name;
  return -1;
}

// Unsharded-weight buffers of unit u still live at the end of microbatch 0's forward: allocs
// minus frees in its forward (0 when the unit was resharded after forward).
std::int64_t kept_after_forward(const Schedule& s, std::int32_t u) {
  std::int64_t n = 0;
  for (const Op& op : s.programs()[0].ops) {
    if (op.phase == Phase::kForward && op.microbatch == 0 && op.unit == u &&
        op.buffer_class == BufferClass::kUnshardedWeights) {
      n += op.kind == OpKind::kAlloc ? 1 : op.kind == OpKind::kFree ? -1 : 0;
    }
  }
  return n;
}

// Summed bytes of the collectives of one leg in the program.
std::int64_t leg_bytes(const Schedule& s, CollectiveLeg leg) {
  std::int64_t bytes = 0;
  for (const Op& op : s.programs()[0].ops) {
    if (op.collective >= 0 && s.collectives()[static_cast<std::size_t>(op.collective)].leg == leg) {
      bytes += op.bytes;
    }
  }
  return bytes;
}

std::map<std::string, std::int64_t> resident_by_kind(const Schedule& s) {
  std::map<std::string, std::int64_t> out;
  for (const ResidentBuffer& b : s.programs()[0].resident) {
    out[std::string(to_string(b.kind))] += b.bytes;
  }
  return out;
}

TEST(FrameworkProfileTest, ParsesItsNamesAndRejectsOthersInOneLine) {
  EXPECT_EQ(parse_framework("fsdp2").value(), Framework::kFsdp2);
  EXPECT_EQ(parse_reshard_after_forward("all-but-last").value(), ReshardAfterForward::kAllButLast);
  EXPECT_EQ(parse_framework("ddp").error().message(),
            "--framework is 'ddp'; expected megatron-fsdp, fsdp2 or fsdp1");
  EXPECT_EQ(parse_reshard_after_forward("some").error().message(),
            "--reshard-after-forward is 'some'; expected all, all-but-last or none");
  EXPECT_TRUE(FrameworkProfile().is_default());
  EXPECT_EQ(to_string(FrameworkProfile::make(Framework::kFsdp1, ReshardAfterForward::kNone)),
            "fsdp1 raf=none");
  EXPECT_FALSE(MixedPrecisionPolicy().with_collective_dtypes(DType::kFp8, false).has_value());
}

// The default is Megatron-FSDP as the builder wrote it before profiles: no copy-out, no loss
// transients, no optimizer scratch, resident bf16 model-weight shard and main grads.
TEST(FrameworkProfileTest, MegatronFsdpAddsNothing) {
  const Schedule s = build(FsdpOptions{});
  EXPECT_EQ(s.programs(), build(framework(Framework::kMegatronFsdp)).programs());
  for (const Op& op : s.programs()[0].ops) {
    EXPECT_FALSE(op.kind == OpKind::kCast && op.stream == StreamKind::kCompute);
    EXPECT_FALSE(op.kind == OpKind::kAlloc && op.buffer_class == BufferClass::kOptimizerState);
  }
  const auto r = resident_by_kind(s);
  EXPECT_GT(r.at("model_weight"), 0);
  EXPECT_GT(r.at("main_grad"), 0);
  EXPECT_EQ(kept_after_forward(s, unit_index(s, "embedding")), 0);
  EXPECT_EQ(s.runtime_memory(), FrameworkProfile().runtime_memory());
  EXPECT_GT(s.runtime_memory().outside_allocator_bytes, 0);
}

// FSDP2: flat all-gather output on the all-gather stream, copied out on the compute stream to
// a buffer of the group's numel, freed after the copy; compute reads the copy; the reshard frees
// it on the compute stream.
TEST(FrameworkProfileTest, Fsdp2CopiesTheAllGatherOutputOutPerParameter) {
  const Schedule s = build(framework(Framework::kFsdp2));
  const RankProgram& p = s.programs()[0];
  const std::int32_t layer = unit_index(s, "layers.3");
  const GroupGeometry& g = s.geometry().groups[static_cast<std::size_t>(
      s.geometry().unit_groups[static_cast<std::size_t>(layer)][0])];
  std::map<std::int32_t, const Op*> allocs;
  std::int64_t copies = 0;
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kAlloc) {
      allocs[op.buffer] = &op;
    }
    if (op.kind == OpKind::kCast && op.unit == layer && op.microbatch == 0 &&
        op.phase == Phase::kForward) {
      ++copies;
      ASSERT_EQ(op.num_operands, 2);
      const Operand& in = p.operands[static_cast<std::size_t>(op.first_operand)];
      const Operand& out = p.operands[static_cast<std::size_t>(op.first_operand + 1)];
      const Op& flat = *allocs.at(in.buffer);
      const Op& copy = *allocs.at(out.buffer);
      EXPECT_EQ(flat.stream, StreamKind::kAllGather);
      EXPECT_EQ(flat.elements, g.layout.size());
      EXPECT_EQ(copy.stream, StreamKind::kCompute);
      EXPECT_EQ(copy.elements, g.numel);
      EXPECT_EQ(copy.dtype, DType::kBf16);
      EXPECT_EQ(op.stream, StreamKind::kCompute);
      EXPECT_EQ(op.mem_bytes, 2 * (g.layout.size() + g.numel));
    }
  }
  EXPECT_EQ(copies, 1);
  // The two frees of its forward: the flat output after the copy, the copy at the reshard, both
  // on the compute stream.
  std::int64_t compute_frees = 0;
  for (const Op& op : p.ops) {
    compute_frees += op.kind == OpKind::kFree && op.unit == layer && op.microbatch == 0 &&
                             op.phase == Phase::kForward &&
                             op.buffer_class == BufferClass::kUnshardedWeights &&
                             op.stream == StreamKind::kCompute
                         ? 1
                         : 0;
  }
  EXPECT_EQ(compute_frees, 2);
  // FSDP1 gathers into its flat parameter and computes on views: no copy.
  const Schedule fsdp1 = build(framework(Framework::kFsdp1));
  for (const Op& op : fsdp1.programs()[0].ops) {
    EXPECT_FALSE(op.kind == OpKind::kCast && op.stream == StreamKind::kCompute);
  }
}

// PyTorch never reshards the root module after forward; --reshard-after-forward decides for
// the blocks.
TEST(FrameworkProfileTest, ReshardAfterForwardKeepsTheChosenUnitsGathered) {
  for (Framework f : {Framework::kFsdp2, Framework::kFsdp1}) {
    const Schedule all = build(framework(f));
    EXPECT_EQ(kept_after_forward(all, unit_index(all, "embedding")), 1);
    EXPECT_EQ(kept_after_forward(all, unit_index(all, "head")), 1);
    EXPECT_EQ(kept_after_forward(all, unit_index(all, "layers.31")), 0);
    const Schedule abl = build(framework(f, ReshardAfterForward::kAllButLast));
    EXPECT_EQ(kept_after_forward(abl, unit_index(abl, "layers.31")), 1);
    EXPECT_EQ(kept_after_forward(abl, unit_index(abl, "layers.30")), 0);
  }
  // Under Megatron-FSDP the embedding and the head are resharded whatever the blocks do.
  const Schedule none = build(framework(Framework::kMegatronFsdp, ReshardAfterForward::kNone));
  for (std::int32_t u = 0; u < llama().num_units(); ++u) {
    EXPECT_EQ(kept_after_forward(none, u),
              u == unit_index(none, "embedding") || u == unit_index(none, "head") ? 0 : 1)
        << none.unit_names()[static_cast<std::size_t>(u)];
  }
  // Weights kept from forward are not gathered again in backward: the blocks' backward has no
  // unshard, where the default gathers each once.
  const auto backward_block_gathers = [](const Schedule& sc) {
    std::int64_t n = 0;
    for (const Op& op : sc.programs()[0].ops) {
      n += op.kind == OpKind::kAllGather && op.phase == Phase::kBackward && op.microbatch == 0 &&
                   sc.unit_names()[static_cast<std::size_t>(op.unit)].rfind("layers.", 0) == 0
               ? 1
               : 0;
    }
    return n;
  };
  EXPECT_EQ(backward_block_gathers(none), 0);
  EXPECT_EQ(backward_block_gathers(build(FsdpOptions{})), 32);
}

// --reduce-dtype, --param-dtype and --fp8-all-gather move the collectives' bytes and the
// buffers' sizes.
TEST(FrameworkProfileTest, PrecisionChangesCollectiveBytesAndBuffers) {
  const Schedule base = build(FsdpOptions{});
  const std::int64_t reduce = leg_bytes(base, CollectiveLeg::kGradReduce);
  const std::int64_t gather = leg_bytes(base, CollectiveLeg::kUnshard);
  FsdpOptions fp32_reduce;
  fp32_reduce.mixed_precision =
      MixedPrecisionPolicy().with_collective_dtypes(DType::kFp32, false).value();
  const Schedule r = build(fp32_reduce);
  EXPECT_EQ(leg_bytes(r, CollectiveLeg::kGradReduce), 2 * reduce);
  EXPECT_EQ(leg_bytes(r, CollectiveLeg::kUnshard), gather);
  for (const Op& op : r.programs()[0].ops) {
    if (op.kind == OpKind::kAlloc && op.buffer_class == BufferClass::kPartialGrads) {
      EXPECT_EQ(op.dtype, DType::kFp32);
    }
  }
  FsdpOptions fp32_param;
  fp32_param.mixed_precision =
      MixedPrecisionPolicy::make(DType::kFp32, std::nullopt, DType::kFp32).value();
  EXPECT_EQ(leg_bytes(build(fp32_param), CollectiveLeg::kUnshard), 2 * gather);
  FsdpOptions fp8;
  fp8.mixed_precision = MixedPrecisionPolicy().with_collective_dtypes(std::nullopt, true).value();
  const Schedule f =
      build(fp8, Workload{.seq_len = 2048, .micro_batch_size = 2, .matmul_dtype = DType::kFp8});
  // The layers' weights are gathered in fp8; the embedding and the output head, which run no fp8
  // GEMM (torchtitan's float8 converter skips "output"), stay bf16.
  const std::int32_t embedding = unit_index(f, "embedding");
  const std::int32_t head = unit_index(f, "head");
  std::int64_t edge_bytes = 0;  // bf16 gather bytes of the embedding and the head
  for (const Op& op : base.programs()[0].ops) {
    if ((op.unit == embedding || op.unit == head) && op.collective >= 0 &&
        base.collectives()[static_cast<std::size_t>(op.collective)].leg ==
            CollectiveLeg::kUnshard) {
      edge_bytes += op.bytes;
    }
  }
  EXPECT_GT(edge_bytes, 0);
  EXPECT_EQ(leg_bytes(f, CollectiveLeg::kUnshard) * 2, gather + edge_bytes);
  EXPECT_EQ(leg_bytes(f, CollectiveLeg::kGradReduce), reduce);
  for (const Op& op : f.programs()[0].ops) {
    if (op.kind == OpKind::kAlloc && op.buffer_class == BufferClass::kUnshardedWeights) {
      EXPECT_EQ(op.dtype, op.unit == embedding || op.unit == head ? DType::kBf16 : DType::kFp8)
          << f.unit_names()[static_cast<std::size_t>(op.unit)];
    }
  }
}

// The eager loss's transients around the head's forward and backward, and foreach Adam's
// scratch over the whole optimizer shard.
TEST(FrameworkProfileTest, Fsdp2HoldsTheLossLogitsAndTheForeachScratch) {
  const Schedule s = build(framework(Framework::kFsdp2));
  const RankProgram& p = s.programs()[0];
  const std::int32_t head = unit_index(s, "head");
  std::vector<std::int64_t> head_forward;
  std::vector<std::int64_t> head_backward;
  std::int64_t scratch = 0;
  std::int64_t scratch_frees = 0;
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kAlloc && op.unit == head && op.microbatch == 0 &&
        op.buffer_class == BufferClass::kActivations) {
      (op.phase == Phase::kForward ? head_forward : head_backward).push_back(op.bytes);
    }
    if (op.buffer_class == BufferClass::kOptimizerState && op.phase == Phase::kStep) {
      scratch += op.kind == OpKind::kAlloc ? op.bytes : 0;
      scratch_frees += op.kind == OpKind::kFree ? 1 : 0;
    }
  }
  ASSERT_EQ(head_forward.size(), 2u);  // the kept fp32 output, the loss transients
  EXPECT_EQ(head_forward[1], 6 * kVocab * kTokens);
  EXPECT_EQ(head_backward, (std::vector<std::int64_t>{8 * kVocab * kTokens}));
  // One fp32 copy of the optimizer shard (Adam's exp_avg_sq is half the state).
  EXPECT_EQ(2 * scratch, resident_by_kind(s).at("optimizer_state"));
  EXPECT_EQ(scratch_frees, 1);
}

// PyTorch FSDP: fp32 sharded grads, allocated at the first reduction and freed after the step;
// no bf16 weight shard; the reduce-scatter input allocated on the compute stream (FSDP2 only).
TEST(FrameworkProfileTest, PyTorchGradientsAreTransientFp32AndNoWeightShardIsKept) {
  for (Framework f : {Framework::kFsdp2, Framework::kFsdp1}) {
    const Schedule s = build(framework(f));
    const auto r = resident_by_kind(s);
    EXPECT_EQ(r.count("main_grad"), 0u);
    EXPECT_EQ(r.count("model_weight"), 0u);
    std::int64_t grad_bytes = 0;
    std::int64_t step_frees = 0;
    std::int64_t compute_partials = 0;
    for (const Op& op : s.programs()[0].ops) {
      if (op.kind == OpKind::kAlloc && op.buffer_class == BufferClass::kMainGrads) {
        EXPECT_EQ(op.dtype, DType::kFp32);
        EXPECT_EQ(op.microbatch, 0);
        grad_bytes += op.bytes;
      }
      step_frees += op.kind == OpKind::kFree && op.buffer_class == BufferClass::kMainGrads &&
                            op.phase == Phase::kStep
                        ? 1
                        : 0;
      compute_partials += op.kind == OpKind::kAlloc &&
                                  op.buffer_class == BufferClass::kPartialGrads &&
                                  op.stream == StreamKind::kCompute
                              ? 1
                              : 0;
    }
    EXPECT_EQ(grad_bytes, r.at("main_weight"));  // fp32 grads of every fp32 main weight
    EXPECT_EQ(step_frees, static_cast<std::int64_t>(s.geometry().groups.size()));
    // FSDP2's reduce-scatter input (one per group) comes from the compute stream's pool.
    EXPECT_EQ(compute_partials,
              f == Framework::kFsdp2 ? static_cast<std::int64_t>(s.geometry().groups.size()) : 0);
  }
}

}  // namespace
}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// Schedules of tensor- and expert-parallel meshes (docs/design/parallelism.md): the activation
// collectives the builder issues per unit and pass, the experts' own FSDP mesh, and the verifier's
// checks of activation collectives.
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/hub_arch.h"
#include "core/model/hub_config.h"
#include "core/model/json_fields.h"
#include "core/model/model_presets.h"
#include "core/model/model_split.h"
#include "core/policy/config_options.h"
#include "core/schedule/schedule_builder.h"
#include "core/schedule/schedule_verifier.h"
#include "tests/core/model/small_arch.h"

#include <gtest/gtest.h>

namespace fsdp {
namespace {

using testing::small_preset_arch;

Model split(std::string_view preset, std::int64_t tp, std::int64_t ep, bool sp = false) {
  return hub_arch_to_model(small_preset_arch(preset), preset, std::string(preset),
                           ModelSplit::make(tp, ep, sp).value())
      .value();
}

Expected<Schedule> build(const Model& model, const char* mesh, RecomputePolicy recompute = {},
                         std::int64_t seq_len = 128) {
  ConfigOptions o;
  o.mesh = parse_device_mesh(mesh).value();
  o.microbatches = 2;
  o.recompute = recompute;
  FSDP_TRY(const FsdpConfig config, assemble_config(o));
  return build_schedule(model, config, Workload{.seq_len = seq_len, .micro_batch_size = 1});
}

struct Counted {
  std::int64_t ops = 0;
  std::int64_t forward = 0;
  std::int64_t backward = 0;
};

// The activation collectives of rank class 0 on `axis` of kind `kind`.
Counted activation_ops(const Schedule& s, std::int32_t axis, OpKind kind) {
  Counted c;
  for (const Op& op : s.programs().front().ops) {
    if (!is_collective(op.kind) ||
        s.collectives()[static_cast<std::size_t>(op.collective)].activation < 0) {
      continue;
    }
    EXPECT_EQ(op.stream, StreamKind::kCompute);
    EXPECT_EQ(op.num_operands, 0);
    if (op.axis == axis && op.kind == kind) {
      ++c.ops;
      (op.phase == Phase::kForward ? c.forward : c.backward) += 1;
    }
  }
  return c;
}

TEST(ParallelScheduleTest, TensorParallelAllReducesPerLayerAndPass) {
  const Schedule s = build(split("llama-3-8b", 2, 1), "dp=2,tp=2").value();
  EXPECT_EQ(s.programs().size(), 1u);
  // Per microbatch: embedding 1 forward; 2 layers x (2 forward + 2 backward); head 1 backward.
  const Counted c = activation_ops(s, 1, OpKind::kAllReduce);
  EXPECT_EQ(c.forward, 2 * (1 + 2 * 2));
  EXPECT_EQ(c.backward, 2 * (2 * 2 + 1));
  // Each moves the microbatch's tokens x hidden in bf16.
  for (const Op& op : s.programs().front().ops) {
    if (op.kind == OpKind::kAllReduce && op.axis == 1) {
      EXPECT_EQ(op.elements, 128 * 256);
      EXPECT_EQ(op.bytes, 128 * 256 * 2);
    }
  }
  // FSDP's own collectives stay on the dp axis.
  for (const CollectiveInfo& info : s.collectives()) {
    if (info.activation < 0) {
      EXPECT_EQ(info.axis, 0);
    }
  }
  // A full recompute repeats the forward's collectives in the backward phase.
  const Schedule r = build(split("llama-3-8b", 2, 1), "dp=2,tp=2", RecomputePolicy::full()).value();
  const Counted rc = activation_ops(r, 1, OpKind::kAllReduce);
  EXPECT_GT(rc.backward, c.backward);
  EXPECT_EQ(rc.forward, c.forward);
}

TEST(ParallelScheduleTest, SequenceParallelGathersAndScatters) {
  const Schedule s = build(split("llama-3-8b", 2, 1, /*sp=*/true), "dp=2,tp=2").value();
  EXPECT_EQ(activation_ops(s, 1, OpKind::kAllReduce).ops, 0);
  const Counted ag = activation_ops(s, 1, OpKind::kAllGather);
  const Counted rs = activation_ops(s, 1, OpKind::kReduceScatter);
  // Per microbatch and layer: AG 2 forward + 4 backward, RS 2 + 2; head AG 2 (its input and the
  // cross entropy's stats) + 1, RS 0 + 1; embedding RS 1 forward, AG 1 backward.
  EXPECT_EQ(ag.forward, 2 * (2 * 2 + 2));
  EXPECT_EQ(ag.backward, 2 * (2 * 4 + 1 + 1));
  EXPECT_EQ(rs.forward, 2 * (2 * 2 + 1));
  EXPECT_EQ(rs.backward, 2 * (2 * 2 + 1));
  // Each member contributes its 1/tp of the tokens; the cross entropy's stats are 3 values for
  // every token.
  for (const Op& op : s.programs().front().ops) {
    if (op.kind == OpKind::kAllGather && op.axis == 1) {
      const bool stats =
          s.activation_of(s.collectives()[static_cast<std::size_t>(op.collective)])->site ==
          "head.loss_stats";
      EXPECT_EQ(op.elements, stats ? 128 * 3 : 128 / 2 * 256);
    }
  }
  // Tokens that tp does not divide cannot be sequence-sharded.
  EXPECT_EQ(build(split("llama-3-8b", 2, 1, true), "dp=2,tp=2", {}, 127).error().message(),
            "sequence parallelism over 2 ranks needs the microbatch's tokens divisible by 2, "
            "got 127 (unit 'embedding')");
}

TEST(ParallelScheduleTest, AMeshAndAModelThatDisagreeAreRefused) {
  const Model whole = hub_arch_to_model(small_preset_arch("llama-3-8b"), "s", "small").value();
  EXPECT_EQ(build(whole, "dp=2,tp=2").error().message(),
            "mesh dp=2,tp=2 has a 'tp' axis of 2 ranks, but model 'small' issues no tp "
            "collective: expected the model split for it (a preset or hub config, which the "
            "mesh's tp size divides)");
  const auto no_axis = build(split("llama-3-8b", 2, 1), "dp=4");
  ASSERT_FALSE(no_axis.has_value());
  EXPECT_NE(no_axis.error().message().find("over a 'tp' axis, but mesh dp=4 has none"),
            std::string::npos)
      << no_axis.error().message();
}

TEST(ParallelScheduleTest, ExpertsShardOverTheExpertDataParallelAxes) {
  const Schedule s = build(split("mixtral-8x7b", 1, 2), "dp=2,ep=2").value();
  bool saw_expert = false;
  for (const GroupGeometry& g : s.geometry().groups) {
    if (g.expert) {
      saw_expert = true;
      EXPECT_EQ(g.placements.dp_axes(), (std::vector<std::int64_t>{0}));
      EXPECT_EQ(g.placements.dp_size(), 2);
    } else {
      EXPECT_EQ(g.placements.dp_axes(), (std::vector<std::int64_t>{0, 1}));
    }
  }
  EXPECT_TRUE(saw_expert);
  // An expert group's collectives run on the dp axis only; a dense group's reduce-scatters on
  // both (inner first).
  for (const CollectiveInfo& info : s.collectives()) {
    if (info.geometry_group >= 0 &&
        s.geometry().groups[static_cast<std::size_t>(info.geometry_group)].expert) {
      EXPECT_EQ(info.axis, 0);
    }
  }
  // Dispatch and combine, forward and backward, per MoE layer and microbatch.
  const Counted a2a = activation_ops(s, 1, OpKind::kAllToAll);
  EXPECT_EQ(a2a.forward, 2 * 2 * 2);
  EXPECT_EQ(a2a.backward, 2 * 2 * 2);
  for (const Op& op : s.programs().front().ops) {
    if (op.kind == OpKind::kAllToAll) {
      EXPECT_EQ(op.elements, 128 * 2 * 256);  // tokens x top_k x hidden
    }
  }
}

TEST(ParallelScheduleTest, VerifierChecksActivationCollectives) {
  const Schedule s = build(split("llama-3-8b", 2, 1), "dp=2,tp=2").value();
  std::size_t k = 0;
  while (s.collectives()[k].activation < 0) {
    ++k;
  }
  ScheduleParts moved = s.parts();
  for (Op& op : moved.programs.front().ops) {
    if (op.collective == static_cast<std::int32_t>(k)) {
      op.stream = StreamKind::kAllGather;
    }
  }
  const Status off_stream = verify_schedule(moved);
  ASSERT_FALSE(off_stream.ok());
  EXPECT_NE(off_stream.error().message().find(
                "is an activation collective with 0 operands on the all-gather stream; "
                "expected none, on the compute stream"),
            std::string::npos)
      << off_stream.error().message();
  ScheduleParts wrong_axis = s.parts();
  wrong_axis.collectives[k].axis = 0;
  const Status axis = verify_schedule(wrong_axis);
  ASSERT_FALSE(axis.ok());
  EXPECT_NE(axis.error().message().find("runs on mesh axis 0; its entry embedding.out runs over "
                                        "the 'tp' axis"),
            std::string::npos)
      << axis.error().message();
  ScheduleParts no_entry = s.parts();
  no_entry.collectives[k].activation = 99;
  EXPECT_FALSE(verify_schedule(no_entry).ok());
}

}  // namespace
}  // namespace fsdp

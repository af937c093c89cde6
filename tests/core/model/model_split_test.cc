// SPDX-License-Identifier: Apache-2.0
// Rank-local models of tensor- and expert-parallel splits (core/model/model_split.h,
// hub_arch_to_model): divided tensors, replicated norms and routers, activation collectives per
// site, and one-line errors for splits the architecture does not allow
// (docs/design/parallelism.md).
#include "core/model/model_split.h"

#include <cstdint>
#include <string>

#include "core/model/hub_arch.h"
#include "core/model/hub_config.h"
#include "core/model/json_fields.h"
#include "core/model/model_json.h"
#include "core/model/model_presets.h"

#include <gtest/gtest.h>

namespace fsdp {
namespace {

HubArch arch_of(std::string_view preset) {
  const ModelPreset* p = find_model_preset(preset);
  EXPECT_NE(p, nullptr);
  return read_hub_arch(parse_json_text(p->config_json, preset).value(), preset).value();
}

Model split_model(std::string_view preset, std::int64_t tp, std::int64_t ep, bool sp = false,
                  double capacity = 1.0) {
  auto split = ModelSplit::make(tp, ep, sp, capacity);
  EXPECT_TRUE(split.has_value()) << split.error().message();
  auto m = hub_arch_to_model(arch_of(preset), preset, std::string(preset), *split);
  EXPECT_TRUE(m.has_value()) << m.error().message();
  return std::move(m).value();
}

const Param& param(const Unit& u, std::string_view suffix) {
  for (const Param& p : u.params()) {
    if (p.name().ends_with(suffix)) {
      return p;
    }
  }
  ADD_FAILURE() << "no parameter ending in " << suffix << " in unit " << u.name();
  return u.params().front();
}

TEST(ModelSplitTest, MakeChecksEachField) {
  EXPECT_EQ(ModelSplit::make(0, 1, false).error().message(),
            "tensor-parallel size is 0; expected >= 1");
  EXPECT_EQ(ModelSplit::make(1, 0, false).error().message(),
            "expert-parallel size is 0; expected >= 1");
  EXPECT_EQ(ModelSplit::make(1, 8, false, 0.5).error().message(),
            "capacity factor is 0.5; expected a value in [1, 64]");
  const auto both = ModelSplit::make(2, 2, false);
  EXPECT_EQ(both.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_FALSE(ModelSplit::make(2, 1, false, 1.0 / 0.0).has_value());
  EXPECT_TRUE(ModelSplit().is_whole());
  // Sequence parallelism means nothing without a tp group.
  EXPECT_FALSE(ModelSplit::make(1, 1, true)->sequence_parallel());
  EXPECT_EQ(to_string(*ModelSplit::make(8, 1, true)), "tp=8 sequence-parallel");
}

TEST(ModelSplitTest, TensorParallelDividesColumnAndRowParallelTensors) {
  const Model whole = load_model_preset("llama-3-70b").value();
  const Model local = split_model("llama-3-70b", 8, 1);
  ASSERT_EQ(local.num_units(), whole.num_units());
  const Unit& w = whole.units()[1];
  const Unit& l = local.units()[1];
  // Column-parallel: output rows divided; row-parallel: input columns divided; norms whole.
  EXPECT_EQ(param(l, "q_proj.weight").shape().dims()[0] * 8,
            param(w, "q_proj.weight").shape().dims()[0]);
  EXPECT_EQ(param(l, "k_proj.weight").shape().dims()[0], 128);  // 8 kv heads x 128 / 8
  EXPECT_EQ(param(l, "o_proj.weight").shape().dims()[1] * 8,
            param(w, "o_proj.weight").shape().dims()[1]);
  EXPECT_EQ(param(l, "gate_proj.weight").shape().dims()[0], 28672 / 8);
  EXPECT_EQ(param(l, "down_proj.weight").shape().dims()[1], 28672 / 8);
  EXPECT_EQ(param(l, "input_layernorm.weight").numel(), 8192);
  // Every matmul of a Llama layer is tensor-parallel: FLOPs and attention divide exactly.
  EXPECT_EQ(l.flops().matmul * 8, w.flops().matmul);
  EXPECT_EQ(l.flops().attention_per_seq * 8, w.flops().attention_per_seq);
  EXPECT_EQ(l.work().attention.heads, 8);
  // The vocabulary-parallel embedding and head.
  EXPECT_EQ(param(local.units().front(), "embed_tokens.weight").shape().dims()[0], 128256 / 8);
  EXPECT_EQ(local.units().back().activations().loss_logits, 128256 / 8);
  // Parameters: every layer tensor but the two norms is divided.
  const std::int64_t norms = 2 * 8192;
  EXPECT_EQ((l.num_parameters() - norms) * 8, w.num_parameters() - norms);
}

TEST(ModelSplitTest, TensorParallelCollectivesPerSite) {
  const Model local = split_model("llama-3-70b", 8, 1);
  const std::vector<ActivationCollective>& c = local.units()[1].work().collectives;
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].site, "attention.out");
  EXPECT_EQ(c[0].pass, CollectivePass::kForward);
  EXPECT_EQ(c[0].kind, ActivationCollectiveKind::kAllReduce);
  EXPECT_EQ(c[0].elements_per_token, 8192);
  EXPECT_EQ(c[1].site, "mlp.out");
  EXPECT_EQ(c[2].site, "mlp.in_grad");  // the backward runs the MLP first
  EXPECT_EQ(c[2].pass, CollectivePass::kBackward);
  EXPECT_EQ(c[3].site, "attention.in_grad");
  EXPECT_EQ(local.units().front().work().collectives.size(), 1u);  // embedding.out
  // The head: the vocabulary-parallel cross entropy's all-gather of 3 values per token
  // (forward), then head.in_grad (backward).
  const std::vector<ActivationCollective>& head = local.units().back().work().collectives;
  ASSERT_EQ(head.size(), 2u);
  EXPECT_EQ(head[0].site, "head.loss_stats");
  EXPECT_EQ(head[0].kind, ActivationCollectiveKind::kAllGather);
  EXPECT_EQ(head[0].pass, CollectivePass::kForward);
  EXPECT_EQ(head[0].elements_per_token, 3);
  EXPECT_EQ(head[0].token_divisor, 1);
  EXPECT_EQ(head[1].site, "head.in_grad");
  // Layer activations without sequence parallelism: the hidden-sized tensors stay whole.
  const Model whole = load_model_preset("llama-3-70b").value();
  EXPECT_GT(local.units()[1].activations().stored * 8, whole.units()[1].activations().stored);
}

TEST(ModelSplitTest, SequenceParallelShardsTheReplicatedTensors) {
  const Model whole = load_model_preset("llama-3-70b").value();
  const Model local = split_model("llama-3-70b", 8, 1, /*sp=*/true);
  const Unit& l = local.units()[1];
  // Megatron's activation memory with sequence parallelism: everything divided by tp (the
  // attention's fp32 log-sum-exp too: it is per head).
  EXPECT_EQ(l.activations().stored * 8, whole.units()[1].activations().stored);
  const std::vector<ActivationCollective>& c = l.work().collectives;
  ASSERT_EQ(c.size(), 10u);
  int gathers = 0;
  for (const ActivationCollective& x : c) {
    EXPECT_EQ(x.token_divisor, 8) << x.site;
    gathers += x.kind == ActivationCollectiveKind::kAllGather ? 1 : 0;
  }
  EXPECT_EQ(gathers, 6);  // 2 forward, 2 output-gradient, 2 input re-gathers
}

TEST(ModelSplitTest, ExpertParallelKeepsTheRouterAndDividesTheExperts) {
  const Model whole = load_model_preset("mixtral-8x7b").value();
  const Model local = split_model("mixtral-8x7b", 1, 8, false, 1.25);
  const Unit& l = local.units()[1];
  EXPECT_EQ(param(l, "gate.weight").shape().dims()[0], 8);  // the router scores every expert
  int experts = 0;
  for (const Param& p : l.params()) {
    experts += p.name().ends_with(".w1.weight") ? 1 : 0;
  }
  EXPECT_EQ(experts, 1);
  const std::vector<ActivationCollective>& c = l.work().collectives;
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].site, "moe.dispatch");
  EXPECT_EQ(c[0].kind, ActivationCollectiveKind::kAllToAll);
  EXPECT_EQ(c[0].axis, ParallelAxis::kExpert);
  // top-2 copies of 4096 hidden elements, padded to 1.25 of the balanced share.
  EXPECT_EQ(c[0].elements_per_token, 2 * 4096 * 1250);
  EXPECT_EQ(c[0].token_divisor, 1000);
  EXPECT_EQ(c[3].site, "moe.dispatch_grad");
  // The rank's expert computes for the whole ep group's tokens routed to it: as many FLOPs
  // per token of its own as one rank of the unsplit model at capacity 1.25.
  const Model at_capacity = split_model("mixtral-8x7b", 1, 1, false, 1.25);
  EXPECT_EQ(l.flops().matmul, at_capacity.units()[1].flops().matmul);
  EXPECT_GT(l.flops().matmul, whole.units()[1].flops().matmul);
}

TEST(ModelSplitTest, ImpossibleSplitsAreOneLineNamingTheField) {
  const auto fails = [](std::string_view preset, std::int64_t tp, std::int64_t ep) {
    auto m =
        hub_arch_to_model(arch_of(preset), preset, "m", ModelSplit::make(tp, ep, false).value());
    EXPECT_FALSE(m.has_value());
    return m ? std::string() : m.error().message();
  };
  EXPECT_EQ(fails("llama-3-70b", 16, 1),
            "llama-3-70b: tp=16 must divide num_key_value_heads = 8: expected a tp size that "
            "divides it");
  EXPECT_EQ(fails("llama-3-8b", 3, 1),
            "llama-3-8b: tp=3 must divide num_attention_heads = 32: expected a tp size that "
            "divides it");
  EXPECT_EQ(fails("mixtral-8x7b", 1, 3),
            "mixtral-8x7b: ep=3 must divide num_local_experts = 8: expected an ep size that "
            "divides it");
  EXPECT_EQ(fails("llama-3-8b", 1, 2),
            "llama-3-8b: ep=2 needs a mixture-of-experts model: expected experts to divide over "
            "the ep axis, got a model without experts");
}

TEST(ModelSplitTest, SplitModelsRoundTripThroughModelFiles) {
  const Model local = split_model("llama-3-8b", 2, 1, /*sp=*/true);
  const Model back = parse_model_json(model_to_json_text(local), "round-trip").value();
  EXPECT_EQ(back, local);
}

}  // namespace
}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// UnitWork: the kernels the importer derives per unit (docs/models.md, "Kernels per unit"), their
// validation and their model-file round trip.
#include "core/model/unit_work.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "core/model/model_json.h"
#include "core/model/model_presets.h"

namespace fsdp {
namespace {

TEST(UnitWorkTest, ImporterListsEveryGemmOfALlamaLayer) {
  const Model m = load_model_preset("llama-3-8b").value();
  const Unit& layer = m.units()[static_cast<std::size_t>(m.find_unit("layers.0"))];
  const UnitWork& w = layer.work();
  // q, k and v, o, gate and up, down: y = x W^T with W [n, k].
  // q, k and v read the attention norm's output (input group 1), gate and up the MLP norm's (2).
  ASSERT_EQ(w.gemms.size(), 5u);
  EXPECT_EQ(w.gemms[0], (GemmShape{.n = 4096, .k = 4096, .input_group = 1}));
  EXPECT_EQ(w.gemms[1], (GemmShape{.n = 1024, .k = 4096, .count = 2, .input_group = 1}));
  EXPECT_EQ(w.gemms[2], (GemmShape{.n = 4096, .k = 4096}));
  EXPECT_EQ(w.gemms[3], (GemmShape{.n = 14336, .k = 4096, .count = 2, .input_group = 2}));
  EXPECT_EQ(w.gemms[4], (GemmShape{.n = 4096, .k = 14336}));
  // The GEMMs are exactly the matmul FLOPs the unit reports.
  std::int64_t flops = 0;
  for (const GemmShape& g : w.gemms) {
    flops += 2 * g.n * g.k * g.count;
  }
  EXPECT_EQ(flops, layer.flops().matmul);
  EXPECT_EQ(w.attention, (AttentionShape{.heads = 32, .qk_head_dim = 128, .v_head_dim = 128}));
  // Hand count (bf16, w = 2): two RMSNorms 2 * 4096 * 36, two residual adds 2 * 4096 * 6, RoPE on
  // q and k 5120 * 20, repeat_kv's copies 8192 * 4, the attention output's copy 4096 * 4,
  // SiLU-and-multiply 14336 * 10.
  EXPECT_EQ(w.elementwise_bytes,
            2 * 4096 * 36 + 2 * 4096 * 6 + 5120 * 20 + 8192 * 4 + 4096 * 4 + 14336 * 10);
  // Fused: norms 4 B, residuals 6, RoPE 4, the copies as before, SiLU-and-multiply 6.
  EXPECT_EQ(w.fused_elementwise_bytes,
            2 * 4096 * 4 + 2 * 4096 * 6 + 5120 * 4 + 8192 * 4 + 4096 * 4 + 14336 * 6);
  // Megatron-Core's TE layer: no repeat_kv copy, no transpose of the attention output, but q
  // copied out of linear_qkv's output (4096 x 4).
  EXPECT_EQ(w.te_elementwise_bytes, 2 * 4096 * 4 + 2 * 4096 * 6 + 5120 * 4 + 4096 * 4 + 14336 * 6);
}

TEST(UnitWorkTest, TransformerEngineCopiesQOnlyUnderGroupedQueryAttention) {
  // GPT-3 175B: 96 heads of 128, one query head per group: Megatron-Core's q reshape is a view,
  // so TE saves the attention output's transpose (12,288 x 2w) and pays nothing back.
  const Model m = load_model_preset("gpt3-175b").value();
  const UnitWork& w = m.units()[static_cast<std::size_t>(m.find_unit("layers.0"))].work();
  EXPECT_EQ(w.te_elementwise_bytes, w.fused_elementwise_bytes - 12288 * 4);
}

TEST(UnitWorkTest, HeadCountsTheLogitsGemmAndTheLoss) {
  const Model m = load_model_preset("llama-3-8b").value();
  const UnitWork& w = m.units().back().work();
  ASSERT_EQ(w.gemms.size(), 1u);
  EXPECT_EQ(w.gemms[0], (GemmShape{.n = 128256, .k = 4096, .output_head = true}));
  EXPECT_EQ(w.attention.heads, 0);
  // Final RMSNorm, then the fp32 upcast and log-softmax of every logit (8 + 2 B).
  EXPECT_EQ(w.elementwise_bytes, 4096 * 36 + 128256 * 10);
  // torchtitan compiles the blocks only: the head runs eager under --compile; Transformer Engine
  // fuses the norm (2w) and Megatron's cross entropy reads the logits once (4 + 2 B).
  EXPECT_EQ(w.fused_elementwise_bytes, w.elementwise_bytes);
  EXPECT_EQ(w.te_elementwise_bytes, 4096 * 4 + 128256 * 6);
  const UnitWork& embedding = m.units().front().work();
  EXPECT_EQ(embedding.fused_elementwise_bytes, embedding.elementwise_bytes);
}

TEST(UnitWorkTest, RoutedExpertsSeeTheirShareOfTheTokens) {
  const Model m = load_model_preset("mixtral-8x7b").value();
  const UnitWork& w = m.units()[static_cast<std::size_t>(m.find_unit("layers.0"))].work();
  bool found = false;
  for (const GemmShape& g : w.gemms) {
    if (g.rows_den == 8) {
      EXPECT_EQ(g.rows_num, 2);  // top-2 of 8 experts
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(UnitWorkTest, ModelFilesKeepTheWork) {
  const Model m = load_model_preset("llama-3-8b").value();
  const Model back = parse_model_json(model_to_json_text(m), "round-trip").value();
  EXPECT_EQ(back, m);
  EXPECT_EQ(back.units()[1].work(), m.units()[1].work());
}

TEST(UnitWorkTest, BadWorkIsOneLineNamingTheField) {
  UnitWork w;
  w.gemms.push_back({.n = 0, .k = 4});
  Status s = validate_unit_work(w, "unit 'x'");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "unit 'x': work gemms[0].n: expected a positive integer, got 0");
  w = UnitWork{};
  w.attention.heads = 2;
  EXPECT_FALSE(validate_unit_work(w, "u").ok());
  w = UnitWork{};
  w.te_elementwise_bytes = -1;
  s = validate_unit_work(w, "u");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(),
            "u: work te_elementwise_bytes: expected a non-negative integer, got -1");
  w = UnitWork{};
  w.elementwise_bytes = 4;
  w.fused_elementwise_bytes = 5;
  s = validate_unit_work(w, "u");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("fused_elementwise_bytes"), std::string::npos);
  EXPECT_TRUE(validate_unit_work(UnitWork{}, "u").ok());
}

TEST(UnitWorkTest, AnInputGroupReadsOneTensor) {
  UnitWork w;
  w.gemms.push_back({.n = 8, .k = 4, .input_group = 3});
  w.gemms.push_back({.n = 2, .k = 4, .count = 2, .input_group = 3});
  EXPECT_TRUE(validate_unit_work(w, "u").ok());
  w.gemms.push_back({.n = 8, .k = 6, .input_group = 3});
  Status s = validate_unit_work(w, "unit 'x'");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(),
            "unit 'x': work gemms[2].k: expected 4 (the k of gemms[0], input_group 3), got 6");
  w.gemms[2] = {.n = 8, .k = 4, .rows_num = 1, .rows_den = 2, .input_group = 3};
  s = validate_unit_work(w, "unit 'x'");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(),
            "unit 'x': work gemms[2] rows: expected 1/1 (the rows of gemms[0], input_group 3), "
            "got 1/2");
  w.gemms[2] = {.n = 8, .k = 4, .input_group = -1};
  s = validate_unit_work(w, "u");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(),
            "u: work gemms[2].input_group: expected a non-negative integer, got -1");
}

TEST(UnitWorkTest, ModelFilesKeepInputGroupsAndTheOutputHead) {
  const std::string text =
      R"({"format": "fsdpsim-model", "version": 1, "name": "m", "units": [{"name": "u", "work": {"gemms": [{"n": 4, "k": 2, "input_group": 1}, {"n": 8, "k": 2, "output_head": true}], "elementwise_bytes": 10, "fused_elementwise_bytes": 6}}]})";
  const Model m = parse_model_json(text, "m.json").value();
  const UnitWork& w = m.units()[0].work();
  EXPECT_EQ(w.gemms[0], (GemmShape{.n = 4, .k = 2, .input_group = 1}));
  EXPECT_EQ(w.gemms[1], (GemmShape{.n = 8, .k = 2, .output_head = true}));
  EXPECT_EQ(w.te_elementwise_bytes, 6);  // a file without it: the fused bytes
  EXPECT_EQ(parse_model_json(model_to_json_text(m), "again").value(), m);
  const auto bad = parse_model_json(
      R"({"format": "fsdpsim-model", "version": 1, "name": "m", "units": [{"name": "u", "work": {"gemms": [{"n": 4, "k": 2, "output_head": 1}]}}]})",
      "m.json");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("output_head"), std::string::npos);
}

TEST(UnitWorkTest, ModelFileWithBadWorkIsRefused) {
  const std::string text =
      R"({"format": "fsdpsim-model", "version": 1, "name": "m", "units": [{"name": "u", "work": {"gemms": [{"n": 4, "k": -1}]}}]})";
  const auto m = parse_model_json(text, "m.json");
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().message(),
            "m.json: field 'units[0].work.gemms[0].k': expected a positive integer, got -1");
}

}  // namespace
}  // namespace fsdp

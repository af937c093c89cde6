// SPDX-License-Identifier: Apache-2.0
// HubArch: the fields a real run needs (RoPE base, norm epsilon, scaling, sliding window), the
// importer built on it, and apply_hub_overrides (shrinking a published config for a test).
#include "core/model/hub_arch.h"

#include <string>

#include "core/model/hub_config.h"
#include "core/model/model_presets.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fsdp {
namespace {

using nlohmann::json;

json preset_doc(std::string_view name) {
  const ModelPreset* p = find_model_preset(name);
  EXPECT_NE(p, nullptr) << name;
  return json::parse(p->config_json);
}

HubArch arch_of(const json& doc) {
  auto a = read_hub_arch(doc, "test.json");
  EXPECT_TRUE(a.has_value()) << (a ? "" : a.error().message());
  return *a;
}

const Param& param(const Model& m, std::string_view name) {
  for (const Unit& u : m.units()) {
    for (const Param& p : u.params()) {
      if (p.name() == name) {
        return p;
      }
    }
  }
  ADD_FAILURE() << "no tensor " << name;
  return m.units()[0].params()[0];
}

TEST(HubArchTest, ReadsWhatARealRunNeeds) {
  const HubArch a = arch_of(preset_doc("llama-3-8b"));
  EXPECT_EQ(a.model_type, "llama");
  EXPECT_EQ(a.heads, 32);
  EXPECT_EQ(a.kv_heads, 8);
  EXPECT_EQ(a.qk_head_dim, 128);
  EXPECT_FALSE(a.explicit_head_dim);
  EXPECT_DOUBLE_EQ(a.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(a.rms_norm_eps, 1e-5);
  EXPECT_TRUE(a.rope_scaling.empty());
  EXPECT_EQ(a.sliding_window, 0);
  const HubArch q = arch_of(preset_doc("qwen2.5-7b"));
  EXPECT_TRUE(q.qkv_bias);
  EXPECT_FALSE(q.o_bias);
  EXPECT_DOUBLE_EQ(q.rms_norm_eps, 1e-6);
}

TEST(HubArchTest, DefaultsAndScalingAndWindow) {
  json doc = preset_doc("llama-3-8b");
  doc.erase("rope_theta");
  doc.erase("rms_norm_eps");
  doc["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  doc["sliding_window"] = 4096;
  const HubArch a = arch_of(doc);
  EXPECT_DOUBLE_EQ(a.rope_theta, 10000.0);  // transformers' LlamaConfig defaults
  EXPECT_DOUBLE_EQ(a.rms_norm_eps, 1e-6);
  EXPECT_EQ(a.rope_scaling, "llama3");
  EXPECT_EQ(a.sliding_window, 4096);
}

TEST(HubArchTest, BadRuntimeFieldsAreOneLineErrors) {
  for (const auto& [key, value] : {std::pair<std::string, json>{"rope_theta", -1.0},
                                   {"rope_theta", "big"},
                                   {"rms_norm_eps", 0},
                                   {"rope_scaling", 3}}) {
    json doc = preset_doc("llama-3-8b");
    doc[key] = value;
    const auto a = read_hub_arch(doc, "cfg.json");
    ASSERT_FALSE(a.has_value()) << key;
    EXPECT_NE(a.error().message().find("cfg.json: field '" + key + "'"), std::string::npos)
        << a.error().message();
    EXPECT_EQ(a.error().message().find('\n'), std::string::npos);
  }
}

TEST(HubArchTest, ArchToModelIsTheImporter) {
  for (const char* name : {"llama-3-8b", "qwen2.5-7b", "mixtral-8x7b", "gpt3-175b"}) {
    const json doc = preset_doc(name);
    const auto direct = hub_config_to_model(doc, "x.json", name);
    const auto via = hub_arch_to_model(arch_of(doc), "x.json", name);
    ASSERT_TRUE(direct.has_value() && via.has_value()) << name;
    EXPECT_EQ(*direct, *via) << name;
  }
}

TEST(HubArchTest, OverridesShrinkALlama) {
  HubOverrides o;
  o.layers = 2;
  o.hidden = 256;
  o.heads = 4;
  o.kv_heads = 2;
  o.ffn = 512;
  o.vocab = 1000;
  o.dtype = DType::kFp32;
  auto a = apply_hub_overrides(arch_of(preset_doc("llama-3-8b")), o);
  ASSERT_TRUE(a.has_value()) << a.error().message();
  EXPECT_EQ(a->qk_head_dim, 64);
  const auto m = hub_arch_to_model(*a, "x", "tiny");
  ASSERT_TRUE(m.has_value()) << m.error().message();
  EXPECT_EQ(m->num_units(), 4);
  EXPECT_EQ(param(*m, "model.layers.1.self_attn.q_proj.weight").shape().dims()[0], 256);
  EXPECT_EQ(param(*m, "model.layers.1.self_attn.k_proj.weight").shape().dims()[0], 128);
  EXPECT_EQ(param(*m, "model.layers.0.mlp.down_proj.weight").shape().dims()[1], 512);
  EXPECT_EQ(param(*m, "lm_head.weight").shape().dims()[0], 1000);
  EXPECT_EQ(param(*m, "lm_head.weight").dtype(), DType::kFp32);
  EXPECT_DOUBLE_EQ(a->rope_theta, 500000.0);  // what the sizes do not touch stays
}

TEST(HubArchTest, OverridesKeepGroupingWhereItStillDivides) {
  HubOverrides o;
  o.hidden = 512;
  o.heads = 16;  // the config's 8 kv heads still divide 16
  auto a = apply_hub_overrides(arch_of(preset_doc("llama-3-8b")), o);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->kv_heads, 8);
  o.heads = 4;  // 8 kv heads do not divide 4: multi-head
  a = apply_hub_overrides(arch_of(preset_doc("llama-3-8b")), o);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->kv_heads, 4);
}

TEST(HubArchTest, BadOverridesNameTheOption) {
  const HubArch base = arch_of(preset_doc("llama-3-8b"));
  const auto expect_error = [&](HubOverrides o, std::string_view needle) {
    const auto a = apply_hub_overrides(base, o);
    ASSERT_FALSE(a.has_value()) << needle;
    EXPECT_NE(a.error().message().find(needle), std::string::npos) << a.error().message();
  };
  HubOverrides o;
  o.layers = 0;
  expect_error(o, "--layers: expected a positive integer, got 0");
  o = {};
  o.heads = 3;  // 4096 % 3 != 0
  expect_error(o, "--heads: expected heads that divide the hidden size 4096, got 3");
  o = {};
  o.hidden = 48;  // the config's 32 heads do not divide it
  expect_error(o, "--hidden: expected a multiple of the config's 32 heads, got 48");
  o = {};
  o.kv_heads = 5;
  expect_error(o, "--kv-heads: expected a divisor of the number of heads 32, got 5");
  o = {};
  o.layers = kMaxHubLayers + 1;
  expect_error(o, "--layers: expected at most");
  HubOverrides mla;
  mla.kv_heads = 2;
  const auto d = apply_hub_overrides(arch_of(preset_doc("deepseek-v3")), mla);
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.error().message().find("--kv-heads"), std::string::npos);
}

}  // namespace
}  // namespace fsdp

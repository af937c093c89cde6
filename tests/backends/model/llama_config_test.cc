// SPDX-License-Identifier: Apache-2.0
// The Llama-family decoder (DecoderFamily::kLlama): its Model is the importer's for the same hub
// config (tensor for tensor, FLOPs and activation bytes), and the architectures it cannot train
// are one-line errors that name the config field.
#include <string>

#include "backends/model/decoder.h"
#include "core/model/hub_config.h"
#include "core/model/model_presets.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fsdp::backend {
namespace {

using nlohmann::json;

json preset_doc(std::string_view name) {
  return json::parse(find_model_preset(name)->config_json);
}

// The config shrunk through the overrides, as `fsdpsim train --model NAME --layers ...` does.
DecoderConfig shrunk(std::string_view preset, const HubOverrides& sizes) {
  const HubArch arch = read_hub_arch(preset_doc(preset), "preset").value();
  HubOverrides o = sizes;
  o.dtype = DType::kFp32;
  const HubArch small = apply_hub_overrides(arch, o).value();
  auto c = decoder_config_of_arch(small, std::string(preset), 16, 2, 1);
  EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().message());
  return *c;
}

TEST(LlamaConfigTest, ModelIsTheImportersForTheSameConfig) {
  HubOverrides o;
  o.layers = 2;
  o.hidden = 64;
  o.heads = 4;
  o.kv_heads = 2;
  o.ffn = 96;
  o.vocab = 50;
  for (const char* preset : {"llama-3-8b", "qwen2.5-7b"}) {
    SCOPED_TRACE(preset);
    // The same network written as a config file by hand: what `fsdpsim model --config` imports.
    json doc = preset_doc(preset);
    doc["num_hidden_layers"] = 2;
    doc["hidden_size"] = 64;
    doc["num_attention_heads"] = 4;
    doc["num_key_value_heads"] = 2;
    doc["intermediate_size"] = 96;
    doc["vocab_size"] = 50;
    doc["torch_dtype"] = "float32";
    const Model imported = hub_config_to_model(doc, "edited.json", preset).value();
    const DecoderConfig config = shrunk(preset, o);
    const Model trained = decoder_model(config).value();
    EXPECT_EQ(trained, imported);
    EXPECT_EQ(trained.units()[1].params()[0].name(), "model.layers.0.self_attn.q_proj.weight");
    EXPECT_EQ(config.head_dim, 16);
    EXPECT_EQ(config.qkv_bias, std::string(preset) == "qwen2.5-7b");
    EXPECT_DOUBLE_EQ(config.rope_theta, std::string(preset) == "qwen2.5-7b" ? 1e6 : 5e5);
    // initial_parameters follows the Model tensor for tensor.
    const ParamValues init = initial_parameters(config);
    ASSERT_EQ(init.size(), static_cast<std::size_t>(trained.num_units()));
    for (std::size_t u = 0; u < init.size(); ++u) {
      ASSERT_EQ(init[u].size(), trained.units()[u].params().size());
      for (std::size_t p = 0; p < init[u].size(); ++p) {
        EXPECT_EQ(static_cast<std::int64_t>(init[u][p].size()),
                  trained.units()[u].params()[p].numel());
      }
    }
  }
}

TEST(LlamaConfigTest, UntrainableArchitecturesNameTheField) {
  const auto refused = [](json doc, std::string_view needle, std::int64_t seq_len = 16) {
    const HubArch arch = read_hub_arch(doc, "cfg.json").value();
    const auto c = decoder_config_of_arch(arch, "m", seq_len, 1, 1);
    ASSERT_FALSE(c.has_value()) << needle;
    EXPECT_NE(c.error().message().find(needle), std::string::npos) << c.error().message();
    EXPECT_EQ(c.error().message().find('\n'), std::string::npos);
  };
  refused(preset_doc("deepseek-v3"),
          "field 'model_type': expected llama, mistral, qwen2 or mixtral");
  json tied = preset_doc("llama-3-8b");
  tied["tie_word_embeddings"] = true;
  refused(tied, "field 'tie_word_embeddings'");
  json scaled = preset_doc("llama-3-8b");
  scaled["rope_scaling"] = {{"rope_type", "llama3"}};
  refused(scaled,
          "field 'rope_scaling': expected null (plain RoPE) for real training, got 'llama3'");
  json windowed = preset_doc("llama-3-8b");
  windowed["model_type"] = "mistral";
  windowed["sliding_window"] = 8;
  refused(windowed, "field 'sliding_window': expected at least the sequence length 16");
  json odd = preset_doc("llama-3-8b");
  odd["head_dim"] = 5;
  refused(odd, "field 'head_dim': expected an even head size");
}

TEST(LlamaConfigTest, MixtralTrainsWithItsRouter) {
  HubOverrides o;
  o.layers = 1;
  o.hidden = 16;
  o.heads = 4;
  o.ffn = 8;
  o.vocab = 32;
  const DecoderConfig c = shrunk("mixtral-8x7b", o);
  EXPECT_EQ(c.experts, 8);
  EXPECT_EQ(c.top_k, 2);
  EXPECT_EQ(c.ffn, 8);
  ASSERT_TRUE(validate(c).ok()) << validate(c).error().message();
  // The experts and the router are the importer's tensors.
  const Model m = decoder_model(c).value();
  EXPECT_EQ(m.units()[1].params().size(), 4U + 1U + 3U * 8U + 2U);
  EXPECT_EQ(expert_capacity(c), 2 * c.micro_batch_size * c.seq_len / 8);
}

TEST(LlamaConfigTest, ValidateChecksTheAttentionFields) {
  HubOverrides o;
  o.layers = 1;
  o.hidden = 32;
  o.heads = 2;
  DecoderConfig c = shrunk("llama-3-8b", o);
  ASSERT_TRUE(validate(c).ok());
  DecoderConfig bad = c;
  bad.kv_heads = 3;
  EXPECT_NE(validate(bad).error().message().find("kv_heads must divide heads 2, got 3"),
            std::string::npos);
  bad = c;
  bad.head_dim = 7;
  EXPECT_NE(validate(bad).error().message().find("head_dim must be even"), std::string::npos);
  bad = c;
  bad.model_type = "gpt2";
  EXPECT_NE(
      validate(bad).error().message().find("model_type must be llama, mistral, qwen2 or mixtral"),
      std::string::npos);
}

}  // namespace
}  // namespace fsdp::backend

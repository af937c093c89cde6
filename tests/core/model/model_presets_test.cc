// SPDX-License-Identifier: Apache-2.0
// The built-in presets: the files of shared/data/models, byte for byte, and the hub configs of
// the models people name (docs/models.md, "Presets"), each with its exact parameter count.
#include "core/model/model_presets.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fsdp {
namespace {

std::filesystem::path shared_models_dir() {
#ifdef FSDP_SOURCE_DIR
  return std::filesystem::path(FSDP_SOURCE_DIR) / ".." / "shared" / "data" / "models";
#else
  // tests/core/model/<this file> -> repository root -> ../shared/data/models
  return std::filesystem::path(__FILE__).parent_path() / ".." / ".." / ".." / ".." / "shared" /
         "data" / "models";
#endif
}

TEST(ModelPresetsTest, PresetsEqualSharedFiles) {
  const std::filesystem::path dir = shared_models_dir();
  if (!std::filesystem::is_directory(dir)) {
    GTEST_SKIP() << "no " << dir << " beside the repository";
  }
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") {
      continue;
    }
    ++files;
    const ModelPreset* preset = find_model_preset(entry.path().stem().string());
    ASSERT_NE(preset, nullptr) << "no preset for " << entry.path();
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str(), preset->config_json) << entry.path();
    EXPECT_EQ(preset->file_name, entry.path().filename().string());
    EXPECT_EQ(preset->source, "shared/data/models/" + entry.path().filename().string());
  }
  int from_files = 0;
  for (const ModelPreset& p : model_presets()) {
    from_files += !p.file_name.empty();
  }
  EXPECT_EQ(files, from_files);
}

TEST(ModelPresetsTest, LookupByNameAndUnknownName) {
  EXPECT_EQ(model_presets().size(), 15U);
  EXPECT_NE(find_model_preset("deepseek-v3"), nullptr);
  EXPECT_EQ(find_model_preset("gpt5"), nullptr);
  const auto m = load_model_preset("gpt5");
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().message(),
            "model preset: expected one of llama-3-8b, llama-3-70b, llama-3.1-405b, mixtral-8x7b, "
            "qwen2.5-7b, deepseek-v3, gpt3-175b, llama-3.1-8b, llama-3.1-70b, llama-3.2-1b, "
            "llama-3.2-3b, qwen2.5-14b, qwen2.5-32b, qwen2.5-72b, mistral-7b, got 'gpt5'");
}

// The parameters of a llama/qwen2/mistral config from its fields alone: embedding, an untied
// head, the final norm and per layer q, k, v, o (q/k/v biases for qwen2), gate, up, down and two
// norms. Independent of the importer, so a count the importer gets wrong cannot agree with it.
std::int64_t dense_parameters(const nlohmann::json& c) {
  const std::int64_t h = c.at("hidden_size");
  const std::int64_t heads = c.at("num_attention_heads");
  const std::int64_t kv = c.at("num_key_value_heads");
  const std::int64_t d = c.contains("head_dim") ? c.at("head_dim").get<std::int64_t>() : h / heads;
  const std::int64_t ffn = c.at("intermediate_size");
  const std::int64_t vocab = c.at("vocab_size");
  const std::int64_t layers = c.at("num_hidden_layers");
  std::int64_t layer = h * heads * d + 2 * h * kv * d + heads * d * h + 3 * h * ffn + 2 * h;
  if (c.at("model_type") == "qwen2") {
    layer += heads * d + 2 * kv * d;
  }
  const bool tied = c.value("tie_word_embeddings", false);
  return vocab * h * (tied ? 1 : 2) + h + layers * layer;
}

// The totals of the published configs, exact to the parameter, worked out by hand from the
// formula above (the model cards round them: Llama 3.1 8B "8.03B", Llama 3.2 "1.23B" and "3.21B",
// Qwen2.5 "14.7B" and "72.7B"); docs/models.md lists them with their sources.
TEST(ModelPresetsTest, NamedPresetsHaveTheirPublishedParameterCounts) {
  const struct {
    const char* name;
    std::int64_t parameters;
    bool tied;
  } cases[] = {
      {"llama-3.1-8b", 8'030'261'248, false}, {"llama-3.1-70b", 70'553'706'496, false},
      {"llama-3.2-1b", 1'235'814'400, true},  {"llama-3.2-3b", 3'212'749'824, true},
      {"qwen2.5-14b", 14'770'033'664, false}, {"qwen2.5-32b", 32'763'876'352, false},
      {"qwen2.5-72b", 72'706'203'648, false}, {"mistral-7b", 7'241'732'096, false},
      {"llama-3-8b", 8'030'261'248, false},   {"qwen2.5-7b", 7'615'616'512, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const ModelPreset* preset = find_model_preset(c.name);
    ASSERT_NE(preset, nullptr);
    const nlohmann::json config = nlohmann::json::parse(preset->config_json);
    EXPECT_EQ(dense_parameters(config), c.parameters);
    EXPECT_EQ(config.value("tie_word_embeddings", false), c.tied);
    const auto model = load_model_preset(c.name);
    ASSERT_TRUE(model.has_value()) << model.error().message();
    EXPECT_EQ(model->num_parameters(), c.parameters);
    EXPECT_EQ(model->name(), c.name);
  }
}

// Every preset imports, and one not from shared/data/models names its hub repository.
TEST(ModelPresetsTest, EveryPresetImportsAndNamesItsSource) {
  for (const ModelPreset& p : model_presets()) {
    SCOPED_TRACE(std::string(p.name));
    EXPECT_TRUE(load_model_preset(p.name).has_value());
    EXPECT_FALSE(p.source.empty());
    if (p.file_name.empty()) {
      EXPECT_NE(p.source.find('/'), std::string_view::npos);
      EXPECT_EQ(p.source.find("shared/"), std::string_view::npos);
    }
  }
}

}  // namespace
}  // namespace fsdp

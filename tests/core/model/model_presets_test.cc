// SPDX-License-Identifier: Apache-2.0
// The built-in presets are the files of shared/data/models, byte for byte.
#include "core/model/model_presets.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

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
  }
  EXPECT_EQ(files, static_cast<int>(model_presets().size()));
}

TEST(ModelPresetsTest, LookupByNameAndUnknownName) {
  EXPECT_EQ(model_presets().size(), 7U);
  EXPECT_NE(find_model_preset("deepseek-v3"), nullptr);
  EXPECT_EQ(find_model_preset("gpt5"), nullptr);
  const auto m = load_model_preset("gpt5");
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().message(),
            "model preset: expected one of llama-3-8b, llama-3-70b, llama-3.1-405b, mixtral-8x7b, "
            "qwen2.5-7b, deepseek-v3, gpt3-175b, got 'gpt5'");
}

}  // namespace
}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// Built-in model presets: the hub config.json files of shared/data/models, embedded byte for byte
// so the binary needs no data directory (a test compares them with the files when they exist).
#pragma once

#include <span>
#include <string_view>

#include "core/base/expected.h"
#include "core/model/model.h"

namespace fsdp {

struct ModelPreset {
  std::string_view name;         // "llama-3-8b"; the model is imported under this name
  std::string_view file_name;    // "llama-3-8b.json" in shared/data/models; empty when not there
  std::string_view description;  // "Llama 3 8B"
  std::string_view config_json;  // the file's exact bytes, or the hub config's fields
  // Where config_json comes from: "shared/data/models/llama-3-8b.json", or the Hugging Face
  // repository whose config.json it copies ("meta-llama/Llama-3.1-8B").
  std::string_view source;
};

// Every preset: those of shared/data/models in the order of its README.md, then the others
// (docs/models.md, "Presets").
std::span<const ModelPreset> model_presets();
// nullptr when there is no preset of that name.
const ModelPreset* find_model_preset(std::string_view name);
// Imports the preset's config; the error for an unknown name lists the preset names.
Expected<Model> load_model_preset(std::string_view name);

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
#include "planner/model_argument.h"

#include <filesystem>
#include <optional>
#include <utility>

#include "core/base/file_io.h"
#include "core/base/strings.h"
#include "core/model/hub_config.h"
#include "core/model/json_fields.h"
#include "core/model/model_loader.h"
#include "core/model/model_presets.h"

#include <nlohmann/json.hpp>

namespace fsdp::planner {
namespace {

// A name that is no preset and cannot be a path ("lama-3-8b"): the preset loader's error, which
// lists the presets, says more than "cannot open the file".
bool looks_like_a_preset_name(const std::string& text) {
  std::error_code ec;
  return text.find('/') == std::string::npos && text.find('.') == std::string::npos &&
         !std::filesystem::exists(std::filesystem::symlink_status(text, ec));
}

}  // namespace

Expected<HubArch> load_arch_argument(const std::string& text, std::string* name) {
  std::string contents;
  const ModelPreset* preset = find_model_preset(text);
  if (preset != nullptr) {
    contents = std::string(preset->config_json);
    *name = std::string(preset->name);
  } else if (looks_like_a_preset_name(text)) {
    return load_model_preset(text).error();
  } else {
    FSDP_TRY(contents, read_input_file(text));
    *name = std::filesystem::path(text).stem().string();
  }
  FSDP_TRY(const ModelFileKind kind, detect_model_file_kind(contents, text));
  if (kind != ModelFileKind::kHubConfig) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat(text,
                         ": expected a preset or a hub config.json, got an fsdpsim model "
                         "file (it lists tensors, not sizes to change)"));
  }
  FSDP_TRY(const nlohmann::json doc, parse_json_text(contents, text));
  if (const auto it = doc.find("_name_or_path"); preset == nullptr && it != doc.end() &&
                                                 it->is_string() &&
                                                 !it->get_ref<const std::string&>().empty()) {
    *name = it->get<std::string>();
  }
  return read_hub_arch(doc, text);
}

Expected<Model> load_model_argument(const std::string& text, const HubOverrides& sizes,
                                    const ModelSplit& split) {
  if (sizes.empty() && split.is_whole()) {
    if (find_model_preset(text) != nullptr || looks_like_a_preset_name(text)) {
      return load_model_preset(text);
    }
    return load_model_file(text);
  }
  std::string name;
  Expected<HubArch> arch = load_arch_argument(text, &name);
  if (!arch) {
    return arch.error().with_context("--model");
  }
  FSDP_TRY(const HubArch shrunk, apply_hub_overrides(std::move(arch).value(), sizes));
  return hub_arch_to_model(shrunk, text, std::move(name), split);
}

}  // namespace fsdp::planner

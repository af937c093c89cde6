// SPDX-License-Identifier: Apache-2.0
#include "cli/model_argument.h"

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

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

// A size option that is only set when given (no default: the config's value applies otherwise).
po::typed_value<std::int64_t>* size_option(std::optional<std::int64_t>* out) {
  return po::value<std::int64_t>()->notifier([out](std::int64_t v) { *out = v; });
}

// A name that is no preset and cannot be a path ("lama-3-8b"): the preset loader's error, which
// lists the presets, says more than "cannot open the file".
bool looks_like_a_preset_name(const std::string& text) {
  std::error_code ec;
  return text.find('/') == std::string::npos && text.find('.') == std::string::npos &&
         !std::filesystem::exists(std::filesystem::symlink_status(text, ec));
}

}  // namespace

void add_model_size_options(po::options_description& desc, HubOverrides* sizes) {
  // clang-format off
  desc.add_options()
      ("layers", size_option(&sizes->layers), "decoder layers, replacing the config's")
      ("hidden", size_option(&sizes->hidden),
       "hidden size; with it or --heads the head size becomes hidden / heads")
      ("ffn", size_option(&sizes->ffn), "MLP (feed-forward) size")
      ("heads", size_option(&sizes->heads), "attention heads")
      ("kv-heads", size_option(&sizes->kv_heads),
       "key/value heads, a divisor of the heads (the config's stay while they still divide)")
      ("vocab", size_option(&sizes->vocab), "vocabulary size");
  // clang-format on
}

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

}  // namespace fsdp::cli

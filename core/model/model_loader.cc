// SPDX-License-Identifier: Apache-2.0
#include "core/model/model_loader.h"

#include "core/base/file_io.h"
#include "core/base/strings.h"
#include "core/model/hub_config.h"
#include "core/model/json_fields.h"
#include "core/model/model_json.h"

namespace fsdp {
namespace {

Expected<ModelFileKind> kind_of(const nlohmann::json& doc, std::string_view source) {
  if (doc.is_object() && doc.contains("model_type")) {
    return ModelFileKind::kHubConfig;
  }
  if (doc.is_object() && doc.contains("format")) {
    return ModelFileKind::kModelJson;
  }
  return field_error(source, "",
                     "a hub config.json (with \"model_type\") or an fsdpsim model file (with "
                     "\"format\": \"fsdpsim-model\")",
                     describe_json(doc));
}

}  // namespace

Expected<ModelFileKind> detect_model_file_kind(std::string_view text, std::string_view source) {
  FSDP_TRY(const nlohmann::json doc, parse_json_text(text, source));
  return kind_of(doc, source);
}

Expected<Model> parse_model_text(std::string_view text, std::string_view source) {
  FSDP_TRY(const nlohmann::json doc, parse_json_text(text, source));
  FSDP_TRY(const ModelFileKind kind, kind_of(doc, source));
  if (kind == ModelFileKind::kHubConfig) {
    return hub_config_to_model(doc, source);
  }
  return model_from_json(doc, source);
}

Expected<Model> load_model_file(const std::string& path) {
  FSDP_TRY(const std::string text, read_input_file(path));
  return parse_model_text(text, path);
}

}  // namespace fsdp

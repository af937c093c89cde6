// SPDX-License-Identifier: Apache-2.0
// The fsdpsim model file: a JSON form of Model (docs/models.md, docs/schema/model.schema.json).
// Parsing is strict (unknown fields are errors); serialising then parsing gives the same Model.
#pragma once

#include <string>
#include <string_view>

#include "core/base/expected.h"
#include "core/model/model.h"

#include <nlohmann/json.hpp>

namespace fsdp {

// The value of the "format" field that marks an fsdpsim model file.
inline constexpr std::string_view kModelFormatName = "fsdpsim-model";
inline constexpr std::int64_t kModelFormatVersion = 1;

// Parses a model file; `source` (usually the path) starts every error message, which then names
// the field, the expected and the actual value. Never throws.
Expected<Model> parse_model_json(std::string_view text, std::string_view source);
// The same from an already parsed document.
Expected<Model> model_from_json(const nlohmann::json& doc, std::string_view source);

// The model as a document that parse_model_json accepts and maps back to an equal Model (fields
// in the documented order).
nlohmann::ordered_json model_to_json(const Model& model);
// model_to_json(model).dump(indent).
std::string model_to_json_text(const Model& model, int indent = 2);

}  // namespace fsdp

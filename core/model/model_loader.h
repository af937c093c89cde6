// SPDX-License-Identifier: Apache-2.0
// One entry point for model input: a hub config.json or an fsdpsim model file, told apart by their
// top-level fields ("model_type" versus "format": "fsdpsim-model").
#pragma once

#include <string>
#include <string_view>

#include "core/base/expected.h"
#include "core/model/model.h"

namespace fsdp {

enum class ModelFileKind { kHubConfig, kModelJson };

// Parses `text` as whichever kind it is; `source` starts every error message. An object with
// neither marker is an error naming both.
Expected<Model> parse_model_text(std::string_view text, std::string_view source);
// The kind parse_model_text would pick for `text` (errors for malformed JSON or no marker).
Expected<ModelFileKind> detect_model_file_kind(std::string_view text, std::string_view source);
// Reads `path` and parses it; the path is the source in messages.
Expected<Model> load_model_file(const std::string& path);

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// The JSON form of Hardware (docs/hardware.md): one object with the HardwareSpec fields, in base
// units. Parsing is strict (unknown fields are errors); serialising then parsing gives an equal
// Hardware.
#pragma once

#include <string>
#include <string_view>

#include "core/base/expected.h"
#include "core/hardware/hardware.h"

#include <nlohmann/json.hpp>

namespace fsdp {

// The optional "format" marker of a hardware file.
inline constexpr std::string_view kHardwareFormatName = "fsdpsim-hardware";
inline constexpr std::int64_t kHardwareFormatVersion = 1;

// `source` (usually the path) starts every error message, which then names the field, the
// expected and the actual value. Never throws.
Expected<Hardware> parse_hardware_json(std::string_view text, std::string_view source);
Expected<Hardware> hardware_from_json(const nlohmann::json& doc, std::string_view source);

nlohmann::ordered_json hardware_to_json(const Hardware& hardware);
std::string hardware_to_json_text(const Hardware& hardware, int indent = 2);

}  // namespace fsdp

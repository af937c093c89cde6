// SPDX-License-Identifier: Apache-2.0
// The JSON form of a Calibration: the optional "calibration" object of a hardware file
// (docs/hardware.md, "Measured figures"). Parsing is strict (unknown fields are errors) and checks
// validate_calibration's rules with the file name in front; serialising then parsing gives an
// equal Calibration.
#pragma once

#include <string_view>

#include "core/base/expected.h"
#include "core/hardware/calibration.h"

#include <nlohmann/json.hpp>

namespace fsdp {

// `value` is the "calibration" object; errors read "<source>: field 'calibration.<path>': expected
// ..., got ...". May throw nlohmann's exceptions only for internal errors (the caller catches).
Expected<Calibration> calibration_from_json(const nlohmann::json& value, std::string_view source);

nlohmann::ordered_json calibration_to_json(const Calibration& calibration);

}  // namespace fsdp

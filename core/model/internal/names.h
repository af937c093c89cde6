// SPDX-License-Identifier: Apache-2.0
// Name checks shared by the model value types: names are non-empty and printable, so every error
// message that quotes one stays on one line.
#pragma once

#include <string>
#include <string_view>

#include "core/base/expected.h"

namespace fsdp::internal {

// `text` with control bytes written as \xNN and cut to `max_chars` characters (then "...").
std::string printable(std::string_view text, std::size_t max_chars = 80);

// Errors unless `name` is non-empty and has no control byte (< 0x20 or 0x7f); `what` names the
// entity ("parameter", "unit", "model").
Status check_name(std::string_view what, std::string_view name);

}  // namespace fsdp::internal

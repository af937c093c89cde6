// SPDX-License-Identifier: Apache-2.0
// Names and text from input files reach the terminal and one-line error messages: they must hold
// no control character (C0 bytes, DEL, or a UTF-8 C1 control such as U+009B, which terminals read
// as an escape sequence). Shared by model, layout and trace files (docs/cli.md, "Input and output
// files").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/base/expected.h"

namespace fsdp {

// True when `text` holds a control byte (< 0x20 or 0x7f) or a UTF-8 encoded C1 control.
bool has_control_character(std::string_view text);

// `text` with control bytes written as \xNN and cut to `max_chars` bytes (then "...").
std::string printable_text(std::string_view text, std::size_t max_chars = 80);

// Errors unless `name` is non-empty and has no control character; `what` names the entity
// ("parameter", "unit", "model", "tensor"). The message quotes the name as printable_text.
Status check_printable_name(std::string_view what, std::string_view name);

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// Error lines quote what the user typed; printable() keeps such a line one line and inert on a
// terminal (issue 16: every error is one line, docs/cli.md "Command lines").
#pragma once

#include <string>
#include <string_view>

namespace fsdp::cli {

// `text` with every control character (C0 bytes, DEL and UTF-8 encoded C1 controls) written as
// \xNN, uncut (core/base/printable.h's printable_text); everything else, UTF-8 included, unchanged.
std::string printable(std::string_view text);

}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
// Error lines quote what the user typed; printable() keeps such a line one line and inert on a
// terminal (issue 16, class 6: every error is one line, docs/cli.md "Command lines").
#pragma once

#include <string>
#include <string_view>

namespace fsdp::cli {

// `text` with every control character (below 0x20, and 0x7f) written as an escape: \n, \r, \t,
// \e or \xNN; everything else, UTF-8 included, unchanged.
std::string printable(std::string_view text);

}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
#include "core/model/internal/names.h"

#include "core/base/printable.h"

namespace fsdp::internal {

// The rules live in core/base/printable.h, shared with layout and trace files.
std::string printable(std::string_view text, std::size_t max_chars) {
  return printable_text(text, max_chars);
}

Status check_name(std::string_view what, std::string_view name) {
  return check_printable_name(what, name);
}

}  // namespace fsdp::internal

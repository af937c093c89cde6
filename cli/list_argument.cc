// SPDX-License-Identifier: Apache-2.0
#include "cli/list_argument.h"

#include <string>

#include "core/base/strings.h"

namespace fsdp::cli {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out(1);
  for (char c : text) {
    if (c == ',') {
      out.emplace_back();
    } else if (c != ' ') {
      out.back() += c;
    }
  }
  return out;
}

Expected<std::vector<std::int64_t>> parse_int_list(const std::string& text, std::string_view flag,
                                                   bool with_units, std::int64_t min,
                                                   std::int64_t max) {
  std::vector<std::int64_t> out;
  for (const std::string& item : split_commas(text)) {
    std::size_t end = 0;
    std::int64_t v = 0;
    try {
      v = std::stoll(item, &end);
    } catch (...) {
      end = 0;
    }
    const std::string unit = item.substr(end);
    const std::int64_t mult = unit.empty()    ? 1
                              : !with_units   ? 0
                              : unit == "KiB" ? std::int64_t{1} << 10
                              : unit == "MiB" ? std::int64_t{1} << 20
                              : unit == "GiB" ? std::int64_t{1} << 30
                                              : 0;
    if (end == 0 || mult == 0 || v < 1 || v > max / mult || v * mult < min) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(flag, " item '", item, "': expected ",
                           with_units ? "a size like 4096, 64KiB, 16MiB or 1GiB" : "an integer",
                           " in [", min, ", ", max, "]"));
    }
    out.push_back(v * mult);
  }
  return out;
}

}  // namespace fsdp::cli

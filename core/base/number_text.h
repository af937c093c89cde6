// SPDX-License-Identifier: Apache-2.0
// Numbers as text for reports: fixed decimals, and significant digits for figures whose model
// promises a few percent (docs/validation.md), so output never claims more precision than that.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace fsdp {

// v with `decimals` digits after the point: fixed_text(3.14159, 2) -> "3.14".
inline std::string fixed_text(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// v rounded to `digits` (>= 1) significant digits, never in exponent form: (1894.2, 3) -> "1890",
// (38.24, 3) -> "38.2", (0.22413, 3) -> "0.224".
inline std::string significant_text(double v, int digits) {
  if (v == 0 || !std::isfinite(v) || std::fabs(v) >= 1e18) {
    return fixed_text(v, 0);
  }
  const int exponent = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  const int decimals = std::max(0, digits - 1 - exponent);
  if (decimals > 0) {
    return fixed_text(v, decimals);
  }
  const double scale = std::pow(10.0, exponent - (digits - 1));
  return fixed_text(std::round(v / scale) * scale, 0);
}

// s right-aligned in `width` characters (longer text is kept whole).
inline std::string pad_text(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

}  // namespace fsdp

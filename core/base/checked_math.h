// SPDX-License-Identifier: Apache-2.0
// Overflow-checked int64 arithmetic for element counts, offsets and byte sizes. The bool forms are
// for hot loops; they return false on overflow and leave *out unspecified.
#pragma once

#include <cstdint>
#include <numeric>

namespace fsdp {

[[nodiscard]] inline bool checked_add(std::int64_t a, std::int64_t b, std::int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
[[nodiscard]] inline bool checked_sub(std::int64_t a, std::int64_t b, std::int64_t* out) {
  return !__builtin_sub_overflow(a, b, out);
}
[[nodiscard]] inline bool checked_mul(std::int64_t a, std::int64_t b, std::int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// lcm of two positive values; false when it exceeds int64.
[[nodiscard]] inline bool checked_lcm(std::int64_t a, std::int64_t b, std::int64_t* out) {
  const std::int64_t g = std::gcd(a, b);
  return checked_mul(a / g, b, out);
}

// ceil(v / m) * m for v >= 0, m > 0; false on overflow.
[[nodiscard]] inline bool checked_pad(std::int64_t v, std::int64_t m, std::int64_t* out) {
  const std::int64_t r = v % m;
  if (r == 0) {
    *out = v;
    return true;
  }
  return checked_add(v, m - r, out);
}

// Unchecked pad for values known to be in range.
inline std::int64_t pad_to_multiple(std::int64_t v, std::int64_t m) {
  const std::int64_t r = v % m;
  return r == 0 ? v : v + (m - r);
}

}  // namespace fsdp

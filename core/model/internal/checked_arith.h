// SPDX-License-Identifier: Apache-2.0
// Arith: int64 arithmetic for the hub importer's size formulas that remembers whether any step
// overflowed (the results are then meaningless and the importer reports the config's fields).
#pragma once

#include <cstdint>

#include "core/base/checked_math.h"

namespace fsdp::internal {

class Arith {
 public:
  std::int64_t mul(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    overflow_ = overflow_ || !checked_mul(a, b, &r);
    return r;
  }
  std::int64_t mul(std::int64_t a, std::int64_t b, std::int64_t c) { return mul(mul(a, b), c); }
  std::int64_t add(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    overflow_ = overflow_ || !checked_add(a, b, &r);
    return r;
  }
  template <class... Rest>
  std::int64_t add(std::int64_t a, std::int64_t b, Rest... rest) {
    return add(add(a, b), rest...);
  }
  bool overflow() const { return overflow_; }

 private:
  bool overflow_ = false;
};

}  // namespace fsdp::internal

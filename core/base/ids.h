// SPDX-License-Identifier: Apache-2.0
// Element-count aliases and dense int32 strong ids used to index flat vectors.
#pragma once

#include <compare>
#include <cstdint>

namespace fsdp {

using ElemCount = std::int64_t;  // element counts, offsets, strides: always signed 64-bit
using ByteCount = std::int64_t;

template <class Tag>
class Id {
 public:
  constexpr Id() = default;
  constexpr explicit Id(std::int32_t v) : v_(v) {}
  constexpr std::int32_t value() const { return v_; }
  constexpr bool valid() const { return v_ >= 0; }
  friend constexpr auto operator<=>(Id, Id) = default;

 private:
  std::int32_t v_ = -1;
};

using RankId = Id<struct RankTag>;
using StreamId = Id<struct StreamTag>;
using OpId = Id<struct OpTag>;

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// Stable LSD radix sort of (key, index) pairs: the O(n) replacement for the comparison sorts on the
// layout hot paths (fragment order, ranges by start). Passes = ceil(bits(max key) / 11).
#pragma once

#include "core/layout/internal/huge_page_allocator.h"

#include <cstdint>
#include <vector>

namespace fsdp::internal {

struct KeyIndex {
  std::uint64_t key = 0;
  std::uint64_t index = 0;
};

// Sorts items by key ascending; items with equal keys keep their relative order.
void stable_radix_sort(std::vector<KeyIndex>& items);
void stable_radix_sort(HugePageVector<KeyIndex>& items);

// Sorts packed words by their bits from `shift` (0..63) up, ascending; the low bits are carried
// along, and words with equal keys keep their relative order.
void stable_radix_sort_by_high_bits(std::vector<std::uint64_t>& items, int shift);
void stable_radix_sort_by_high_bits(HugePageVector<std::uint64_t>& items, int shift);

}  // namespace fsdp::internal

// SPDX-License-Identifier: Apache-2.0
#include "core/layout/internal/radix_sort.h"

#include <algorithm>
#include <array>

namespace fsdp::internal {

namespace {

// Vec is std::vector or HugePageVector: the scratch has the items' type, as the passes swap them.
template <typename Vec>
void stable_radix_sort_impl(Vec& items) {
  constexpr int kBits = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kBits;
  constexpr std::uint64_t kMask = kBuckets - 1;
  if (items.size() < 2) {
    return;
  }
  // Small inputs: a stable comparison sort is cheaper than even one counting pass.
  if (items.size() < 256) {
    std::stable_sort(items.begin(), items.end(),
                     [](const KeyIndex& a, const KeyIndex& b) { return a.key < b.key; });
    return;
  }
  std::uint64_t max_key = 0;
  for (const KeyIndex& it : items) {
    max_key = std::max(max_key, it.key);
  }
  Vec scratch(items.size());
  std::array<std::size_t, kBuckets> count{};
  for (int shift = 0; shift < 64 && (max_key >> shift) != 0; shift += kBits) {
    count.fill(0);
    for (const KeyIndex& it : items) {
      ++count[(it.key >> shift) & kMask];
    }
    std::size_t sum = 0;
    for (std::size_t& c : count) {
      const std::size_t here = c;
      c = sum;
      sum += here;
    }
    for (const KeyIndex& it : items) {
      scratch[count[(it.key >> shift) & kMask]++] = it;
    }
    items.swap(scratch);
  }
}

template <typename Vec>
void stable_radix_sort_by_high_bits_impl(Vec& items, int shift) {
  constexpr int kBits = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kBits;
  constexpr std::uint64_t kMask = kBuckets - 1;
  if (items.size() < 2) {
    return;
  }
  if (items.size() < 256) {
    std::stable_sort(items.begin(), items.end(), [shift](std::uint64_t a, std::uint64_t b) {
      return (a >> shift) < (b >> shift);
    });
    return;
  }
  std::uint64_t max_key = 0;
  for (const std::uint64_t it : items) {
    max_key = std::max(max_key, it >> shift);
  }
  Vec scratch(items.size());
  std::array<std::size_t, kBuckets> count{};
  for (int digit = 0; digit < 64 - shift && (max_key >> digit) != 0; digit += kBits) {
    const int at = shift + digit;
    count.fill(0);
    for (const std::uint64_t it : items) {
      ++count[(it >> at) & kMask];
    }
    std::size_t sum = 0;
    for (std::size_t& c : count) {
      const std::size_t here = c;
      c = sum;
      sum += here;
    }
    for (const std::uint64_t it : items) {
      scratch[count[(it >> at) & kMask]++] = it;
    }
    items.swap(scratch);
  }
}

}  // namespace

void stable_radix_sort(std::vector<KeyIndex>& items) {
  stable_radix_sort_impl(items);
}
void stable_radix_sort(HugePageVector<KeyIndex>& items) {
  stable_radix_sort_impl(items);
}

void stable_radix_sort_by_high_bits(std::vector<std::uint64_t>& items, int shift) {
  stable_radix_sort_by_high_bits_impl(items, shift);
}
void stable_radix_sort_by_high_bits(HugePageVector<std::uint64_t>& items, int shift) {
  stable_radix_sort_by_high_bits_impl(items, shift);
}

}  // namespace fsdp::internal

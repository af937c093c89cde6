// SPDX-License-Identifier: Apache-2.0
// splitmix64: the seeded, platform-independent hash behind the decoder's initial weights and
// synthetic tokens (same seed -> same bits on every machine and thread count).
#pragma once

#include <cstdint>

namespace fsdp::internal {

// The splitmix64 finaliser (Steele, Lea and Flood 2014): a bijection on 64-bit values.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31U);
}

// Hash of an ordered tuple of words: splitmix64 chained over (seed, a, b, c).
constexpr std::uint64_t hash_words(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0,
                                   std::uint64_t c = 0) {
  return splitmix64(splitmix64(splitmix64(splitmix64(seed) ^ a) ^ b) ^ c);
}

// A double uniform in [0, 1) from the top 53 bits of a hash.
constexpr double unit_interval(std::uint64_t h) {
  return static_cast<double>(h >> 11U) * 0x1.0p-53;
}

}  // namespace fsdp::internal

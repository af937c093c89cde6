// SPDX-License-Identifier: Apache-2.0
#include "core/layout/internal/successor_set.h"

#include <bit>

namespace fsdp::internal {

SuccessorSet::SuccessorSet(std::size_t n) : n_(n) {
  std::size_t words = n == 0 ? 1 : (n - 1) / 64 + 1;
  std::size_t total = 0;
  while (true) {
    level_begin_.push_back(total);
    level_words_.push_back(words);
    total += words;
    if (words == 1) {
      break;
    }
    words = (words - 1) / 64 + 1;
  }
  words_.assign(total, 0);
}

void SuccessorSet::insert(std::size_t i) {
  for (std::size_t k = 0; k < level_begin_.size(); ++k) {
    std::uint64_t& word = words_[level_begin_[k] + i / 64];
    const bool was_empty = word == 0;
    word |= std::uint64_t{1} << (i % 64);
    if (!was_empty) {
      return;  // the levels above already mark this word
    }
    i /= 64;
  }
}

void SuccessorSet::erase(std::size_t i) {
  for (std::size_t k = 0; k < level_begin_.size(); ++k) {
    std::uint64_t& word = words_[level_begin_[k] + i / 64];
    word &= ~(std::uint64_t{1} << (i % 64));
    if (word != 0) {
      return;  // the word still has members, so the levels above stay set
    }
    i /= 64;
  }
}

std::size_t SuccessorSet::next_at_or_after(std::size_t i) const {
  if (i >= n_) {
    return kNone;
  }
  // Climb until a word holds a bit at or after the position, then descend by
  // lowest bits.
  std::size_t k = 0;
  std::size_t pos = i;
  while (true) {
    if (k == level_begin_.size()) {
      return kNone;
    }
    const std::size_t w = pos / 64;
    if (w >= level_words_[k]) {
      return kNone;
    }
    const std::uint64_t word = words_[level_begin_[k] + w] & (~std::uint64_t{0} << (pos % 64));
    if (word != 0) {
      pos = w * 64 + static_cast<std::size_t>(std::countr_zero(word));
      break;
    }
    pos = w + 1;
    ++k;
  }
  while (k > 0) {
    --k;
    const std::uint64_t word = words_[level_begin_[k] + pos];
    pos = pos * 64 + static_cast<std::size_t>(std::countr_zero(word));
  }
  return pos;
}

}  // namespace fsdp::internal

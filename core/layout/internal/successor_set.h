// SPDX-License-Identifier: Apache-2.0
// SuccessorSet: a subset of [0, n) as a 64-ary hierarchy of bit words,
// answering "the smallest member >= i" in O(log_64 n) word reads. The PADDED
// builder keeps its live fragment class heads in one (docs/design/layouts.md
// §3.4): at a million fragments the whole set is about 70 KB, so its queries
// stay in cache where a segment tree over the same positions would not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fsdp::internal {

class SuccessorSet {
 public:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  // The empty subset of [0, n).
  explicit SuccessorSet(std::size_t n);

  std::size_t universe() const { return n_; }
  // Requires i < universe().
  bool contains(std::size_t i) const { return (words_[i / 64] >> (i % 64) & 1U) != 0; }
  // Idempotent; require i < universe().
  void insert(std::size_t i);
  void erase(std::size_t i);
  // The smallest member >= i, or kNone (also when i >= universe()).
  std::size_t next_at_or_after(std::size_t i) const;

 private:
  std::size_t n_ = 0;
  // Level 0 (bit i: i is a member), then level k + 1 (bit w: word w of level k
  // is non-zero), up to a single top word; level k starts at
  // words_[level_begin_[k]].
  std::vector<std::uint64_t> words_;
  std::vector<std::size_t> level_begin_;
  std::vector<std::size_t> level_words_;
};

}  // namespace fsdp::internal

// SPDX-License-Identifier: Apache-2.0
// Straggler: which ranks run slow and by how much. A straggler's compute ops take
// `compute_factor` times as long, and every collective it takes part in moves its bandwidth term
// `link_factor` times slower (a ring runs at the pace of its slowest link). Ranks are named
// explicitly or as a fraction of the mesh, picked evenly spaced (deterministic, no RNG).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/expected.h"

namespace fsdp::sim {

struct Straggler {
  std::vector<std::int64_t> ranks;  // explicit ranks, or
  double fraction = 0.0;            // this fraction of the ranks (0 < f <= 1), evenly spaced
  double compute_factor = 1.0;      // >= 1
  double link_factor = 1.0;         // >= 1
  bool active() const { return !ranks.empty() || fraction > 0.0; }
  friend bool operator==(const Straggler&, const Straggler&) = default;
};

// Reads comma-separated key=value items: `rank=R` (repeatable), `fraction=F`, `compute=X`,
// `link=Y`, e.g. "rank=5,compute=1.5" or "fraction=0.01,link=2". Errors (kInvalidArgument) name
// the item: an unknown key, a malformed number, no rank and no fraction, both, a factor < 1, a
// fraction outside (0, 1], or both factors 1.
Expected<Straggler> parse_straggler(std::string_view text);

// One flag per rank of a `num_ranks` mesh. A fraction f picks ceil(f * num_ranks) ranks
// floor(i * num_ranks / count) for i in [0, count). Error (kOutOfRange) for a rank outside
// [0, num_ranks).
Expected<std::vector<char>> straggler_flags(const Straggler& straggler, std::int64_t num_ranks);

// "rank=5,compute=1.5" (the form parse_straggler reads); "none" when inactive.
std::string to_string(const Straggler& straggler);

}  // namespace fsdp::sim

// SPDX-License-Identifier: Apache-2.0
// RapidCheck generators of DP meshes: 2-axis meshes (O outer, I inner) whose size O * I divides
// the dp a layout was built for (usually equals it), and invalid local-range requests that
// get_local_range must reject with an Error.
#pragma once

#include "core/layout/local_range.h"
#include "properties/gen/gen_tensor_shape.h"

#include <rapidcheck.h>

#include <cstdint>
#include <ostream>
#include <vector>

namespace fsdp::gen {

// A 2-axis DP mesh: axis 0 (outer, size `outer`) and axis 1 (inner, size `inner`).
struct Mesh2 {
  std::int64_t outer = 1;
  std::int64_t inner = 1;
  std::int64_t size() const { return outer * inner; }
};

inline std::ostream& operator<<(std::ostream& os, const Mesh2& m) {
  return os << "mesh (O=" << m.outer << ", I=" << m.inner << ")";
}

inline std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> small;
  std::vector<std::int64_t> large;
  for (std::int64_t d = 1; d * d <= n; ++d) {
    if (n % d == 0) {
      small.push_back(d);
      if (d != n / d) {
        large.push_back(n / d);
      }
    }
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

// A mesh with O * I = dp (weight 3) or O * I a proper divisor of dp (weight 1; each shard rank
// then holds dp / (O * I) consecutive segments).
inline rc::Gen<Mesh2> two_axis_mesh(std::int64_t dp) {
  const std::vector<std::int64_t> ds = divisors(dp);
  auto split = [](std::int64_t m) {
    return rc::gen::map(rc::gen::elementOf(divisors(m)),
                        [m](std::int64_t o) { return Mesh2{o, m / o}; });
  };
  return rc::gen::weightedOneOf<Mesh2>(
      {{3, split(dp)}, {1, rc::gen::mapcat(rc::gen::elementOf(ds), split)}});
}

// A get_local_range request the implementation must reject.
struct LocalRangeRequest {
  MeshCoordinate coord;
  std::vector<AxisPlacement> placements;
};

inline std::ostream& operator<<(std::ostream& os, const LocalRangeRequest& r) {
  os << "axis sizes [";
  for (std::size_t i = 0; i < r.coord.axis_sizes.size(); ++i) {
    os << (i > 0 ? ", " : "") << r.coord.axis_sizes[i];
  }
  os << "] local ranks [";
  for (std::size_t i = 0; i < r.coord.local_ranks.size(); ++i) {
    os << (i > 0 ? ", " : "") << r.coord.local_ranks[i];
  }
  os << "] placements [";
  for (std::size_t i = 0; i < r.placements.size(); ++i) {
    const AxisPlacement p = r.placements[i];
    os << (i > 0 ? ", " : "")
       << (p == AxisPlacement::kShard ? "S" : p == AxisPlacement::kReplicate ? "R" : "P");
  }
  return os << "]";
}

// Invalid requests against a layout with `dp` segments: Shard placements that are not a suffix,
// a shard count that does not divide dp, a local rank outside its axis, an axis size <= 0, and
// placement or rank counts that differ from the axis count.
inline rc::Gen<Invalid<LocalRangeRequest>> invalid_local_range_request(std::int64_t dp) {
  using Bad = Invalid<LocalRangeRequest>;
  using P = AxisPlacement;
  auto rank_in = [](std::int64_t n) { return rc::gen::inRange<std::int64_t>(0, n); };
  auto non_suffix = rc::gen::mapcat(two_axis_mesh(dp), [=](Mesh2 m) {
    return rc::gen::apply(
        [m](std::int64_t o, std::int64_t i, P after) {
          return Bad{{{{m.outer, m.inner}, {o, i}}, {P::kShard, after}},
                     "shard placements not a suffix"};
        },
        rank_in(m.outer), rank_in(m.inner), rc::gen::element(P::kReplicate, P::kPartial));
  });
  // A 1-axis shard mesh of n ranks with dp % n != 0.
  auto not_divisible = rc::gen::mapcat(
      rc::gen::suchThat(rc::gen::inRange<std::int64_t>(2, 2 * dp + 3),
                        [dp](std::int64_t n) { return dp % n != 0; }),
      [=](std::int64_t n) {
        return rc::gen::map(rank_in(n), [n](std::int64_t r) {
          return Bad{{{{n}, {r}}, {P::kShard}}, "dp not divisible by the shard count"};
        });
      });
  auto rank_out = rc::gen::mapcat(two_axis_mesh(dp), [](Mesh2 m) {
    return rc::gen::apply(
        [m](bool outer_axis, std::int64_t over, bool negative) {
          const std::int64_t size = outer_axis ? m.outer : m.inner;
          const std::int64_t bad = negative ? -1 - over : size + over;
          std::vector<std::int64_t> ranks{0, 0};
          ranks[outer_axis ? 0 : 1] = bad;
          return Bad{{{{m.outer, m.inner}, ranks}, {P::kShard, P::kShard}},
                     "local rank outside its axis"};
        },
        rc::gen::arbitrary<bool>(), rc::gen::inRange<std::int64_t>(0, 5),
        rc::gen::arbitrary<bool>());
  });
  auto bad_size = rc::gen::apply(
      [](std::int64_t size, P p) {
        return Bad{{{{size}, {0}}, {p}}, "axis size <= 0"};
      },
      rc::gen::inRange<std::int64_t>(-4, 1), rc::gen::element(P::kShard, P::kReplicate));
  auto bad_count = rc::gen::apply(
      [dp](bool drop_placement) {
        if (drop_placement) {
          return Bad{{{{1, dp}, {0, 0}}, {P::kShard}}, "placement count differs from axes"};
        }
        return Bad{{{{1, dp}, {0}}, {P::kShard, P::kShard}}, "rank count differs from axes"};
      },
      rc::gen::arbitrary<bool>());
  return rc::gen::oneOf(non_suffix, not_divisible, rank_out, bad_size, bad_count);
}

}  // namespace fsdp::gen

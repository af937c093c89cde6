// SPDX-License-Identifier: Apache-2.0
// RapidCheck generators of layout-builder inputs: tensor shapes (1-4 dims, zero-numel tensors
// included), dp sizes, block sizes and owner lists, plus separate generators of INVALID inputs
// that every builder must reject with an Error. Valid shapes always have dim 0 a multiple of the
// block and non-leading dims >= 1; their row sizes keep lcm * dp * block far below 2^63.
#pragma once

#include "core/layout/shape.h"

#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <ostream>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fsdp::gen {

// A PADDED / UNPADDED builder request.
struct LayoutInput {
  std::vector<Shape> shapes;
  std::int64_t dp = 1;
  std::int64_t block = 1;
};

inline std::ostream& operator<<(std::ostream& os, const LayoutInput& in) {
  os << "shapes [";
  for (std::size_t i = 0; i < in.shapes.size(); ++i) {
    os << (i > 0 ? ", " : "") << to_string(in.shapes[i]);
  }
  return os << "] dp " << in.dp << " block " << in.block;
}

// A TensorAtomic builder request.
struct TensorAtomicInput {
  std::vector<Shape> shapes;
  std::int64_t dp = 1;
  std::vector<std::int64_t> owners;
};

inline std::ostream& operator<<(std::ostream& os, const TensorAtomicInput& in) {
  os << "shapes [";
  for (std::size_t i = 0; i < in.shapes.size(); ++i) {
    os << (i > 0 ? ", " : "") << to_string(in.shapes[i]);
  }
  os << "] dp " << in.dp << " owners [";
  for (std::size_t i = 0; i < in.owners.size(); ++i) {
    os << (i > 0 ? ", " : "") << in.owners[i];
  }
  return os << "]";
}

// An input that the named builders must reject; `defect` says what is wrong with it.
template <class Input>
struct Invalid {
  Input input;
  std::string defect;
};

template <class Input>
std::ostream& operator<<(std::ostream& os, const Invalid<Input>& bad) {
  return os << bad.defect << ": " << bad.input;
}

// Builds a Shape from dims that are known to be valid (generator output only).
inline Shape shape_of(const std::vector<std::int64_t>& dims) {
  return Shape::make(std::span<const std::int64_t>(dims)).value();
}

// dp in [1, 4096], biased to small values (where padding and empty segments are interesting).
// Generated at the nominal size so that the whole range is used in every case (rc::gen::inRange
// otherwise narrows its range for the small early cases); shrinks towards 1.
inline rc::Gen<std::int64_t> dp_size() {
  return rc::gen::resize(
      100, rc::gen::weightedOneOf<std::int64_t>({{4, rc::gen::inRange<std::int64_t>(1, 9)},
                                                 {2, rc::gen::inRange<std::int64_t>(1, 65)},
                                                 {1, rc::gen::inRange<std::int64_t>(1, 4097)}}));
}

// Block size in [1, 64], mostly 1 (RowAtomic), otherwise BlockAtomic.
inline rc::Gen<std::int64_t> block_size() {
  return rc::gen::resize(100, rc::gen::weightedOneOf<std::int64_t>(
                                  {{4, rc::gen::just<std::int64_t>(1)},
                                   {2, rc::gen::element<std::int64_t>(2, 3, 4, 8, 32)},
                                   {1, rc::gen::inRange<std::int64_t>(1, 65)}}));
}

// Number of rows in units of the block: sometimes 0 (a zero-numel tensor such as (0, 4)), mostly
// small, sometimes large enough to be a regular tensor with a remainder.
inline rc::Gen<std::int64_t> block_rows() {
  return rc::gen::weightedOneOf<std::int64_t>({{1, rc::gen::just<std::int64_t>(0)},
                                               {8, rc::gen::inRange<std::int64_t>(1, 13)},
                                               {2, rc::gen::inRange<std::int64_t>(13, 65)}});
}

inline rc::Gen<Shape> shape_with_tail(std::int64_t block, rc::Gen<std::vector<std::int64_t>> tail) {
  return rc::gen::apply(
      [block](std::int64_t rows, std::vector<std::int64_t> rest) {
        std::vector<std::int64_t> dims{rows * block};
        dims.insert(dims.end(), rest.begin(), rest.end());
        return shape_of(dims);
      },
      block_rows(), std::move(tail));
}

// 1-4 dims, non-leading dims in [1, 6] (row sizes have prime factors 2, 3, 5 only).
inline rc::Gen<Shape> small_shape(std::int64_t block) {
  return shape_with_tail(
      block, rc::gen::mapcat(rc::gen::inRange(0, 4), [](int n) {
        return rc::gen::container<std::vector<std::int64_t>>(static_cast<std::size_t>(n),
                                                            rc::gen::inRange<std::int64_t>(1, 7));
      }));
}

// Row sizes 1..16 in assorted factorings: many distinct row sizes, lcm up to 720720.
inline rc::Gen<Shape> distinct_row_shape(std::int64_t block) {
  static const std::vector<std::vector<std::int64_t>> kTails = {
      {},     {2},    {3},     {4},    {5},       {6},    {7},    {8},    {9},
      {10},   {11},   {12},    {13},   {14},      {15},   {16},   {2, 3}, {2, 5},
      {3, 4}, {2, 7}, {3, 5},  {2, 8}, {2, 2, 3}, {2, 2, 2, 2}};
  return shape_with_tail(block, rc::gen::elementOf(kTails));
}

// Row sizes dividing 12: a small chunk, so most tensors are regulars with remainders and
// conjugate pairing and gap filling happen often.
inline rc::Gen<Shape> compact_row_shape(std::int64_t block) {
  static const std::vector<std::vector<std::int64_t>> kTails = {{},     {2},    {3},    {4},
                                                                {6},    {12},   {2, 2}, {2, 3},
                                                                {3, 4}, {2, 6}, {1, 4}};
  return shape_with_tail(block, rc::gen::elementOf(kTails));
}

// Up to ~40 valid shapes for `block`, drawn from one of the mixes above.
inline rc::Gen<std::vector<Shape>> valid_shapes(std::int64_t block) {
  auto list = [](rc::Gen<Shape> g) {
    return rc::gen::scale(0.4, rc::gen::container<std::vector<Shape>>(std::move(g)));
  };
  return rc::gen::weightedOneOf<std::vector<Shape>>(
      {{2, list(small_shape(block))},
       {3, list(compact_row_shape(block))},
       {1, list(distinct_row_shape(block))},
       {2, list(rc::gen::oneOf(small_shape(block), compact_row_shape(block),
                               distinct_row_shape(block)))}});
}

// Shapes biased to many distinct row sizes (a large chunk, up to 720720 * block): fragments of
// row sizes 1..16 plus a few regular tensors sized relative to that chunk (1-3 chunks and a
// random remainder of rows), inserted at random positions, so that conjugates and gap fills
// happen although the chunk is large.
inline rc::Gen<std::vector<Shape>> many_row_size_shapes(std::int64_t block) {
  using Spec = std::tuple<std::size_t, std::int64_t, std::int64_t, std::size_t>;
  return rc::gen::mapcat(
      rc::gen::scale(0.4, rc::gen::container<std::vector<Shape>>(distinct_row_shape(block))),
      [block](const std::vector<Shape>& frags) {
        std::int64_t chunk = 1;
        for (const Shape& s : frags) {
          chunk = std::lcm(chunk, block * s.row_size());
        }
        return rc::gen::map(
            rc::gen::scale(0.15, rc::gen::container<std::vector<Spec>>(rc::gen::tuple(
                                     rc::gen::inRange<std::size_t>(0, 1000),
                                     rc::gen::inRange<std::int64_t>(1, 4),
                                     rc::gen::inRange<std::int64_t>(0, 1 << 30),
                                     rc::gen::inRange<std::size_t>(0, 1000)))),
            [block, chunk, frags](const std::vector<Spec>& specs) {
              std::vector<Shape> out = frags;
              if (frags.empty()) {
                return out;
              }
              for (const auto& [which, chunks, extra, at] : specs) {
                // A row size already present, so the chunk does not change.
                const Shape& like = frags[which % frags.size()];
                const std::int64_t blocks_per_chunk = chunk / (block * like.row_size());
                const std::int64_t blocks = chunks * blocks_per_chunk + extra % blocks_per_chunk;
                std::vector<std::int64_t> dims(like.dims().begin(), like.dims().end());
                dims[0] = blocks * block;
                out.insert(out.begin() + static_cast<std::ptrdiff_t>(at % (out.size() + 1)),
                           shape_of(dims));
              }
              return out;
            });
      });
}

inline rc::Gen<LayoutInput> valid_layout_input() {
  return rc::gen::mapcat(block_size(), [](std::int64_t block) {
    return rc::gen::apply(
        [block](std::vector<Shape> shapes, std::int64_t dp) {
          return LayoutInput{std::move(shapes), dp, block};
        },
        valid_shapes(block), dp_size());
  });
}

// Shapes valid for any block (row-size checks do not apply to TensorAtomic); owners uniform.
inline rc::Gen<TensorAtomicInput> valid_tensor_atomic_input() {
  return rc::gen::mapcat(rc::gen::pair(valid_shapes(1), dp_size()), [](const auto& sd) {
    const std::vector<Shape>& shapes = sd.first;
    const std::int64_t dp = sd.second;
    return rc::gen::map(
        rc::gen::container<std::vector<std::int64_t>>(shapes.size(),
                                                      rc::gen::inRange<std::int64_t>(0, dp)),
        [shapes, dp](std::vector<std::int64_t> owners) {
          return TensorAtomicInput{shapes, dp, std::move(owners)};
        });
  });
}

// ---- invalid inputs ---------------------------------------------------------------------------

namespace internal {

// Inserts `bad` into `shapes` at a generated position.
inline rc::Gen<std::vector<Shape>> with_inserted(std::vector<Shape> shapes, Shape bad) {
  return rc::gen::map(rc::gen::inRange<std::size_t>(0, shapes.size() + 1),
                      [shapes, bad](std::size_t at) {
                        std::vector<Shape> out = shapes;
                        out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), bad);
                        return out;
                      });
}

constexpr std::int64_t kPow62 = std::int64_t{1} << 62;

}  // namespace internal

// Inputs that both row-atomic builders (PADDED and UNPADDED) must reject: a 0-D shape, a zero row
// size, dim 0 not a multiple of the block, dp <= 0, block <= 0, block * row size beyond int64, and
// a sum of numels beyond int64.
inline rc::Gen<Invalid<LayoutInput>> invalid_row_atomic_input() {
  using Bad = Invalid<LayoutInput>;
  const auto base = valid_layout_input();
  auto zero_d = rc::gen::mapcat(base, [](LayoutInput in) {
    return rc::gen::map(internal::with_inserted(in.shapes, Shape()), [in](std::vector<Shape> s) {
      return Bad{LayoutInput{std::move(s), in.dp, in.block}, "0-D shape"};
    });
  });
  auto zero_row = rc::gen::mapcat(
      rc::gen::tuple(base, rc::gen::inRange<std::int64_t>(0, 5),
                     rc::gen::element(std::vector<std::int64_t>{0}, std::vector<std::int64_t>{3, 0},
                                      std::vector<std::int64_t>{0, 5},
                                      std::vector<std::int64_t>{2, 0, 2})),
      [](const std::tuple<LayoutInput, std::int64_t, std::vector<std::int64_t>>& t) {
        const LayoutInput& in = std::get<0>(t);
        std::vector<std::int64_t> dims{std::get<1>(t) * in.block};
        dims.insert(dims.end(), std::get<2>(t).begin(), std::get<2>(t).end());
        return rc::gen::map(internal::with_inserted(in.shapes, shape_of(dims)),
                            [in](std::vector<Shape> s) {
                              return Bad{LayoutInput{std::move(s), in.dp, in.block},
                                         "zero row size"};
                            });
      });
  auto bad_dim0 = rc::gen::mapcat(
      rc::gen::tuple(rc::gen::inRange<std::int64_t>(2, 65), rc::gen::inRange<std::int64_t>(0, 9),
                     rc::gen::inRange<std::int64_t>(1, 1000), dp_size()),
      [](const std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>& t) {
        const auto [block, k, r, dp] = t;
        const std::int64_t rows = k * block + 1 + r % (block - 1);  // never a multiple of block
        return rc::gen::mapcat(valid_shapes(block), [=](std::vector<Shape> shapes) {
          return rc::gen::map(internal::with_inserted(shapes, shape_of({rows, 1 + r % 7})),
                              [=](std::vector<Shape> s) {
                                return Bad{LayoutInput{std::move(s), dp, block},
                                           "dim 0 not a multiple of the block"};
                              });
        });
      });
  auto bad_dp = rc::gen::apply(
      [](LayoutInput in, std::int64_t dp) {
        in.dp = dp;
        return Bad{std::move(in), "dp <= 0"};
      },
      base,
      rc::gen::oneOf(rc::gen::inRange<std::int64_t>(-8, 1),
                     rc::gen::just(std::numeric_limits<std::int64_t>::min())));
  auto bad_block = rc::gen::apply(
      [](std::vector<Shape> shapes, std::int64_t dp, std::int64_t block) {
        return Bad{LayoutInput{std::move(shapes), dp, block}, "block <= 0"};
      },
      valid_shapes(1), dp_size(),
      rc::gen::oneOf(rc::gen::inRange<std::int64_t>(-8, 1),
                     rc::gen::just(std::numeric_limits<std::int64_t>::min())));
  // block * row size > 2^63 although the shape itself is fine.
  auto align_overflow = rc::gen::apply(
      [](std::vector<Shape> shapes, std::int64_t block_log2, std::int64_t dp) {
        const std::int64_t block = std::int64_t{1} << block_log2;
        // dim 0 = 0 keeps numel 0 (a valid Shape) while block * row size = 2^63 + block.
        shapes.push_back(shape_of({0, (std::int64_t{1} << (63 - block_log2)) + 1}));
        return Bad{LayoutInput{std::move(shapes), dp, block}, "block * row size overflows"};
      },
      valid_shapes(1), rc::gen::inRange<std::int64_t>(1, 7), dp_size());
  // Two or more tensors whose numels each fit but whose sum does not.
  auto sum_overflow = rc::gen::apply(
      [](std::vector<Shape> shapes, std::int64_t copies, std::int64_t dp) {
        for (std::int64_t c = 0; c < copies; ++c) {
          shapes.push_back(shape_of({2, internal::kPow62 / 2}));
        }
        return Bad{LayoutInput{std::move(shapes), dp, 1}, "sum of numels overflows"};
      },
      valid_shapes(1), rc::gen::inRange<std::int64_t>(2, 5), dp_size());
  return rc::gen::oneOf(zero_d, zero_row, bad_dim0, bad_dp, bad_block, align_overflow,
                        sum_overflow);
}

// Inputs only the PADDED builder must reject (UNPADDED accepts them): the chunk (lcm of the row
// alignments) beyond int64 through many coprime row sizes, and chunk * dp beyond int64.
inline rc::Gen<Invalid<LayoutInput>> invalid_padded_only_input() {
  using Bad = Invalid<LayoutInput>;
  // 28 primes in [41, 173]; any 12 distinct ones multiply to more than 41^12 > 2^64.
  static const std::vector<std::int64_t> kPrimes = {41,  43,  47,  53,  59,  61,  67,  71,
                                                    73,  79,  83,  89,  97,  101, 103, 107,
                                                    109, 113, 127, 131, 137, 139, 149, 151,
                                                    157, 163, 167, 173};
  auto coprime = rc::gen::apply(
      [](std::vector<std::int64_t> picks, std::int64_t dp, std::vector<Shape> extra) {
        std::vector<Shape> shapes = std::move(extra);
        for (const std::int64_t p : picks) {
          shapes.push_back(shape_of({1, p}));
        }
        return Bad{LayoutInput{std::move(shapes), dp, 1}, "lcm of coprime row sizes overflows"};
      },
      rc::gen::container<std::vector<std::int64_t>>(
          14, rc::gen::elementOf(kPrimes)),  // duplicates possible; suchThat keeps >= 12 distinct
      dp_size(), valid_shapes(1));
  auto chunk_dp = rc::gen::apply(
      [](std::int64_t row_log2, std::int64_t extra_dp) {
        const std::int64_t row = std::int64_t{1} << row_log2;
        const std::int64_t dp = (std::int64_t{1} << (63 - row_log2)) + extra_dp;
        return Bad{LayoutInput{{shape_of({1, row})}, dp, 1}, "chunk * dp overflows"};
      },
      rc::gen::inRange<std::int64_t>(50, 62), rc::gen::inRange<std::int64_t>(0, 4));
  return rc::gen::oneOf(rc::gen::suchThat(coprime, [](const Bad& b) {
                          // keep only draws with at least 12 distinct primes (lcm > 2^64)
                          std::vector<std::int64_t> rows;
                          for (const Shape& s : b.input.shapes) {
                            if (s.ndim() == 2 && s.dim(1) >= 41) {
                              rows.push_back(s.dim(1));
                            }
                          }
                          std::sort(rows.begin(), rows.end());
                          rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
                          return rows.size() >= 12;
                        }),
                        chunk_dp);
}

// TensorAtomic inputs the builder must reject: an owner outside [0, dp), an owner count that
// differs from the tensor count, dp <= 0, and a total size beyond int64.
inline rc::Gen<Invalid<TensorAtomicInput>> invalid_tensor_atomic_input() {
  using Bad = Invalid<TensorAtomicInput>;
  const auto base = valid_tensor_atomic_input();
  auto bad_owner = rc::gen::mapcat(
      rc::gen::suchThat(base, [](const TensorAtomicInput& in) { return !in.shapes.empty(); }),
      [](TensorAtomicInput in) {
        return rc::gen::apply(
            [in](std::size_t at, std::int64_t which) {
              TensorAtomicInput out = in;
              const std::int64_t bad = which % 4 == 0   ? -1 - which
                                       : which % 4 == 1 ? in.dp
                                       : which % 4 == 2 ? in.dp + which
                                                        : std::numeric_limits<std::int64_t>::min();
              out.owners[at % out.owners.size()] = bad;
              return Bad{std::move(out), "owner outside [0, dp)"};
            },
            rc::gen::inRange<std::size_t>(0, 1000), rc::gen::inRange<std::int64_t>(0, 100));
      });
  auto bad_count = rc::gen::apply(
      [](TensorAtomicInput in, std::int64_t delta) {
        if (delta > 0 || in.owners.empty()) {
          for (std::int64_t d = 0; d < (delta > 0 ? delta : 1); ++d) {
            in.owners.push_back(0);
          }
        } else {
          const auto drop = std::min(in.owners.size(), static_cast<std::size_t>(-delta));
          in.owners.resize(in.owners.size() - drop);
        }
        return Bad{std::move(in), "owner count differs from tensor count"};
      },
      base, rc::gen::oneOf(rc::gen::inRange<std::int64_t>(-3, 0),
                           rc::gen::inRange<std::int64_t>(1, 4)));
  auto bad_dp = rc::gen::apply(
      [](std::vector<Shape> shapes, std::int64_t dp) {
        std::vector<std::int64_t> owners(shapes.size(), 0);
        return Bad{TensorAtomicInput{std::move(shapes), dp, std::move(owners)}, "dp <= 0"};
      },
      valid_shapes(1), rc::gen::inRange<std::int64_t>(-8, 1));
  auto overflow = rc::gen::apply(
      [](TensorAtomicInput in, std::int64_t copies) {
        for (std::int64_t c = 0; c < copies; ++c) {
          in.shapes.push_back(shape_of({1, internal::kPow62}));
          in.owners.push_back(c % in.dp);
        }
        return Bad{std::move(in), "total size overflows"};
      },
      base, rc::gen::inRange<std::int64_t>(2, 5));
  return rc::gen::oneOf(bad_owner, bad_count, bad_dp, overflow);
}

}  // namespace fsdp::gen

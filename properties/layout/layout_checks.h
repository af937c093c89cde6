// SPDX-License-Identifier: Apache-2.0
// Independent checks shared by the layout properties: each one recomputes an invariant from the
// layout's raw fields (never through the code under test) and returns a description of the first
// violation, or an empty string.
#pragma once

#include "core/base/checked_math.h"
#include "core/base/strings.h"
#include "core/layout/global_layout.h"
#include "core/layout/shape.h"

#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace fsdp::props {

// lcm of block * row size over all shapes (1 for none); the generators keep it in range.
inline std::int64_t chunk_of(std::span<const Shape> shapes, std::int64_t block) {
  std::int64_t chunk = 1;
  for (const Shape& s : shapes) {
    std::int64_t next = 0;
    if (!checked_lcm(chunk, block * s.row_size(), &next)) {
      RC_FAIL("test generator produced an lcm beyond int64");
    }
    chunk = next;
  }
  return chunk;
}

inline std::int64_t total_numel(std::span<const Shape> shapes) {
  std::int64_t sum = 0;
  for (const Shape& s : shapes) {
    sum += s.numel();
  }
  return sum;
}

// rank_to_offset has dp entries, starts at 0, is non-decreasing and ends at or below size;
// every tensor lies inside [0, size); non-empty tensors are pairwise disjoint.
inline std::string check_basic_layout(const GlobalLayout& layout, std::int64_t dp) {
  const auto& ro = layout.rank_to_offset();
  if (static_cast<std::int64_t>(ro.size()) != dp) {
    return str_cat("rank_to_offset has ", ro.size(), " entries; expected dp = ", dp);
  }
  if (ro[0] != 0) {
    return str_cat("rank 0 starts at ", ro[0]);
  }
  for (std::size_t k = 1; k < ro.size(); ++k) {
    if (ro[k] < ro[k - 1]) {
      return str_cat("rank ", k, " offset ", ro[k], " < rank ", k - 1, " offset ", ro[k - 1]);
    }
  }
  if (ro.back() > layout.size()) {
    return str_cat("last rank offset ", ro.back(), " > size ", layout.size());
  }
  struct Span {
    std::int64_t start;
    std::int64_t end;
    std::size_t id;
  };
  std::vector<Span> spans;
  const auto& offs = layout.tensor_to_offset();
  for (std::size_t i = 0; i < offs.size(); ++i) {
    const std::int64_t n = layout.tensor_shapes()[i].numel();
    if (offs[i] < 0 || offs[i] + n > layout.size()) {
      return str_cat("tensor ", i, " [", offs[i], ", ", offs[i] + n, ") outside [0, ",
                     layout.size(), ")");
    }
    if (n > 0) {
      spans.push_back({offs[i], offs[i] + n, i});
    }
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.start < b.start; });
  for (std::size_t j = 1; j < spans.size(); ++j) {
    if (spans[j].start < spans[j - 1].end) {
      return str_cat("tensor ", spans[j].id, " [", spans[j].start, ", ", spans[j].end,
                     ") overlaps tensor ", spans[j - 1].id, " [", spans[j - 1].start, ", ",
                     spans[j - 1].end, ")");
    }
  }
  return "";
}

// Every rank boundary b strictly inside a tensor satisfies (b - offset) % (block * row) == 0:
// no rank holds part of a row (block of rows).
inline std::string check_boundaries_on_rows(const GlobalLayout& layout, std::int64_t block) {
  const auto& ro = layout.rank_to_offset();
  const auto& offs = layout.tensor_to_offset();
  for (std::size_t i = 0; i < offs.size(); ++i) {
    const Shape& s = layout.tensor_shapes()[i];
    const std::int64_t start = offs[i];
    const std::int64_t end = start + s.numel();
    const std::int64_t align = block * s.row_size();
    // Boundaries are sorted: visit only those in (start, end).
    for (auto it = std::upper_bound(ro.begin(), ro.end(), start); it != ro.end() && *it < end;
         ++it) {
      if ((*it - start) % align != 0) {
        return str_cat("rank boundary ", *it, " splits a row of tensor ", i, " ", to_string(s),
                       " at [", start, ", ", end, ") (alignment ", align, ")");
      }
    }
  }
  return "";
}

// Runs f() and turns an escaping exception into a property failure.
template <class F>
auto no_throw(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    RC_FAIL(str_cat(what, " threw ", e.what()));
  } catch (...) {
    RC_FAIL(str_cat(what, " threw a non-std exception"));
  }
}

}  // namespace fsdp::props

// SPDX-License-Identifier: Apache-2.0
// A literal, quadratic transcription of the reference PADDED builder (fsdp-behaviour.md §2.2): plain vectors,
// a rescan of the regular list for each conjugate and of the fragment list for each gap. It is the
// oracle for the differential tests and the layout properties; never use it outside tests.
#pragma once

#include "core/base/checked_math.h"
#include "core/layout/shape.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace fsdp::testing {

// Offsets of the PADDED layout of `shapes` for dp ranks and block size `block`; *size_out (if not
// null) receives the padded size. nullopt for every input the reference rejects (dp <= 0,
// block <= 0, a 0-D shape, a zero row size, dim 0 not a multiple of block) and, since the
// reference computes in unbounded Python ints, for any value that leaves int64.
inline std::optional<std::vector<std::int64_t>> reference_row_atomic_offsets(
    std::span<const Shape> shapes, std::int64_t dp, std::int64_t block, std::int64_t* size_out) {
  // Step 1.
  if (dp <= 0 || block <= 0) {
    return std::nullopt;
  }
  // Step 2.
  const std::size_t n = shapes.size();
  std::vector<std::int64_t> numel(n);
  std::vector<std::int64_t> align(n);
  std::int64_t chunk = 1;
  for (std::size_t i = 0; i < n; ++i) {
    if (shapes[i].ndim() == 0) {
      return std::nullopt;
    }
    const std::int64_t row = shapes[i].row_size();
    if (row <= 0 || shapes[i].rows() % block != 0) {
      return std::nullopt;
    }
    if (!checked_mul(block, row, &align[i]) || !checked_lcm(chunk, align[i], &chunk)) {
      return std::nullopt;
    }
    numel[i] = shapes[i].numel();
  }
  // Step 3.
  std::vector<std::size_t> fragments;
  std::vector<std::size_t> regulars;
  for (std::size_t i = 0; i < n; ++i) {
    if (numel[i] < chunk) {
      fragments.push_back(i);
    } else {
      regulars.push_back(i);
    }
  }
  std::stable_sort(fragments.begin(), fragments.end(),
                   [&](std::size_t a, std::size_t b) { return numel[a] > numel[b]; });
  // Step 4.
  std::vector<std::int64_t> offset(n, 0);
  std::int64_t next = 0;
  while (!regulars.empty()) {
    const std::size_t t = regulars.front();
    regulars.erase(regulars.begin());
    offset[t] = next;
    if (numel[t] % chunk == 0) {
      if (!checked_add(next, numel[t], &next)) {
        return std::nullopt;
      }
      continue;
    }
    std::int64_t gap_start = 0;
    std::int64_t padded = 0;
    if (!checked_add(next, numel[t], &gap_start) || !checked_pad(numel[t], chunk, &padded) ||
        !checked_add(next, padded, &next)) {
      return std::nullopt;
    }
    std::int64_t gap_end = next;
    const std::int64_t rem = numel[t] % chunk;
    for (auto it = regulars.begin(); it != regulars.end(); ++it) {
      const std::size_t c = *it;
      const std::int64_t rc = numel[c] % chunk;
      if (rc != 0 && rem + rc <= chunk) {
        regulars.erase(it);
        offset[c] = next - rc;
        gap_end = offset[c];
        if (!checked_add(next, (numel[c] / chunk) * chunk, &next)) {
          return std::nullopt;
        }
        break;
      }
    }
    for (auto it = fragments.begin(); it != fragments.end();) {
      const std::size_t f = *it;
      std::int64_t a = 0;
      std::int64_t f_end = 0;
      if (checked_pad(gap_start, align[f], &a) && checked_add(a, numel[f], &f_end) &&
          f_end <= gap_end) {
        offset[f] = a;
        gap_start = f_end;
        it = fragments.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Step 5.
  for (const std::size_t f : fragments) {
    if (!checked_pad(next, align[f], &next)) {
      return std::nullopt;
    }
    offset[f] = next;
    if (!checked_add(next, numel[f], &next)) {
      return std::nullopt;
    }
  }
  // Step 6.
  std::int64_t unit = 0;
  std::int64_t size = 0;
  if (!checked_mul(chunk, dp, &unit) || !checked_pad(next, unit, &size)) {
    return std::nullopt;
  }
  if (size_out != nullptr) {
    *size_out = size;
  }
  return offset;
}

}  // namespace fsdp::testing

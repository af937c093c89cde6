// SPDX-License-Identifier: Apache-2.0
// Small helpers for the layout tests: shape literals and per-rank row/element counts.
#pragma once

#include "core/layout/global_layout.h"
#include "core/layout/shape.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace fsdp::testing {

inline Shape shape(std::initializer_list<std::int64_t> dims) {
  return Shape::make(dims).value();
}

inline std::vector<Shape> shapes(std::initializer_list<std::initializer_list<std::int64_t>> list) {
  std::vector<Shape> out;
  for (const auto& dims : list) {
    out.push_back(shape(dims));
  }
  return out;
}

// elements[k][i]: elements of tensor i inside rank segment k.
inline std::vector<std::vector<std::int64_t>> elements_per_rank(const GlobalLayout& layout) {
  std::vector<std::vector<std::int64_t>> out;
  for (std::int64_t k = 0; k < layout.dp_size(); ++k) {
    const std::int64_t seg_start = layout.rank_to_offset()[static_cast<std::size_t>(k)];
    const std::int64_t seg_end = seg_start + layout.rank_size(k);
    std::vector<std::int64_t> row;
    for (std::int64_t i = 0; i < layout.num_tensors(); ++i) {
      const Range r = layout.get_tensor_range(i);
      const std::int64_t lo = std::max(r.start, seg_start);
      const std::int64_t hi = std::min(r.end(), seg_end);
      row.push_back(hi > lo ? hi - lo : 0);
    }
    out.push_back(row);
  }
  return out;
}

// rows[k][i]: rows of tensor i inside rank segment k (elements / row size).
inline std::vector<std::vector<std::int64_t>> rows_per_rank(const GlobalLayout& layout) {
  auto out = elements_per_rank(layout);
  for (auto& row : out) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      row[i] /= layout.tensor_shapes()[i].row_size();
    }
  }
  return out;
}

// Checks that `result` is an error with `code` whose message contains every one of `parts`.
template <class T>
::testing::AssertionResult is_error(const Expected<T>& result, ErrorCode code,
                                    std::initializer_list<std::string_view> parts) {
  if (result.has_value()) {
    return ::testing::AssertionFailure() << "expected an error, got a value";
  }
  const Error& e = result.error();
  if (e.code() != code) {
    return ::testing::AssertionFailure() << "expected code " << to_string(code) << ", got "
                                         << to_string(e.code()) << ": " << e.message();
  }
  for (const std::string_view part : parts) {
    if (e.message().find(part) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message '" << e.message() << "' lacks '" << part << "'";
    }
  }
  return ::testing::AssertionSuccess() << e.message();
}

}  // namespace fsdp::testing

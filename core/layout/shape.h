// SPDX-License-Identifier: Apache-2.0
// Shape: a tensor's logical dims (each >= 0, at most kMaxDims), with numel checked against int64
// overflow at construction. Row size = product of dims 1.. (1 for a 1-D tensor); 0-D shapes exist
// as values but every row-based builder rejects them.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>

#include "core/base/expected.h"

namespace fsdp {

class Shape {
 public:
  static constexpr int kMaxDims = 8;

  // Validating factory: every dim >= 0, ndim <= kMaxDims, numel fits int64.
  static Expected<Shape> make(std::span<const std::int64_t> dims);
  static Expected<Shape> make(std::initializer_list<std::int64_t> dims) {
    return make(std::span<const std::int64_t>(dims.begin(), dims.size()));
  }

  Shape() = default;  // 0-D shape, numel 1

  int ndim() const { return ndim_; }
  std::int64_t dim(int i) const { return dims_[static_cast<std::size_t>(i)]; }
  std::span<const std::int64_t> dims() const {
    return {dims_.data(), static_cast<std::size_t>(ndim_)};
  }
  std::int64_t numel() const { return numel_; }
  // Rows = dim 0; row size = product of dims 1..; both FSDP_CHECK ndim() >= 1.
  std::int64_t rows() const;
  std::int64_t row_size() const;

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.ndim_ != b.ndim_) {
      return false;
    }
    for (int i = 0; i < a.ndim_; ++i) {
      if (a.dims_[static_cast<std::size_t>(i)] != b.dims_[static_cast<std::size_t>(i)]) {
        return false;
      }
    }
    return true;
  }

 private:
  std::array<std::int64_t, kMaxDims> dims_{};
  std::int64_t numel_ = 1;
  std::int64_t row_size_ = 1;
  int ndim_ = 0;
};

// "(2, 6)"; "()" for 0-D; "(18,)" for 1-D (as torch.Size prints).
std::string to_string(const Shape& shape);
std::ostream& operator<<(std::ostream& os, const Shape& shape);

// Parses "2x6", "18", "4x0" (x-separated dims); errors name the text.
Expected<Shape> parse_shape(std::string_view text);

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
#include "core/layout/shape.h"

#include <algorithm>
#include <charconv>
#include <sstream>
#include <vector>

#include "core/base/checked_math.h"
#include "core/base/strings.h"

namespace fsdp {

Expected<Shape> Shape::make(std::span<const std::int64_t> dims) {
  if (dims.size() > static_cast<std::size_t>(kMaxDims)) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("shape has ", dims.size(), " dims; expected at most ", kMaxDims));
  }
  std::int64_t numel = 1;
  std::int64_t row = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("shape dim ", i, " is ", dims[i], "; expected a size >= 0"));
    }
    if (i > 0 && !checked_mul(row, dims[i], &row)) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("shape row size overflows int64 at dim ", i, " (size ", dims[i], ")"));
    }
  }
  // numel = rows * row_size; with a zero dim anywhere numel is 0 even if the rest overflows.
  if (!dims.empty()) {
    bool any_zero = false;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      any_zero = any_zero || dims[i] == 0;
    }
    if (any_zero) {
      numel = 0;
    } else if (!checked_mul(dims[0], row, &numel)) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("shape numel overflows int64: ", dims[0], " rows of ", row,
                           " elements; expected at most ", INT64_MAX, " elements"));
    }
  }
  Shape s;
  s.numel_ = numel;
  s.ndim_ = static_cast<int>(dims.size());
  if (s.is_inline()) {
    for (std::size_t i = 0; i < dims.size(); ++i) {
      s.inline_[i] = dims[i];
    }
  } else {
    s.heap_ = new std::int64_t[dims.size() + 1];
    std::copy(dims.begin(), dims.end(), s.heap_);
    s.heap_[dims.size()] = row;
  }
  return s;
}

void Shape::copy_from(const Shape& other) {
  if (other.is_inline()) {
    copy_inline_from(other);
    return;
  }
  numel_ = other.numel_;
  ndim_ = other.ndim_;
  const auto n = static_cast<std::size_t>(ndim_) + 1;  // dims, then the row size
  heap_ = new std::int64_t[n];
  std::copy(other.heap_, other.heap_ + n, heap_);
}

std::int64_t Shape::rows() const {
  FSDP_CHECK(ndim_ >= 1) << "rows() of a 0-D shape";
  return data()[0];
}

std::int64_t Shape::row_size() const {
  FSDP_CHECK(ndim_ >= 1) << "row_size() of a 0-D shape";
  if (is_inline()) {
    return ndim_ == 2 ? inline_[1] : 1;
  }
  return heap_[ndim_];
}

std::string to_string(const Shape& shape) {
  std::ostringstream os;
  os << '(';
  for (int i = 0; i < shape.ndim(); ++i) {
    if (i > 0) {
      os << ", ";
    }
    os << shape.dim(i);
  }
  if (shape.ndim() == 1) {
    os << ',';
  }
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << to_string(shape); }

Expected<Shape> parse_shape(std::string_view text) {
  std::vector<std::int64_t> dims;
  if (text.empty()) {
    return Error(ErrorCode::kInvalidArgument,
                 "shape '' is empty; expected dims separated by 'x', e.g. '4096x14336'");
  }
  std::size_t pos = 0;
  while (true) {
    const std::size_t sep = text.find_first_of("xX", pos);
    const std::string_view part =
        text.substr(pos, sep == std::string_view::npos ? std::string_view::npos : sep - pos);
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size()) {
      const char* why = ec == std::errc::result_out_of_range ? " (beyond int64)" : "";
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("shape '", text, "' has dim '", part, "'", why,
                           "; expected a non-negative integer"));
    }
    dims.push_back(v);
    if (sep == std::string_view::npos) {
      break;
    }
    pos = sep + 1;
  }
  auto shape = Shape::make(dims);
  if (!shape) {
    return shape.error().with_context(str_cat("shape '", text, "'"));
  }
  return shape;
}

}  // namespace fsdp

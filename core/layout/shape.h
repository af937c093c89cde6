// SPDX-License-Identifier: Apache-2.0
// Shape: a tensor's logical dims (each >= 0, at most kMaxDims), with numel checked against int64
// overflow at construction. Row size = product of dims 1.. (1 for a 1-D tensor); 0-D shapes exist
// as values but every row-based builder rejects them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>

#include "core/base/expected.h"

namespace fsdp {

// A value type of 32 bytes: layouts hold one Shape per tensor, millions of them, so the common
// 0-, 1- and 2-D shapes keep their dims inline and only 3-D and larger ones own a heap array
// (copied on copy). dims() points into the Shape and is valid while it lives unchanged.
class Shape {
 public:
  static constexpr int kMaxDims = 8;

  // Validating factory: every dim >= 0, ndim <= kMaxDims, numel fits int64.
  static Expected<Shape> make(std::span<const std::int64_t> dims);
  static Expected<Shape> make(std::initializer_list<std::int64_t> dims) {
    return make(std::span<const std::int64_t>(dims.begin(), dims.size()));
  }

  Shape() = default;  // 0-D shape, numel 1
  Shape(const Shape& other) { copy_from(other); }
  Shape(Shape&& other) noexcept { steal_from(other); }
  Shape& operator=(const Shape& other) {
    if (this != &other) {
      Shape copy(other);
      release();
      steal_from(copy);
    }
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) {
      release();
      steal_from(other);
    }
    return *this;
  }
  ~Shape() { release(); }

  int ndim() const { return ndim_; }
  // Requires 0 <= i < ndim().
  std::int64_t dim(int i) const { return data()[i]; }
  std::span<const std::int64_t> dims() const {
    return {data(), static_cast<std::size_t>(ndim_)};
  }
  std::int64_t numel() const { return numel_; }
  // Rows = dim 0; row size = product of dims 1..; both FSDP_CHECK ndim() >= 1.
  std::int64_t rows() const;
  std::int64_t row_size() const;

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.ndim_ != b.ndim_) {
      return false;
    }
    const std::int64_t* ad = a.data();
    const std::int64_t* bd = b.data();
    for (int i = 0; i < a.ndim_; ++i) {
      if (ad[i] != bd[i]) {
        return false;
      }
    }
    return true;
  }

 private:
  static constexpr int kInlineDims = 2;

  bool is_inline() const { return ndim_ <= kInlineDims; }
  const std::int64_t* data() const { return is_inline() ? inline_ : heap_; }
  // Heap shapes: dims[0..ndim) then the row size.
  void copy_from(const Shape& other);
  // Inline shapes copy as plain values (moving is copying).
  void copy_inline_from(const Shape& other) noexcept {
    numel_ = other.numel_;
    ndim_ = other.ndim_;
    inline_[0] = other.inline_[0];
    inline_[1] = other.inline_[1];
  }
  void steal_from(Shape& other) noexcept {
    if (other.is_inline()) {
      copy_inline_from(other);
      return;
    }
    numel_ = other.numel_;
    ndim_ = other.ndim_;
    heap_ = other.heap_;
    other.ndim_ = 0;  // moved-from: the 0-D shape
    other.numel_ = 1;
    other.inline_[0] = 0;
    other.inline_[1] = 0;
  }
  void release() noexcept {
    if (!is_inline()) {
      delete[] heap_;
    }
  }

  std::int64_t numel_ = 1;
  union {
    std::int64_t inline_[kInlineDims] = {0, 0};
    std::int64_t* heap_;
  };
  int ndim_ = 0;
};

static_assert(sizeof(Shape) == 32, "Shape is stored once per tensor; keep it compact");

// "(2, 6)"; "()" for 0-D; "(18,)" for 1-D (as torch.Size prints).
std::string to_string(const Shape& shape);
std::ostream& operator<<(std::ostream& os, const Shape& shape);

// Parses "2x6", "18", "4x0" (x-separated dims); errors name the text.
Expected<Shape> parse_shape(std::string_view text);

}  // namespace fsdp

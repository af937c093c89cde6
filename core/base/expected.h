// SPDX-License-Identifier: Apache-2.0
// Expected<T>: a value or an Error, a subset of C++23 std::expected. Status is Expected<void>.
// Accessing the value of an error (or the error of a value) is an internal error (FSDP_CHECK).
#pragma once

#include <utility>
#include <variant>

#include "core/base/check.h"
#include "core/base/error.h"

namespace fsdp {

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  Expected(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & {
    FSDP_CHECK(has_value()) << "value() of an error: " << std::get<1>(v_).message();
    return std::get<0>(v_);
  }
  const T& value() const& {
    FSDP_CHECK(has_value()) << "value() of an error: " << std::get<1>(v_).message();
    return std::get<0>(v_);
  }
  T&& value() && {
    FSDP_CHECK(has_value()) << "value() of an error: " << std::get<1>(v_).message();
    return std::get<0>(std::move(v_));
  }
  const Error& error() const {
    FSDP_CHECK(!has_value()) << "error() of a value";
    return std::get<1>(v_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit

  bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  bool ok() const { return ok_; }
  const Error& error() const {
    FSDP_CHECK(!ok_) << "error() of an ok status";
    return error_;
  }

 private:
  Error error_{ErrorCode::kInternal, ""};
  bool ok_ = true;
};

using Status = Expected<void>;

inline Status ok_status() { return Status(); }

}  // namespace fsdp

#define FSDP_INTERNAL_CONCAT2(a, b) a##b
#define FSDP_INTERNAL_CONCAT(a, b) FSDP_INTERNAL_CONCAT2(a, b)

// FSDP_TRY(lhs, expr): evaluates expr (an Expected<T>); on error returns the error from the
// enclosing function, else moves the value into lhs (which may be a declaration).
#define FSDP_TRY(lhs, expr) FSDP_INTERNAL_TRY(FSDP_INTERNAL_CONCAT(fsdp_try_, __LINE__), lhs, expr)
#define FSDP_INTERNAL_TRY(tmp, lhs, expr) \
  auto tmp = (expr);                      \
  if (!tmp.has_value()) {                 \
    return tmp.error();                   \
  }                                       \
  lhs = std::move(tmp).value()

// FSDP_RETURN_IF_ERROR(expr): expr is a Status; returns its error if any.
#define FSDP_RETURN_IF_ERROR(expr)                                           \
  do {                                                                       \
    auto fsdp_status_ = (expr);                                              \
    if (!fsdp_status_.has_value()) {                                         \
      return fsdp_status_.error();                                           \
    }                                                                        \
  } while (false)

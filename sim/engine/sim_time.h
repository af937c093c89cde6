// SPDX-License-Identifier: Apache-2.0
// SimTime and SimDuration: simulated time as strong types over int64 picoseconds (the ns-3
// approach with a fixed resolution; 2^63 ps is about 106 days). Integer time keeps every run
// reproducible bit for bit; conversions from rates round up exactly once, at the cost models.
#pragma once

#include <compare>
#include <cstdint>

namespace fsdp::sim {

class SimDuration {
 public:
  constexpr SimDuration() = default;
  static constexpr SimDuration ps(std::int64_t v) { return SimDuration(v); }
  static constexpr SimDuration ns(std::int64_t v) { return SimDuration(v * 1000); }
  constexpr std::int64_t ps() const { return ps_; }
  double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  double ms() const { return static_cast<double>(ps_) * 1e-9; }
  double us() const { return static_cast<double>(ps_) * 1e-6; }
  constexpr SimDuration& operator+=(SimDuration d) {
    ps_ += d.ps_;
    return *this;
  }
  constexpr SimDuration& operator-=(SimDuration d) {
    ps_ -= d.ps_;
    return *this;
  }
  friend constexpr SimDuration operator+(SimDuration a, SimDuration b) { return a += b; }
  friend constexpr SimDuration operator-(SimDuration a, SimDuration b) { return a -= b; }
  friend constexpr auto operator<=>(SimDuration, SimDuration) = default;

 private:
  constexpr explicit SimDuration(std::int64_t v) : ps_(v) {}
  std::int64_t ps_ = 0;
};

class SimTime {
 public:
  constexpr SimTime() = default;
  static constexpr SimTime ps(std::int64_t v) { return SimTime(v); }
  static constexpr SimTime zero() { return SimTime(0); }
  constexpr std::int64_t ps() const { return ps_; }
  double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  double ms() const { return static_cast<double>(ps_) * 1e-9; }
  double us() const { return static_cast<double>(ps_) * 1e-6; }
  friend constexpr SimTime operator+(SimTime t, SimDuration d) { return SimTime(t.ps_ + d.ps()); }
  friend constexpr SimDuration operator-(SimTime a, SimTime b) {
    return SimDuration::ps(a.ps_ - b.ps_);
  }
  friend constexpr auto operator<=>(SimTime, SimTime) = default;

 private:
  constexpr explicit SimTime(std::int64_t v) : ps_(v) {}
  std::int64_t ps_ = 0;
};

}  // namespace fsdp::sim

// SPDX-License-Identifier: Apache-2.0
// SchedulePolicy: the prefetch and stream policy of a run (fsdp-behaviour.md §4.8, §4.9). Each direction has a
// PrefetchPolicy: no prefetch, the next k units in the order (the reference default is k = 1,
// forward_prefetch_size=None), or an element budget (forward_prefetch_size=k > 0). Immutable
// values; the defaults are the reference's defaults and every other value comes from a
// validating factory.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/expected.h"

namespace fsdp {

enum class PrefetchMode : std::uint8_t { kNone, kNextUnits, kElementBudget };

class PrefetchPolicy {
 public:
  // next_units(1): the reference default (prefetch size None).
  PrefetchPolicy() = default;

  static PrefetchPolicy none() { return PrefetchPolicy(PrefetchMode::kNone, 0); }
  // Prefetch the next `count` units of the order. Error (kInvalidArgument) for count < 1.
  static Expected<PrefetchPolicy> next_units(std::int64_t count);
  // §4.8 budget: walk the successors, prefetching each, until the running total of their
  // unsharded parameter elements reaches `elements` (the unit that reaches it is still
  // prefetched). Error (kInvalidArgument) for elements < 1 (0 means none(); say so).
  static Expected<PrefetchPolicy> element_budget(std::int64_t elements);
  // The reference's forward_/backward_prefetch_size: nullopt -> next_units(1), 0 -> none(),
  // k > 0 -> element_budget(k); negative -> kInvalidArgument, as the reference's ValueError.
  static Expected<PrefetchPolicy> from_prefetch_size(std::optional<std::int64_t> size);

  PrefetchMode mode() const { return mode_; }
  // Units for kNextUnits, elements for kElementBudget, 0 for kNone.
  std::int64_t amount() const { return amount_; }

  friend bool operator==(const PrefetchPolicy&, const PrefetchPolicy&) = default;

 private:
  PrefetchPolicy(PrefetchMode mode, std::int64_t amount) : mode_(mode), amount_(amount) {}
  PrefetchMode mode_ = PrefetchMode::kNextUnits;
  std::int64_t amount_ = 1;
};

// "none", "next(1)", "budget(1048576)".
std::string to_string(const PrefetchPolicy& policy);
std::ostream& operator<<(std::ostream& os, const PrefetchPolicy& policy);
// Reads the to_string forms, "next" (= next(1)), and a bare integer with the reference's
// prefetch-size meaning (0 -> none, k > 0 -> budget(k)).
Expected<PrefetchPolicy> parse_prefetch_policy(std::string_view text);

// The positions in an order (forward_order or backward_order, repeated occurrences kept) whose
// units are prefetched right after the demand gather of the unit at `position`:
// unit_elements[i] is the unsharded parameter-element count of the unit at position i. Only
// later positions are candidates; the list is in order and stops at the end of the order. kNone
// gives nothing; kNextUnits(k) the next k positions; kElementBudget(b) successive positions
// while the running total before each is < b (a saturating sum). Errors: position outside
// [0, size) (kOutOfRange); a negative element count (kInvalidArgument).
// §4.8 vector: order [A,B,A,C], one element each, budget 2 -> A@0:[B,A], B:[A,C], A@2:[C], C:[].
Expected<std::vector<std::int64_t>> prefetch_targets(const PrefetchPolicy& policy,
                                                     std::span<const std::int64_t> unit_elements,
                                                     std::int64_t position);

// The two halves of prefetch_targets, for a caller that asks for every position of one order
// (the schedule builder): check the counts once, O(units), then each call costs only its
// targets (issue 16: a check per call made 10^5 units quadratic). The second requires counts
// that passed the first and a position in [0, size).
Status check_prefetch_elements(std::span<const std::int64_t> unit_elements);
std::vector<std::int64_t> prefetch_targets_of_checked(const PrefetchPolicy& policy,
                                                      std::span<const std::int64_t> unit_elements,
                                                      std::int64_t position);

class SchedulePolicy {
 public:
  // Reference defaults: next(1) both ways, no cap on in-flight all-gathers, separate all-gather
  // and reduce-scatter streams.
  SchedulePolicy() = default;

  // max_inflight_all_gathers: how many units may hold an issued all-gather whose unsharded
  // storage is not yet released, 0 = unlimited (a project knob, not in the reference; demand
  // gathers are never held back, only prefetches). Error (kInvalidArgument) when negative.
  // unify_communication_stream: all-gathers and reduce-scatters share one stream (§4.9; the
  // reference keeps it on FsdpContext).
  static Expected<SchedulePolicy> make(PrefetchPolicy forward, PrefetchPolicy backward,
                                       std::int64_t max_inflight_all_gathers,
                                       bool unify_communication_stream);

  const PrefetchPolicy& forward_prefetch() const { return forward_; }
  const PrefetchPolicy& backward_prefetch() const { return backward_; }
  std::int64_t max_inflight_all_gathers() const { return max_inflight_all_gathers_; }
  bool unify_communication_stream() const { return unify_communication_stream_; }

  friend bool operator==(const SchedulePolicy&, const SchedulePolicy&) = default;

 private:
  PrefetchPolicy forward_;
  PrefetchPolicy backward_;
  std::int64_t max_inflight_all_gathers_ = 0;
  bool unify_communication_stream_ = false;
};

// "forward=next(1) backward=budget(64) max_inflight_all_gathers=unlimited streams=separate".
std::string to_string(const SchedulePolicy& policy);
std::ostream& operator<<(std::ostream& os, const SchedulePolicy& policy);

}  // namespace fsdp

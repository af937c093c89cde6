// SPDX-License-Identifier: Apache-2.0
#include "core/policy/schedule_policy.h"

#include <cctype>
#include <charconv>

#include "core/base/checked_math.h"
#include "core/base/strings.h"

namespace fsdp {

namespace {

Error invalid(std::string message) {
  return Error(ErrorCode::kInvalidArgument, std::move(message));
}

bool parse_int(std::string_view text, std::int64_t* out) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return !text.empty() && ec == std::errc() && ptr == end;
}

}  // namespace

Expected<PrefetchPolicy> PrefetchPolicy::next_units(std::int64_t count) {
  if (count < 1) {
    return invalid(str_cat("prefetch unit count must be >= 1, got ", count,
                           " (use none() for no prefetch)"));
  }
  return PrefetchPolicy(PrefetchMode::kNextUnits, count);
}

Expected<PrefetchPolicy> PrefetchPolicy::element_budget(std::int64_t elements) {
  if (elements < 1) {
    return invalid(str_cat("prefetch element budget must be >= 1, got ", elements,
                           " (use none() for no prefetch)"));
  }
  return PrefetchPolicy(PrefetchMode::kElementBudget, elements);
}

Expected<PrefetchPolicy> PrefetchPolicy::from_prefetch_size(std::optional<std::int64_t> size) {
  if (!size) {
    return PrefetchPolicy();
  }
  if (*size < 0) {
    return invalid(str_cat("prefetch size must be >= 0 (0 = none) or unset, got ", *size));
  }
  if (*size == 0) {
    return none();
  }
  return element_budget(*size);
}

std::string to_string(const PrefetchPolicy& policy) {
  switch (policy.mode()) {
    case PrefetchMode::kNone:
      return "none";
    case PrefetchMode::kNextUnits:
      return str_cat("next(", policy.amount(), ")");
    case PrefetchMode::kElementBudget:
      return str_cat("budget(", policy.amount(), ")");
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, const PrefetchPolicy& policy) {
  return os << to_string(policy);
}

Expected<PrefetchPolicy> parse_prefetch_policy(std::string_view text) {
  const std::string_view item = trim(text);
  std::int64_t value = 0;
  if (parse_int(item, &value)) {
    return PrefetchPolicy::from_prefetch_size(value);
  }
  if (item == "none") {
    return PrefetchPolicy::none();
  }
  if (item == "next") {
    return PrefetchPolicy();
  }
  const auto with_arg = [&](std::string_view prefix, std::int64_t* out) {
    return item.size() > prefix.size() + 1 && item.substr(0, prefix.size()) == prefix &&
           item[prefix.size()] == '(' && item.back() == ')' &&
           parse_int(trim(item.substr(prefix.size() + 1, item.size() - prefix.size() - 2)), out);
  };
  if (with_arg("next", &value)) {
    return PrefetchPolicy::next_units(value);
  }
  if (with_arg("budget", &value)) {
    return PrefetchPolicy::element_budget(value);
  }
  return invalid(str_cat("prefetch policy '", item,
                         "' is unknown; expected none, next, next(k), budget(elements) or an "
                         "integer prefetch size"));
}

Status check_prefetch_elements(std::span<const std::int64_t> unit_elements) {
  for (std::size_t i = 0; i < unit_elements.size(); ++i) {
    if (unit_elements[i] < 0) {
      return invalid(str_cat("unit at order position ", i, " has ", unit_elements[i],
                             " elements; expected >= 0"));
    }
  }
  return ok_status();
}

std::vector<std::int64_t> prefetch_targets_of_checked(const PrefetchPolicy& policy,
                                                      std::span<const std::int64_t> unit_elements,
                                                      std::int64_t position) {
  const auto size = static_cast<std::int64_t>(unit_elements.size());
  std::vector<std::int64_t> targets;
  switch (policy.mode()) {
    case PrefetchMode::kNone:
      break;
    case PrefetchMode::kNextUnits:
      for (std::int64_t i = position + 1; i < size && i - position <= policy.amount(); ++i) {
        targets.push_back(i);
      }
      break;
    case PrefetchMode::kElementBudget: {
      std::int64_t total = 0;
      for (std::int64_t i = position + 1; i < size && total < policy.amount(); ++i) {
        targets.push_back(i);
        if (!checked_add(total, unit_elements[static_cast<std::size_t>(i)], &total)) {
          break;  // the sum passed int64, so it passed the budget too
        }
      }
      break;
    }
  }
  return targets;
}

Expected<std::vector<std::int64_t>> prefetch_targets(const PrefetchPolicy& policy,
                                                     std::span<const std::int64_t> unit_elements,
                                                     std::int64_t position) {
  const auto size = static_cast<std::int64_t>(unit_elements.size());
  if (position < 0 || position >= size) {
    return Error(ErrorCode::kOutOfRange, str_cat("prefetch position ", position,
                                                 " is outside an order of ", size,
                                                 " units: expected [0, ", size, ")"));
  }
  FSDP_RETURN_IF_ERROR(check_prefetch_elements(unit_elements));
  return prefetch_targets_of_checked(policy, unit_elements, position);
}

Expected<SchedulePolicy> SchedulePolicy::make(PrefetchPolicy forward, PrefetchPolicy backward,
                                              std::int64_t max_inflight_all_gathers,
                                              bool unify_communication_stream) {
  if (max_inflight_all_gathers < 0) {
    return invalid(str_cat("max in-flight all-gathers must be >= 0 (0 = unlimited), got ",
                           max_inflight_all_gathers));
  }
  SchedulePolicy out;
  out.forward_ = forward;
  out.backward_ = backward;
  out.max_inflight_all_gathers_ = max_inflight_all_gathers;
  out.unify_communication_stream_ = unify_communication_stream;
  return out;
}

std::string to_string(const SchedulePolicy& policy) {
  const std::int64_t cap = policy.max_inflight_all_gathers();
  return str_cat("forward=", to_string(policy.forward_prefetch()),
                 " backward=", to_string(policy.backward_prefetch()),
                 " max_inflight_all_gathers=", cap == 0 ? std::string("unlimited") : str_cat(cap),
                 " streams=", policy.unify_communication_stream() ? "unified" : "separate");
}

std::ostream& operator<<(std::ostream& os, const SchedulePolicy& policy) {
  return os << to_string(policy);
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
#include "sim/engine/straggler.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include "core/base/strings.h"

namespace fsdp::sim {
namespace {

template <class T>
Expected<T> parse_number(std::string_view item, std::string_view value) {
  T v{};
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc() || ptr != end || value.empty()) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("straggler item '", item, "' has a malformed number '", value, "'"));
  }
  return v;
}

}  // namespace

Expected<Straggler> parse_straggler(std::string_view text) {
  Straggler s;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = trim(text.substr(pos, comma - pos));
    pos = comma + 1;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("straggler item '", item,
                           "' is not key=value; expected rank=R, fraction=F, compute=X or link=Y"));
    }
    const std::string_view key = trim(item.substr(0, eq));
    const std::string_view value = trim(item.substr(eq + 1));
    if (key == "rank") {
      FSDP_TRY(std::int64_t r, parse_number<std::int64_t>(item, value));
      s.ranks.push_back(r);
    } else if (key == "fraction") {
      FSDP_TRY(s.fraction, parse_number<double>(item, value));
      if (!(s.fraction > 0.0 && s.fraction <= 1.0)) {
        return Error(ErrorCode::kInvalidArgument,
                     str_cat("straggler fraction is ", value, "; expected a value in (0, 1]"));
      }
    } else if (key == "compute" || key == "link") {
      FSDP_TRY(double f, parse_number<double>(item, value));
      if (!(f >= 1.0) || !std::isfinite(f)) {
        return Error(ErrorCode::kInvalidArgument,
                     str_cat("straggler ", key, " factor is ", value, "; expected a finite value >= 1"));
      }
      (key == "compute" ? s.compute_factor : s.link_factor) = f;
    } else {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("straggler item '", item,
                           "' has an unknown key; expected rank, fraction, compute or link"));
    }
  }
  if (s.ranks.empty() == (s.fraction == 0.0)) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("straggler '", text, "' names ",
                         s.ranks.empty() ? "neither ranks nor a fraction" : "both ranks and a fraction",
                         "; expected rank=R (repeatable) or fraction=F"));
  }
  if (s.compute_factor == 1.0 && s.link_factor == 1.0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("straggler '", text,
                         "' slows nothing; expected compute=X or link=Y with a factor > 1"));
  }
  return s;
}

Expected<std::vector<char>> straggler_flags(const Straggler& straggler, std::int64_t num_ranks) {
  std::vector<char> flags(static_cast<std::size_t>(num_ranks), 0);
  for (std::int64_t r : straggler.ranks) {
    if (r < 0 || r >= num_ranks) {
      return Error(ErrorCode::kOutOfRange, str_cat("straggler rank ", r, " is outside the mesh [0, ",
                                                   num_ranks, ")"));
    }
    flags[static_cast<std::size_t>(r)] = 1;
  }
  if (straggler.fraction > 0.0) {
    const std::int64_t count = std::min(
        num_ranks,
        static_cast<std::int64_t>(std::ceil(straggler.fraction * static_cast<double>(num_ranks))));
    for (std::int64_t i = 0; i < count; ++i) {
      flags[static_cast<std::size_t>(i * num_ranks / count)] = 1;
    }
  }
  return flags;
}

std::string to_string(const Straggler& straggler) {
  if (!straggler.active()) {
    return "none";
  }
  std::ostringstream os;
  const char* sep = "";
  for (std::int64_t r : straggler.ranks) {
    os << sep << "rank=" << r;
    sep = ",";
  }
  if (straggler.fraction > 0.0) {
    os << sep << "fraction=" << straggler.fraction;
    sep = ",";
  }
  if (straggler.compute_factor != 1.0) {
    os << sep << "compute=" << straggler.compute_factor;
  }
  if (straggler.link_factor != 1.0) {
    os << sep << "link=" << straggler.link_factor;
  }
  return os.str();
}

}  // namespace fsdp::sim

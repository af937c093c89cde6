// SPDX-License-Identifier: Apache-2.0
// The text forms of `fsdpsim sweep` around the engine (sweep/sweep.h): --prefetch list items in;
// the sorted table and the report JSON out.
#include "cli/sweep_format.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/base/number_text.h"
#include "core/base/strings.h"
#include "core/mesh/placements.h"

namespace fsdp::cli {
namespace {

using sweep::SweepOutcome;
using sweep::SweepPoint;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string fixed(double v, int digits) { return fixed_text(v, digits); }
std::string sig3(double v) { return significant_text(v, 3); }

// Left- or right-aligned in `width` characters (longer text is kept whole).
std::string pad(std::string_view s, std::size_t width, bool right = false) {
  if (s.size() >= width) {
    return std::string(s);
  }
  const std::string fill(width - s.size(), ' ');
  return right ? fill + std::string(s) : std::string(s) + fill;
}

double step_ms(const SweepOutcome& o) { return static_cast<double>(o.step_time_ps) * 1e-9; }

}  // namespace

Expected<PrefetchPolicy> parse_sweep_prefetch(std::string_view text) {
  const std::string_view t = trim(text);
  if (!t.empty() && t.find_first_not_of("0123456789") == std::string_view::npos) {
    if (t.size() > 6) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("prefetch depth '", t, "' is too large; expected at most 999999"));
    }
    const std::int64_t depth = std::stoll(std::string(t));
    if (depth == 0) {
      return PrefetchPolicy::none();
    }
    return PrefetchPolicy::next_units(depth);
  }
  return parse_prefetch_policy(t);
}

namespace {

std::vector<std::size_t> sorted_rows(const SweepReport& r, SweepSort sort, bool front_only) {
  const auto& outcomes = *r.outcomes;
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i].error.empty() && (!front_only || outcomes[i].pareto)) {
      rows.push_back(i);
    }
  }
  auto by_time = [&](std::size_t a, std::size_t b) {
    return sweep::higher_throughput(outcomes[a], outcomes[b]);
  };
  auto by_memory = [&](std::size_t a, std::size_t b) {
    return outcomes[a].peak_reserved_bytes < outcomes[b].peak_reserved_bytes;
  };
  if (sort == SweepSort::kThroughput) {
    std::stable_sort(rows.begin(), rows.end(), [&](std::size_t a, std::size_t b) {
      if (outcomes[a].fits != outcomes[b].fits) {
        return outcomes[a].fits;
      }
      return by_time(a, b) || (!by_time(b, a) && by_memory(a, b));
    });
  } else if (sort == SweepSort::kMemory) {
    std::stable_sort(rows.begin(), rows.end(), [&](std::size_t a, std::size_t b) {
      return by_memory(a, b) || (!by_memory(b, a) && by_time(a, b));
    });
  }
  return rows;
}

std::string streams_name(bool unified) { return unified ? "unified" : "separate"; }

// The point's recompute policy; "base" for a point that keeps the base configuration's (the
// command always gives every point one).
std::string recompute_name(const SweepPoint& p) {
  return p.recompute.has_value() ? to_string(*p.recompute) : "base";
}

}  // namespace

std::string render_sweep_text(const SweepReport& r, SweepSort sort, bool front_only) {
  const auto& points = *r.points;
  const auto& outcomes = *r.outcomes;
  std::ostringstream os;
  os << "sweep: " << r.model << " on " << r.ranks << " ranks of " << r.hardware->name() << " ("
     << fixed(static_cast<double>(r.hardware->memory_bytes()) / kGiB, 1)
     << " GiB per device); each data rank's microbatch is " << r.tokens_per_microbatch
     << " tokens (seq-len x micro-batch-size), a tensor-parallel group's ranks share one\n";
  os << "ranked by tokens/s/GPU (the global batch over the step time and every GPU; TFLOP/s and "
        "MFU by torchtitan's FLOP count, docs/metrics.md)\n";
  os << "front (*): most tokens/s/GPU for its peak reserved memory, among configurations that "
        "fit (peak reserved + runtime within the device)\n\n";
  const std::vector<std::size_t> rows = sorted_rows(r, sort, front_only);
  std::size_t mesh_width = 4;
  for (std::size_t i : rows) {
    mesh_width = std::max(mesh_width, to_string(points[i].mesh).size());
  }
  std::size_t recompute_width = 9;
  for (std::size_t i : rows) {
    recompute_width = std::max(recompute_width, recompute_name(points[i]).size());
  }
  os << pad("#", 5, true) << "  " << pad("", 1) << " " << pad("strategy", 8) << " "
     << pad("mesh", mesh_width) << " " << pad("layout", 8) << " " << pad("prefetch", 9) << " "
     << pad("mb", 3, true) << " " << pad("streams", 8) << " " << pad("recompute", recompute_width)
     << " " << pad("step ms", 8, true) << " " << pad("tok/s/GPU", 9, true) << " "
     << pad("TFLOP/s", 7, true) << " " << pad("MFU", 6, true) << " "
     << pad("reserved", 8, true) << " " << pad("headroom", 8, true) << " " << pad("fits", 4)
     << "\n";
  for (std::size_t i : rows) {
    const SweepPoint& p = points[i];
    const SweepOutcome& o = outcomes[i];
    os << pad(std::to_string(p.index), 5, true) << "  " << (o.pareto ? "*" : " ") << " "
       << pad(to_string(p.strategy), 8) << " " << pad(to_string(p.mesh), mesh_width) << " "
       << pad(to_string(p.layout), 8) << " " << pad(to_string(p.prefetch), 9) << " "
       << pad(std::to_string(p.microbatches), 3, true) << " "
       << pad(streams_name(p.unified_streams), 8) << " " << pad(recompute_name(p), recompute_width)
       << " " << pad(sig3(step_ms(o)), 8, true) << " "
       << pad(sig3(o.tokens_per_second_per_gpu), 9, true) << " "
       << pad(sig3(o.tflops_per_gpu), 7, true) << " " << pad(fixed(100.0 * o.mfu, 1) + "%", 6, true)
       << " " << pad(fixed(static_cast<double>(o.peak_reserved_bytes) / kGiB, 1), 8, true) << " "
       << pad(fixed(static_cast<double>(o.headroom_bytes) / kGiB, 1), 8, true) << " "
       << (o.fits ? "yes" : "NO") << "\n";
  }
  std::int64_t front = 0;
  std::int64_t no_fit = 0;
  std::int64_t failed = 0;
  for (const SweepOutcome& o : outcomes) {
    front += o.pareto ? 1 : 0;
    no_fit += (o.error.empty() && !o.fits) ? 1 : 0;
    failed += o.error.empty() ? 0 : 1;
  }
  os << "\n" << outcomes.size() << " configurations: " << front << " on the Pareto front, "
     << no_fit << " do not fit, " << failed << " failed\n";
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    if (!outcomes[i].error.empty()) {
      const SweepPoint& p = points[i];
      os << "  failed #" << p.index << " " << to_string(p.strategy) << " " << p.mesh << " "
         << to_string(p.layout) << " mb=" << p.microbatches << " prefetch=" << p.prefetch << " "
         << streams_name(p.unified_streams) << " recompute=" << recompute_name(p) << ": "
         << outcomes[i].error << "\n";
    }
  }
  return os.str();
}

nlohmann::json sweep_to_json(const SweepReport& r) {
  using nlohmann::json;
  const auto& points = *r.points;
  const auto& outcomes = *r.outcomes;
  json configs = json::array();
  std::int64_t no_fit = 0;
  std::int64_t failed = 0;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const SweepPoint& p = points[i];
    const SweepOutcome& o = outcomes[i];
    json c = {{"index", p.index},
              {"strategy", std::string(to_string(p.strategy))},
              {"mesh", to_string(p.mesh)},
              {"shard_layout", std::string(to_string(p.layout))},
              {"microbatches", p.microbatches},
              {"prefetch", to_string(p.prefetch)},
              {"unified_streams", p.unified_streams},
              {"recompute", recompute_name(p)}};
    if (!o.error.empty()) {
      c["error"] = o.error;
      ++failed;
    } else {
      c["step_time_ps"] = o.step_time_ps;
      c["step_time_ms"] = step_ms(o);
      c["tokens_per_step"] = o.tokens_per_step;
      c["tokens_per_second_per_gpu"] = o.tokens_per_second_per_gpu;
      c["tflops_per_gpu"] = o.tflops_per_gpu;
      c["mfu"] = o.mfu;
      c["peak_bytes"] = o.peak_bytes;
      c["peak_reserved_bytes"] = o.peak_reserved_bytes;
      c["fits"] = o.fits;
      c["headroom_bytes"] = o.headroom_bytes;
      c["pareto"] = o.pareto;
      c["rank_classes"] = o.rank_classes;
      c["exposed_communication_ps"] = o.exposed_communication_ps;
      c["overlap_fraction"] = o.overlap_fraction;
      c["events"] = o.events;
      no_fit += o.fits ? 0 : 1;
    }
    configs.push_back(std::move(c));
  }
  json front = json::array();
  for (std::size_t i : sorted_rows(r, SweepSort::kThroughput, /*front_only=*/true)) {
    front.push_back(points[i].index);
  }
  return json{{"model", r.model},
              {"hardware", r.hardware->name()},
              {"memory_bytes", r.hardware->memory_bytes()},
              {"ranks", r.ranks},
              {"tokens_per_microbatch_per_data_rank", r.tokens_per_microbatch},
              {"configurations", configs},
              {"pareto_front", front},
              {"summary",
               {{"configurations", outcomes.size()},
                {"pareto", front.size()},
                {"do_not_fit", no_fit},
                {"failed", failed}}}};
}

}  // namespace fsdp::cli

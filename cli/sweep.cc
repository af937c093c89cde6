// SPDX-License-Identifier: Apache-2.0
// Sweep engine. Points are independent, so the pool hands out indices from one atomic counter
// and writes each outcome into its own slot: no locks, and the output order never depends on
// which thread ran what.
#include "cli/sweep.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/base/strings.h"
#include "core/policy/schedule_policy.h"
#include "core/schedule/schedule_builder.h"

namespace fsdp::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Left- or right-aligned in `width` characters (longer text is kept whole).
std::string pad(std::string_view s, std::size_t width, bool right = false) {
  if (s.size() >= width) {
    return std::string(s);
  }
  const std::string fill(width - s.size(), ' ');
  return right ? fill + std::string(s) : std::string(s) + fill;
}

double time_per_microbatch_ms(const SweepOutcome& o, const SweepPoint& p) {
  return static_cast<double>(o.step_time_ps) * 1e-9 / static_cast<double>(p.microbatches);
}

double tokens_per_s(const SweepReport& r, const SweepOutcome& o, const SweepPoint& p) {
  if (o.step_time_ps <= 0) {
    return 0;
  }
  return static_cast<double>(r.ranks * p.microbatches * r.tokens_per_microbatch) /
         (static_cast<double>(o.step_time_ps) * 1e-12);
}

bool usable(const SweepOutcome& o) { return o.error.empty() && o.fits; }

}  // namespace

std::vector<SweepPoint> enumerate_sweep(const SweepSpace& space) {
  std::vector<SweepPoint> points;
  for (Strategy strategy : space.strategies) {
    std::vector<std::string> meshes;
    const bool two_axis = strategy_mesh_ndim(strategy) == 2;
    if (!two_axis) {
      meshes.push_back(str_cat("dp=", space.ranks));
    } else if (space.inner_sizes.empty()) {
      for (std::int64_t inner = 2; inner < space.ranks; ++inner) {
        if (space.ranks % inner == 0) {
          meshes.push_back(str_cat("dp_outer=", space.ranks / inner, ",dp_inner=", inner));
        }
      }
    } else {
      for (std::int64_t inner : space.inner_sizes) {
        if (inner >= 1 && space.ranks % inner == 0) {
          meshes.push_back(str_cat("dp_outer=", space.ranks / inner, ",dp_inner=", inner));
        }
      }
    }
    for (const std::string& mesh : meshes) {
      for (ShardLayout layout : space.layouts) {
        if (layout == ShardLayout::kUnpadded && (two_axis || strategy == Strategy::kNoShard)) {
          continue;
        }
        for (std::int64_t mb : space.microbatches) {
          for (const std::string& prefetch : space.prefetch) {
            for (bool unified : space.unified_streams) {
              points.push_back(SweepPoint{static_cast<std::int64_t>(points.size()), strategy,
                                          mesh, layout, mb, prefetch, unified});
            }
          }
        }
      }
    }
  }
  return points;
}

Expected<std::string> parse_sweep_prefetch(std::string_view text) {
  const std::string_view t = trim(text);
  if (!t.empty() && t.find_first_not_of("0123456789") == std::string_view::npos) {
    if (t.size() > 6) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("prefetch depth '", t, "' is too large; expected at most 999999"));
    }
    const std::int64_t depth = std::stoll(std::string(t));
    if (depth == 0) {
      return to_string(PrefetchPolicy::none());
    }
    FSDP_TRY(PrefetchPolicy policy, PrefetchPolicy::next_units(depth));
    return to_string(policy);
  }
  FSDP_TRY(PrefetchPolicy policy, parse_prefetch_policy(t));
  return to_string(policy);
}

SweepOutcome run_sweep_point(const SweepBase& base, const SweepPoint& point) {
  SweepOutcome o;
  o.index = point.index;
  try {
    RunOptions run = base.run;
    run.mesh = point.mesh;
    run.strategy = std::string(to_string(point.strategy));
    run.shard_layout = std::string(to_string(point.layout));
    run.microbatches = point.microbatches;
    run.forward_prefetch = point.prefetch;
    run.backward_prefetch = point.prefetch;
    run.unified_streams = point.unified_streams;
    auto config = make_config(run);
    if (!config) {
      o.error = config.error().message();
      return o;
    }
    auto workload = make_workload(run);
    if (!workload) {
      o.error = workload.error().message();
      return o;
    }
    auto schedule = build_schedule(base.model, *config, *workload);
    if (!schedule) {
      o.error = schedule.error().message();
      return o;
    }
    auto result = sim::simulate(*schedule, base.hardware, base.sim);
    if (!result) {
      o.error = "while simulating: " + result.error().message();
      return o;
    }
    o.step_time_ps = result->step_time.ps();
    o.fits = result->fits;
    o.rank_classes = static_cast<std::int64_t>(result->classes.size());
    o.events = result->events;
    o.overlap_fraction = 1.0;
    for (const sim::ClassResult& c : result->classes) {
      o.peak_bytes = std::max(o.peak_bytes, c.memory.peak_bytes);
      o.peak_reserved_bytes = std::max(o.peak_reserved_bytes, c.memory.peak_reserved_bytes);
      o.exposed_communication_ps =
          std::max(o.exposed_communication_ps, c.exposed_communication.ps());
      o.overlap_fraction = std::min(o.overlap_fraction, c.overlap_fraction);
    }
  } catch (const std::exception& e) {
    o = SweepOutcome{};
    o.index = point.index;
    o.error = str_cat("unexpected failure: ", e.what());
  }
  return o;
}

std::vector<SweepOutcome> run_sweep_points(
    const SweepBase& base, const std::vector<SweepPoint>& points,
    const std::vector<std::int64_t>& which, int jobs,
    const std::function<void(std::int64_t, std::int64_t)>& progress) {
  const auto total = static_cast<std::int64_t>(which.size());
  std::vector<SweepOutcome> outcomes(which.size());
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;
  auto worker = [&] {
    for (std::int64_t i = next++; i < total; i = next++) {
      const auto slot = static_cast<std::size_t>(i);
      outcomes[slot] =
          run_sweep_point(base, points[static_cast<std::size_t>(which[slot])]);
      if (++done == total) {
        const std::lock_guard<std::mutex> lock(mutex);
        finished.notify_all();
      }
    }
  };
  const int threads = static_cast<int>(std::clamp<std::int64_t>(jobs, 1, std::max<std::int64_t>(total, 1)));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back(worker);
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    while (done.load() < total) {
      if (progress) {
        progress(done.load(), total);
      }
      finished.wait_for(lock, std::chrono::milliseconds(200), [&] { return done.load() >= total; });
    }
  }
  for (std::thread& t : pool) {
    t.join();
  }
  if (progress) {
    progress(total, total);
  }
  return outcomes;
}

bool faster_per_microbatch(const SweepOutcome& a, const SweepPoint& pa, const SweepOutcome& b,
                           const SweepPoint& pb) {
  // step_a / mb_a < step_b / mb_b without rounding: compare quotients, then the remainders
  // cross-multiplied (each below its microbatch count, so the products stay small).
  const std::int64_t qa = a.step_time_ps / pa.microbatches;
  const std::int64_t qb = b.step_time_ps / pb.microbatches;
  if (qa != qb) {
    return qa < qb;
  }
  return (a.step_time_ps % pa.microbatches) * pb.microbatches <
         (b.step_time_ps % pb.microbatches) * pa.microbatches;
}

void mark_pareto_front(const std::vector<SweepPoint>& points,
                       std::vector<SweepOutcome>& outcomes) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    outcomes[i].pareto = false;
    if (usable(outcomes[i])) {
      order.push_back(i);
    }
  }
  auto faster = [&](std::size_t a, std::size_t b) {
    return faster_per_microbatch(outcomes[a], points[a], outcomes[b], points[b]);
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (faster(a, b) || faster(b, a)) {
      return faster(a, b);
    }
    return outcomes[a].peak_bytes < outcomes[b].peak_bytes;
  });
  // Walk groups of equal speed, fastest first: a group's least-memory points are on the front
  // when they use strictly less memory than every faster point.
  std::int64_t best_faster = std::numeric_limits<std::int64_t>::max();
  for (std::size_t g = 0; g < order.size();) {
    std::size_t end = g + 1;
    while (end < order.size() && !faster(order[g], order[end])) {
      ++end;
    }
    const std::int64_t least = outcomes[order[g]].peak_bytes;
    if (least < best_faster) {
      for (std::size_t k = g; k < end && outcomes[order[k]].peak_bytes == least; ++k) {
        outcomes[order[k]].pareto = true;
      }
    }
    best_faster = std::min(best_faster, least);
    g = end;
  }
}

nlohmann::json outcome_to_json(const SweepOutcome& o) {
  return nlohmann::json{{"index", o.index},
                        {"error", o.error},
                        {"step_time_ps", o.step_time_ps},
                        {"peak_bytes", o.peak_bytes},
                        {"peak_reserved_bytes", o.peak_reserved_bytes},
                        {"fits", o.fits},
                        {"rank_classes", o.rank_classes},
                        {"exposed_communication_ps", o.exposed_communication_ps},
                        {"overlap_fraction", o.overlap_fraction},
                        {"events", o.events}};
}

Expected<SweepOutcome> outcome_from_json(const nlohmann::json& j) {
  try {
    SweepOutcome o;
    o.index = j.at("index").get<std::int64_t>();
    o.error = j.at("error").get<std::string>();
    o.step_time_ps = j.at("step_time_ps").get<std::int64_t>();
    o.peak_bytes = j.at("peak_bytes").get<std::int64_t>();
    o.peak_reserved_bytes = j.at("peak_reserved_bytes").get<std::int64_t>();
    o.fits = j.at("fits").get<bool>();
    o.rank_classes = j.at("rank_classes").get<std::int64_t>();
    o.exposed_communication_ps = j.at("exposed_communication_ps").get<std::int64_t>();
    o.overlap_fraction = j.at("overlap_fraction").get<double>();
    o.events = j.at("events").get<std::int64_t>();
    return o;
  } catch (const nlohmann::json::exception& e) {
    return Error(ErrorCode::kInvalidArgument, str_cat("sweep outcome: ", e.what()));
  }
}

namespace {

std::vector<std::size_t> sorted_rows(const SweepReport& r, SweepSort sort, bool front_only) {
  const auto& points = *r.points;
  const auto& outcomes = *r.outcomes;
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i].error.empty() && (!front_only || outcomes[i].pareto)) {
      rows.push_back(i);
    }
  }
  auto by_time = [&](std::size_t a, std::size_t b) {
    return faster_per_microbatch(outcomes[a], points[a], outcomes[b], points[b]);
  };
  auto by_memory = [&](std::size_t a, std::size_t b) {
    return outcomes[a].peak_bytes < outcomes[b].peak_bytes;
  };
  if (sort == SweepSort::kTime) {
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

}  // namespace

std::string render_sweep_text(const SweepReport& r, SweepSort sort, bool front_only) {
  const auto& points = *r.points;
  const auto& outcomes = *r.outcomes;
  std::ostringstream os;
  os << "sweep: " << r.model << " on " << r.ranks << " ranks of " << r.hardware->name() << " ("
     << fixed(static_cast<double>(r.hardware->memory_bytes()) / kGiB, 2)
     << " GiB per device), " << r.tokens_per_microbatch << " tokens per microbatch per rank\n";
  os << "front (*): fastest per microbatch for its peak memory, among configurations that fit\n\n";
  const std::vector<std::size_t> rows = sorted_rows(r, sort, front_only);
  std::size_t mesh_width = 4;
  for (std::size_t i : rows) {
    mesh_width = std::max(mesh_width, points[i].mesh.size());
  }
  os << pad("#", 5, true) << "  " << pad("", 1) << " " << pad("strategy", 8) << " "
     << pad("mesh", mesh_width) << " " << pad("layout", 8) << " " << pad("prefetch", 9) << " "
     << pad("mb", 3, true) << " " << pad("streams", 8) << " " << pad("step ms", 10, true) << " "
     << pad("ms/mb", 9, true) << " " << pad("tokens/s", 10, true) << " "
     << pad("peak GiB", 9, true) << " " << pad("fits", 4) << "\n";
  for (std::size_t i : rows) {
    const SweepPoint& p = points[i];
    const SweepOutcome& o = outcomes[i];
    os << pad(std::to_string(p.index), 5, true) << "  " << (o.pareto ? "*" : " ") << " "
       << pad(to_string(p.strategy), 8) << " " << pad(p.mesh, mesh_width) << " "
       << pad(to_string(p.layout), 8) << " " << pad(p.prefetch, 9) << " "
       << pad(std::to_string(p.microbatches), 3, true) << " "
       << pad(streams_name(p.unified_streams), 8) << " "
       << pad(fixed(static_cast<double>(o.step_time_ps) * 1e-9, 3), 10, true) << " "
       << pad(fixed(time_per_microbatch_ms(o, p), 3), 9, true) << " "
       << pad(fixed(tokens_per_s(r, o, p), 0), 10, true) << " "
       << pad(fixed(static_cast<double>(o.peak_bytes) / kGiB, 2), 9, true) << " "
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
         << streams_name(p.unified_streams) << ": " << outcomes[i].error << "\n";
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
              {"mesh", p.mesh},
              {"shard_layout", std::string(to_string(p.layout))},
              {"microbatches", p.microbatches},
              {"prefetch", p.prefetch},
              {"unified_streams", p.unified_streams}};
    if (!o.error.empty()) {
      c["error"] = o.error;
      ++failed;
    } else {
      c["step_time_ps"] = o.step_time_ps;
      c["step_time_ms"] = static_cast<double>(o.step_time_ps) * 1e-9;
      c["time_per_microbatch_ms"] = time_per_microbatch_ms(o, p);
      c["tokens_per_s"] = tokens_per_s(r, o, p);
      c["peak_bytes"] = o.peak_bytes;
      c["peak_reserved_bytes"] = o.peak_reserved_bytes;
      c["fits"] = o.fits;
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
  for (std::size_t i : sorted_rows(r, SweepSort::kTime, /*front_only=*/true)) {
    front.push_back(points[i].index);
  }
  return json{{"model", r.model},
              {"hardware", r.hardware->name()},
              {"memory_bytes", r.hardware->memory_bytes()},
              {"ranks", r.ranks},
              {"tokens_per_microbatch", r.tokens_per_microbatch},
              {"configurations", configs},
              {"pareto_front", front},
              {"summary",
               {{"configurations", outcomes.size()},
                {"pareto", front.size()},
                {"do_not_fit", no_fit},
                {"failed", failed}}}};
}

}  // namespace fsdp::cli

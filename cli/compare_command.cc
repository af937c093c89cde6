// SPDX-License-Identifier: Apache-2.0
// `fsdpsim compare PREDICTED.json MEASURED.json`: lines up two Chrome traces written with
// core/schedule/trace_events.h naming (`fsdpsim simulate --trace`, `fsdpsim train --trace`) op by
// op, per rank, step, stream and op index; checks that they describe the same ops (name, bytes);
// reports per op kind the predicted against the measured durations, the largest absolute and
// relative differences, the step times and the exposed communication. docs/cli.md, "compare".
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/subcommands.h"
#include "cli/trace_reader.h"
#include "core/base/strings.h"
#include "core/schedule/op.h"

namespace po = boost::program_options;

namespace fsdp::cli {
namespace {

using nlohmann::json;

constexpr std::string_view kUsage = "compare PREDICTED.json MEASURED.json [--top N] [--json]";

constexpr std::string_view kDescription =
    "Lines up two Chrome traces of the same schedule op by op: usually the simulator's\n"
    "(`fsdpsim simulate --trace`) and a real run's (`fsdpsim train --trace`). Ops are matched per\n"
    "rank, step, stream and op index of the rank's program (a simulator trace names the ranks of\n"
    "each class; a trace of one step is the prediction for every step of the other). Only ops\n"
    "that take time are compared (compute and collectives). Exits 1 naming the first op that\n"
    "differs (missing, extra, another name or byte count); otherwise prints, per op kind, the\n"
    "predicted and measured time, the N largest absolute and relative differences, and per step\n"
    "the step time and the exposed communication (collective time outside compute, as the\n"
    "simulator defines it), both the slowest rank's.\n\n"
    "examples:\n"
    "  fsdpsim compare sim.json real.json\n"
    "  fsdpsim compare sim.json real.json --top 5 --json";

// The trace's ops per (rank, step, stream, op): a pid stands for the ranks its metadata lists,
// else for the rank of its number.
std::map<OpKey, const TraceOp*> by_rank(const Trace& t) {
  std::map<OpKey, const TraceOp*> out;
  for (const auto& [key, op] : t.ops) {
    const auto& [pid, step, stream, index] = key;
    const auto it = t.ranks_of_pid.find(pid);
    if (it == t.ranks_of_pid.end()) {
      out.emplace(OpKey{pid, step, stream, index}, &op);
      continue;
    }
    for (std::int64_t rank : it->second) {
      out.emplace(OpKey{rank, step, stream, index}, &op);
    }
  }
  return out;
}

std::string describe(const OpKey& k) {
  return str_cat("rank ", std::get<0>(k), " step ", std::get<1>(k), " stream ",
                 to_string(static_cast<StreamKind>(std::get<2>(k))), " op ", std::get<3>(k));
}

std::string describe(const TraceOp& op) {
  return op.bytes >= 0 ? str_cat("'", op.name, "' (", op.bytes, " B)") : str_cat("'", op.name, "'");
}

// One op of the measured trace with its prediction.
struct Pair {
  OpKey key;
  const TraceOp* predicted = nullptr;
  const TraceOp* measured = nullptr;
};

// How many ops differ, and the one that comes first in (rank, step, stream, op) order.
struct Mismatch {
  std::string what;
  OpKey key;
  std::int64_t count = 0;
};

// Lines the traces up. A predicted trace of one step predicts every measured step.
std::vector<Pair> line_up(const Trace& p, const Trace& m, Mismatch* mismatch) {
  const auto predicted = by_rank(p);
  const auto measured = by_rank(m);
  const bool one_step = p.steps.size() == 1;
  const std::int64_t only = *p.steps.begin();
  std::set<std::int64_t> ranks;
  for (const auto& [k, op] : measured) {
    ranks.insert(std::get<0>(k));
  }
  std::vector<Pair> pairs;
  auto note = [&](const OpKey& key, const std::string& what) {
    if (mismatch->count++ == 0 || key < mismatch->key) {
      mismatch->what = what;
      mismatch->key = key;
    }
  };
  for (const auto& [k, op] : measured) {
    OpKey pk = k;
    if (one_step) {
      std::get<1>(pk) = only;
    }
    const auto it = predicted.find(pk);
    if (it == predicted.end()) {
      note(k, str_cat(describe(k), " ", describe(*op), " is in '", m.path, "' but not in '", p.path,
                   "'"));
      continue;
    }
    if (it->second->name != op->name || it->second->bytes != op->bytes) {
      note(k, str_cat(describe(k), " is ", describe(*it->second), " in '", p.path, "' but ",
                   describe(*op), " in '", m.path, "'"));
      continue;
    }
    pairs.push_back(Pair{k, it->second, op});
  }
  // Every predicted op of a measured rank must run in every step it predicts.
  for (const auto& [k, op] : predicted) {
    if (ranks.count(std::get<0>(k)) == 0) {
      continue;
    }
    for (const std::int64_t step : m.steps) {
      OpKey mk = k;
      std::get<1>(mk) = step;
      if ((one_step || step == std::get<1>(k)) && measured.count(mk) == 0) {
        note(mk, str_cat(describe(mk), " ", describe(*op), " is in '", p.path, "' but not in '",
                     m.path, "'"));
      }
    }
  }
  return pairs;
}

// Length of the union of `iv` minus its overlap with the union of `cover` (both unsorted).
double outside(std::vector<std::pair<double, double>> iv,
               std::vector<std::pair<double, double>> cover) {
  const auto merge = [](std::vector<std::pair<double, double>>& v) {
    std::sort(v.begin(), v.end());
    std::vector<std::pair<double, double>> out;
    for (const auto& x : v) {
      if (!out.empty() && x.first <= out.back().second) {
        out.back().second = std::max(out.back().second, x.second);
      } else {
        out.push_back(x);
      }
    }
    v = std::move(out);
  };
  merge(iv);
  merge(cover);
  double total = 0;
  for (const auto& [a, b] : iv) {
    double covered = 0;
    for (const auto& [c, d] : cover) {
      covered += std::max(0.0, std::min(b, d) - std::max(a, c));
    }
    total += (b - a) - covered;
  }
  return total;
}

// Per (rank, step): the span of its ops and its exposed communication, taking each op's
// interval from `pick` (the predicted or the measured side).
struct StepTimes {
  double span_us = 0;
  double exposed_us = 0;
};

template <typename Pick>
std::map<std::int64_t, StepTimes> step_times(const std::vector<Pair>& pairs, Pick pick) {
  struct Acc {
    double lo = 1e300;
    double hi = -1e300;
    std::vector<std::pair<double, double>> comm;
    std::vector<std::pair<double, double>> compute;
  };
  std::map<std::pair<std::int64_t, std::int64_t>, Acc> acc;
  for (const Pair& p : pairs) {
    const TraceOp& op = *pick(p);
    Acc& a = acc[{std::get<0>(p.key), std::get<1>(p.key)}];
    a.lo = std::min(a.lo, op.start_us);
    a.hi = std::max(a.hi, op.start_us + op.dur_us);
    (is_collective_kind(op.kind) ? a.comm : a.compute)
        .emplace_back(op.start_us, op.start_us + op.dur_us);
  }
  std::map<std::int64_t, StepTimes> out;  // per step: the slowest rank
  for (const auto& [rank_step, a] : acc) {
    StepTimes& s = out[rank_step.second];
    s.span_us = std::max(s.span_us, a.hi - a.lo);
    s.exposed_us = std::max(s.exposed_us, outside(a.comm, a.compute));
  }
  return out;
}

struct KindStats {
  std::int64_t count = 0;
  double predicted_us = 0;
  double measured_us = 0;
};

std::string fixed(double v, int digits = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Aligned in `width` characters. A right-aligned cell keeps at least one space before it even
// when the text is wider, so numbers never run into the column on their left (issue 16).
std::string pad(std::string s, std::size_t width, bool right = true) {
  if (right) {
    return std::string(s.size() < width ? width - s.size() : 1, ' ') + s;
  }
  if (s.size() < width) {
    s += std::string(width - s.size(), ' ');
  }
  return s;
}

double relative(const Pair& p) {
  const double pr = p.predicted->dur_us;
  const double diff = p.measured->dur_us - pr;
  return pr > 0 ? std::abs(diff) / pr : (diff == 0 ? 0.0 : 1e300);
}

json pair_json(const Pair& p) {
  return json{{"rank", std::get<0>(p.key)},
              {"step", std::get<1>(p.key)},
              {"stream", std::string(to_string(static_cast<StreamKind>(std::get<2>(p.key))))},
              {"op", std::get<3>(p.key)},
              {"name", p.measured->name},
              {"predicted_us", p.predicted->dur_us},
              {"measured_us", p.measured->dur_us},
              {"difference_us", p.measured->dur_us - p.predicted->dur_us}};
}

std::string pair_line(const Pair& p) {
  const double diff = p.measured->dur_us - p.predicted->dur_us;
  return str_cat(pad(str_cat(std::get<0>(p.key)), 5), pad(str_cat(std::get<1>(p.key)), 5), "  ",
                 pad(std::string(to_string(static_cast<StreamKind>(std::get<2>(p.key)))), 15,
                     false),
                 pad(str_cat(std::get<3>(p.key)), 5), "  ", pad(p.measured->name, 24, false),
                 pad(fixed(p.predicted->dur_us), 14), pad(fixed(p.measured->dur_us), 14),
                 pad(fixed(diff), 14),
                 pad(p.predicted->dur_us > 0 ? fixed(100.0 * diff / p.predicted->dur_us, 1) + "%"
                                             : std::string("-"),
                     10),
                 "\n");
}

}  // namespace

int run_compare_command(std::span<const std::string> args, Io& io) {
  // Two positional files; the rest are options.
  std::vector<std::string> files;
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--top" && i + 1 < args.size()) {
      rest.push_back(args[i]);
      rest.push_back(args[++i]);
    } else if (!args[i].empty() && args[i][0] == '-') {
      rest.push_back(args[i]);
    } else {
      files.push_back(args[i]);
    }
  }
  po::options_description desc("options");
  std::int64_t top = 10;
  bool as_json = false;
  desc.add_options()
      ("top", po::value(&top)->default_value(10), "list the N largest differences of each kind")
      ("json", po::bool_switch(&as_json), "print JSON instead of tables");
  po::variables_map vm;
  if (auto done = parse_command_line("compare", kUsage, kDescription, desc, rest, vm, io)) {
    return *done;
  }
  if (files.size() != 2) {
    return report_usage_error(io, "compare",
                              str_cat("expected two trace files (predicted, measured); got ",
                                      files.size()));
  }
  if (top < 0) {
    return report_usage_error(io, "compare", str_cat("--top is ", top, "; expected >= 0"));
  }
  auto predicted = read_trace(files[0]);
  if (!predicted) {
    return report_error(io, predicted.error());
  }
  auto measured = read_trace(files[1]);
  if (!measured) {
    return report_error(io, measured.error());
  }
  Mismatch mismatch;
  std::vector<Pair> pairs = line_up(*predicted, *measured, &mismatch);
  if (mismatch.count > 0) {
    return report_error(
        io, Error(ErrorCode::kInvalidArgument,
                  str_cat("the traces describe different ops (", mismatch.count,
                          " difference(s); the first: ", mismatch.what, ")")));
  }
  std::map<std::string, KindStats> kinds;
  std::set<std::int64_t> ranks;
  for (const Pair& p : pairs) {
    KindStats& k = kinds[p.measured->kind];
    ++k.count;
    k.predicted_us += p.predicted->dur_us;
    k.measured_us += p.measured->dur_us;
    ranks.insert(std::get<0>(p.key));
  }
  const auto n = static_cast<std::size_t>(top);
  std::vector<Pair> by_abs = pairs;
  std::stable_sort(by_abs.begin(), by_abs.end(), [](const Pair& a, const Pair& b) {
    return std::abs(a.measured->dur_us - a.predicted->dur_us) >
           std::abs(b.measured->dur_us - b.predicted->dur_us);
  });
  by_abs.resize(std::min(n, by_abs.size()));
  std::vector<Pair> by_rel = pairs;
  std::stable_sort(by_rel.begin(), by_rel.end(),
                   [](const Pair& a, const Pair& b) { return relative(a) > relative(b); });
  by_rel.resize(std::min(n, by_rel.size()));
  const auto steps_p = step_times(pairs, [](const Pair& p) { return p.predicted; });
  const auto steps_m = step_times(pairs, [](const Pair& p) { return p.measured; });

  if (as_json) {
    json out = {{"predicted", files[0]},
                {"measured", files[1]},
                {"ops", pairs.size()},
                {"ranks", ranks.size()},
                {"kinds", json::array()},
                {"steps", json::array()},
                {"top_absolute", json::array()},
                {"top_relative", json::array()}};
    for (const auto& [kind, k] : kinds) {
      out["kinds"].push_back({{"kind", kind},
                              {"count", k.count},
                              {"predicted_us", k.predicted_us},
                              {"measured_us", k.measured_us}});
    }
    for (const auto& [step, m] : steps_m) {
      const StepTimes& p = steps_p.at(step);
      out["steps"].push_back({{"step", step},
                              {"predicted_us", p.span_us},
                              {"measured_us", m.span_us},
                              {"predicted_exposed_comm_us", p.exposed_us},
                              {"measured_exposed_comm_us", m.exposed_us}});
    }
    for (const Pair& p : by_abs) {
      out["top_absolute"].push_back(pair_json(p));
    }
    for (const Pair& p : by_rel) {
      out["top_relative"].push_back(pair_json(p));
    }
    io.out << out.dump(2) << "\n";
    return kExitOk;
  }
  io.out << "predicted: " << files[0] << "\nmeasured:  " << files[1] << "\n"
         << pairs.size() << " ops line up on " << ranks.size() << " rank(s), " << steps_m.size()
         << " step(s): same names, streams and bytes\n\n";
  io.out << pad("op kind", 16, false) << pad("count", 7) << pad("predicted us", 16)
         << pad("measured us", 16) << pad("measured/pred", 15) << "\n";
  for (const auto& [kind, k] : kinds) {
    io.out << pad(kind, 16, false) << pad(str_cat(k.count), 7) << pad(fixed(k.predicted_us), 16)
           << pad(fixed(k.measured_us), 16)
           << pad(k.predicted_us > 0 ? fixed(k.measured_us / k.predicted_us, 2) : "-", 15)
           << "\n";
  }
  io.out << "\n"
         << pad("step", 5) << pad("predicted us", 16) << pad("measured us", 16)
         << pad("exposed comm pred us", 22) << pad("measured us", 16) << "\n";
  for (const auto& [step, m] : steps_m) {
    const StepTimes& p = steps_p.at(step);
    io.out << pad(str_cat(step), 5) << pad(fixed(p.span_us), 16) << pad(fixed(m.span_us), 16)
           << pad(fixed(p.exposed_us), 22) << pad(fixed(m.exposed_us), 16) << "\n";
  }
  const std::string header =
      str_cat(pad("rank", 5), pad("step", 5), "  ", pad("stream", 15, false), pad("op", 5), "  ",
              pad("name", 24, false), pad("predicted us", 14), pad("measured us", 14),
              pad("diff us", 14), pad("diff", 10), "\n");
  io.out << "\nlargest absolute differences (top " << by_abs.size() << ")\n" << header;
  for (const Pair& p : by_abs) {
    io.out << pair_line(p);
  }
  io.out << "\nlargest relative differences (top " << by_rel.size() << ")\n" << header;
  for (const Pair& p : by_rel) {
    io.out << pair_line(p);
  }
  return kExitOk;
}

}  // namespace fsdp::cli

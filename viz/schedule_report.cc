// SPDX-License-Identifier: Apache-2.0
#include "viz/schedule_report.h"

#include <array>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "core/base/strings.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/graphviz.hpp>

namespace fsdp::viz {
namespace {

std::string unit_name(const Schedule& s, std::int32_t unit) {
  if (unit < 0) {
    return "-";
  }
  return s.unit_names()[static_cast<std::size_t>(unit)];
}

std::string op_label(const Schedule& s, const Op& op) {
  std::ostringstream os;
  os << to_string(op.kind);
  if (op.unit >= 0) {
    os << " " << unit_name(s, op.unit);
    if (op.group >= 0) {
      os << "/g" << op.group;
    }
  }
  switch (op.kind) {
    case OpKind::kAlloc:
      os << " #" << op.buffer << " " << to_string(op.buffer_class) << " " << op.bytes << " B";
      break;
    case OpKind::kFree:
      os << " #" << op.buffer << " " << to_string(op.buffer_class);
      break;
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
    case OpKind::kAllReduce:
    case OpKind::kAllToAll:
      // An activation collective names its site ("attention.out", "moe.dispatch").
      if (op.collective >= 0) {
        if (const ActivationCollective* a =
                s.activation_of(s.collectives()[static_cast<std::size_t>(op.collective)])) {
          os << " " << a->site;
        }
      }
      os << " on " << s.mesh().axis_name(op.axis) << " " << op.elements << " x "
         << to_string(op.dtype) << " (" << op.bytes << " B)";
      break;
    case OpKind::kRecord:
    case OpKind::kWait:
      os << " e" << op.event;
      break;
    default:
      if (op.flops > 0) {
        os << " " << op.flops << " FLOP";
      }
      if (op.mem_bytes > 0) {
        os << " " << op.mem_bytes << " B";
      }
      break;
  }
  return os.str();
}

std::string when(const Op& op) {
  if (op.phase == Phase::kStep) {
    return "step";
  }
  return str_cat("mb", op.microbatch, " ", op.phase == Phase::kForward ? "fwd" : "bwd");
}

}  // namespace

std::string render_schedule_text(const Schedule& schedule, std::int64_t max_ops_per_stream) {
  std::ostringstream os;
  const DeviceMesh& mesh = schedule.mesh();
  os << "mesh " << to_string(mesh) << " (" << mesh.size() << " ranks), "
     << schedule.num_microbatches() << " microbatches, "
     << (schedule.unified_streams() ? "unified" : "separate") << " communication streams, "
     << schedule.programs().size() << " rank class"
     << (schedule.programs().size() == 1 ? "" : "es") << "\n";
  os << "collectives per step:";
  for (const auto& [kind, per_axis] : schedule.collective_summary()) {
    for (const auto& [axis, n] : per_axis) {
      os << " " << kind << "@" << axis << "=" << n;
    }
  }
  os << "\n";
  for (std::size_t c = 0; c < schedule.programs().size(); ++c) {
    const RankProgram& p = schedule.programs()[c];
    os << "\nclass " << c << ": " << p.num_ranks << " rank" << (p.num_ranks == 1 ? "" : "s")
       << " (representative rank " << p.representative_rank << "), " << p.ops.size()
       << " ops\n";
    std::int64_t resident = 0;
    for (const ResidentBuffer& b : p.resident) {
      resident += b.bytes;
    }
    os << "  resident: " << p.resident.size() << " buffers, " << resident << " B\n";
    for (int s = 0; s < kNumStreams; ++s) {
      const auto stream = static_cast<StreamKind>(s);
      std::int64_t n = 0;
      std::ostringstream lines;
      for (std::size_t i = 0; i < p.ops.size(); ++i) {
        const Op& op = p.ops[i];
        if (op.stream != stream) {
          continue;
        }
        if (n < max_ops_per_stream) {
          lines << "    " << i << " [" << when(op) << "] " << op_label(schedule, op) << "\n";
        }
        ++n;
      }
      if (n == 0) {
        continue;
      }
      os << "  stream " << to_string(stream) << " (" << n << " ops):\n" << lines.str();
      if (n > max_ops_per_stream) {
        os << "    ... " << n - max_ops_per_stream << " more ops\n";
      }
    }
  }
  return os.str();
}

nlohmann::json schedule_to_json(const Schedule& schedule) {
  nlohmann::json j;
  nlohmann::json axes = nlohmann::json::array();
  for (const MeshAxis& a : schedule.mesh().axes()) {
    axes.push_back({{"name", a.name}, {"size", a.size}});
  }
  j["mesh"] = {{"axes", axes}, {"size", schedule.mesh().size()}};
  j["microbatches"] = schedule.num_microbatches();
  j["unified_streams"] = schedule.unified_streams();
  j["units"] = schedule.unit_names();
  j["summary"] = schedule.collective_summary();
  nlohmann::json collectives = nlohmann::json::array();
  for (const CollectiveInfo& c : schedule.collectives()) {
    nlohmann::json cj = {{"kind", to_string(c.kind)},
                         {"axis", schedule.mesh().axis_name(c.axis)},
                         {"unit", c.unit},
                         {"group", c.group},
                         {"dtype", to_string(c.dtype)},
                         {"what", to_string(c.leg)},
                         {"geometry_group", c.geometry_group},
                         {"leg_step", c.leg_step}};
    if (!c.member_elements.empty()) {
      cj["member_elements"] = c.member_elements;
    }
    // An activation collective of a tp/ep split: what it moves instead of a leg.
    if (const ActivationCollective* a = schedule.activation_of(c)) {
      cj["what"] = "activation";
      cj.erase("leg_step");
      cj["site"] = a->site;
      cj["pass"] = to_string(a->pass);
    }
    collectives.push_back(std::move(cj));
  }
  j["collectives"] = std::move(collectives);
  nlohmann::json classes = nlohmann::json::array();
  for (const RankProgram& p : schedule.programs()) {
    nlohmann::json resident = nlohmann::json::array();
    for (const ResidentBuffer& b : p.resident) {
      resident.push_back({{"class", to_string(b.buffer_class)},
                          {"unit", b.unit},
                          {"group", b.group},
                          {"what", to_string(b.kind)},
                          {"geometry_group", b.geometry_group},
                          {"dtype", to_string(b.dtype)},
                          {"elements", b.elements},
                          {"bytes", b.bytes}});
    }
    nlohmann::json ops = nlohmann::json::array();
    for (const Op& op : p.ops) {
      nlohmann::json oj = {{"kind", to_string(op.kind)},
                           {"stream", to_string(op.stream)},
                           {"phase", to_string(op.phase)},
                           {"microbatch", op.microbatch},
                           {"unit", op.unit},
                           {"group", op.group}};
      if (is_collective(op.kind)) {
        oj["axis"] = schedule.mesh().axis_name(op.axis);
        oj["collective"] = op.collective;
        oj["dtype"] = to_string(op.dtype);
        oj["elements"] = op.elements;
        oj["bytes"] = op.bytes;
      } else if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) {
        oj["buffer"] = op.buffer;
        oj["buffer_class"] = to_string(op.buffer_class);
        if (op.kind == OpKind::kAlloc) {
          oj["dtype"] = to_string(op.dtype);
          oj["elements"] = op.elements;
          oj["bytes"] = op.bytes;
        }
      } else if (op.kind == OpKind::kRecord || op.kind == OpKind::kWait) {
        oj["event"] = op.event;
      } else {
        oj["flops"] = op.flops;
        oj["mem_bytes"] = op.mem_bytes;
      }
      if (op.num_operands > 0) {
        nlohmann::json operands = nlohmann::json::array();
        for (const Operand& o : p.operands_of(op)) {
          operands.push_back({{"space", to_string(o.space)},
                              {"buffer", o.buffer},
                              {"access", to_string(o.access)},
                              {"group", o.group},
                              {"extent", to_string(o.extent)}});
        }
        oj["operands"] = std::move(operands);
      }
      ops.push_back(std::move(oj));
    }
    classes.push_back({{"representative_rank", p.representative_rank},
                       {"num_ranks", p.num_ranks},
                       {"num_events", p.num_events},
                       {"num_buffers", p.num_buffers},
                       {"resident", std::move(resident)},
                       {"ops", std::move(ops)}});
  }
  j["classes"] = std::move(classes);
  nlohmann::json runs = nlohmann::json::array();
  const auto& rc = schedule.rank_class();
  for (std::size_t r = 0; r < rc.size();) {
    std::size_t e = r;
    while (e < rc.size() && rc[e] == rc[r]) {
      ++e;
    }
    runs.push_back({{"first", r}, {"count", e - r}, {"class", rc[r]}});
    r = e;
  }
  j["rank_class"] = std::move(runs);
  return j;
}

std::string render_schedule_dot(const Schedule& schedule, std::int64_t max_detailed_ops) {
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  if (schedule.programs().empty()) {
    return "digraph schedule {}\n";
  }
  const RankProgram& p = schedule.programs().front();
  std::int64_t visible = 0;
  for (const Op& op : p.ops) {
    visible += (op.kind != OpKind::kRecord && op.kind != OpKind::kWait) ? 1 : 0;
  }
  const bool detailed = visible <= max_detailed_ops;

  // Node of each op: its own (detailed) or its (stream, unit, microbatch, phase) summary. Record
  // and wait ops are not nodes; they become edges.
  std::vector<std::string> labels;
  std::vector<StreamKind> node_stream;
  std::vector<std::int64_t> node_of(p.ops.size(), -1);
  std::map<std::tuple<int, std::int32_t, std::int32_t, int>, std::int64_t> summary_node;
  std::map<std::tuple<int, std::int32_t, std::int32_t, int>, std::vector<std::string>> contents;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (op.kind == OpKind::kRecord || op.kind == OpKind::kWait) {
      continue;
    }
    if (detailed) {
      node_of[i] = static_cast<std::int64_t>(labels.size());
      labels.push_back(str_cat(when(op), "\\n", op_label(schedule, op)));
      node_stream.push_back(op.stream);
      continue;
    }
    const auto key = std::make_tuple(static_cast<int>(op.stream), op.unit, op.microbatch,
                                     static_cast<int>(op.phase));
    auto [it, inserted] = summary_node.emplace(key, static_cast<std::int64_t>(labels.size()));
    if (inserted) {
      labels.push_back(str_cat(when(op), " ", unit_name(schedule, op.unit)));
      node_stream.push_back(op.stream);
    }
    contents[key].push_back(std::string(to_string(op.kind)));
    node_of[i] = it->second;
  }
  if (!detailed) {
    for (const auto& [key, node] : summary_node) {
      std::map<std::string, int> counts;
      for (const std::string& k : contents[key]) {
        ++counts[k];
      }
      std::string text;
      for (const auto& [k, n] : counts) {
        text += str_cat("\\n", n, "x ", k);
      }
      labels[static_cast<std::size_t>(node)] += text;
    }
  }

  Graph g(labels.size());
  std::set<std::pair<std::int64_t, std::int64_t>> edges;
  auto add_edge = [&](std::int64_t a, std::int64_t b) {
    if (a >= 0 && b >= 0 && a != b && edges.emplace(a, b).second) {
      boost::add_edge(static_cast<std::size_t>(a), static_cast<std::size_t>(b), g);
    }
  };
  std::array<std::int64_t, kNumStreams> last{-1, -1, -1};
  std::vector<std::int64_t> event_source(static_cast<std::size_t>(p.num_events), -1);
  std::array<std::int64_t, kNumStreams> pending_wait{-1, -1, -1};
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    const auto s = static_cast<std::size_t>(op.stream);
    if (op.kind == OpKind::kRecord) {
      event_source[static_cast<std::size_t>(op.event)] = last[s];
      continue;
    }
    if (op.kind == OpKind::kWait) {
      pending_wait[s] = event_source[static_cast<std::size_t>(op.event)];
      continue;
    }
    add_edge(last[s], node_of[i]);
    add_edge(pending_wait[s], node_of[i]);
    pending_wait[s] = -1;
    last[s] = node_of[i];
  }
  static constexpr std::array<const char*, kNumStreams> kColours = {"lightblue", "palegreen",
                                                                    "lightsalmon"};
  std::ostringstream os;
  boost::write_graphviz(
      os, g,
      [&](std::ostream& out, std::size_t v) {
        out << "[label=\"" << labels[v] << "\", style=filled, fillcolor="
            << kColours[static_cast<std::size_t>(node_stream[v])] << ", shape=box]";
      },
      boost::default_writer(),
      [](std::ostream& out) {
        out << "rankdir=TB;\nlabel=\"fsdpsim schedule: compute (blue), all-gather (green), "
               "reduce-scatter (salmon)\";\n";
      });
  return os.str();
}

}  // namespace fsdp::viz

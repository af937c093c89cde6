// SPDX-License-Identifier: Apache-2.0
// Text, JSON and Chrome-trace renderings of a SimResult. Times in the text are milliseconds, in
// JSON picoseconds (exact) plus milliseconds; memory in GiB and bytes.
#include "sim/report/sim_report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <vector>

#include "core/base/number_text.h"
#include "core/base/strings.h"
#include "core/schedule/trace_events.h"

namespace fsdp::sim {
namespace {

std::string fixed(double v, int digits) { return fixed_text(v, digits); }

std::string gib(std::int64_t bytes) {
  return fixed(static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0), 1) + " GiB";
}

std::string sig3(double v) { return significant_text(v, 3); }

std::string ms(SimDuration d) { return sig3(d.ms()) + " ms"; }
std::string ms(SimTime t) { return sig3(t.ms()) + " ms"; }

std::string pct(double f) { return fixed(100.0 * f, 1) + "%"; }

const std::string& axis_name(const Schedule& schedule, std::int32_t axis) {
  return schedule.mesh().axis_name(axis);
}

}  // namespace

std::string render_sim_text(const SimResult& result, const Schedule& schedule,
                            const Hardware& hardware) {
  std::ostringstream os;
  os << "simulated step: " << to_string(schedule.mesh()) << " (" << schedule.mesh().size()
     << " ranks) on " << hardware.name() << ", " << schedule.num_microbatches()
     << " microbatches, " << result.classes.size() << " rank class"
     << (result.classes.size() == 1 ? "" : "es") << "\n";
  os << "  step time            " << ms(result.step_time) << "\n";
  if (result.straggler_ranks > 0) {
    const SimDuration cost = result.step_time - result.baseline_step_time;
    os << "  stragglers           " << result.straggler_ranks << " rank"
       << (result.straggler_ranks == 1 ? "" : "s") << " cost " << ms(cost) << " ("
       << pct(result.baseline_step_time.ps() > 0
                  ? static_cast<double>(cost.ps()) /
                        static_cast<double>(result.baseline_step_time.ps())
                  : 0.0)
       << "): " << ms(result.baseline_step_time) << " without them\n";
  }
  os << "  memory               " << (result.fits ? "fits" : "DOES NOT FIT") << " in "
     << gib(hardware.memory_bytes()) << " per device (peak reserved + outside the allocator)\n";
  os << "  links:";
  for (std::size_t a = 0; a < result.links.size(); ++a) {
    const AxisLink& l = result.links[a];
    os << (a == 0 ? " " : ", ") << axis_name(schedule, static_cast<std::int32_t>(a)) << "="
       << l.group_size << " " << (l.inter_node ? "inter-node" : "intra-node") << " "
       << fixed(static_cast<double>(l.bytes_per_s) * 1e-9, 0) << " GB/s, ";
    if (l.model == CollectiveModel::kNccl) {
      os << "nccl over " << l.nodes << (l.nodes == 1 ? " node" : " nodes") << " x "
         << l.ranks_per_node;
    } else {
      os << fixed(static_cast<double>(l.latency_ns) * 1e-3, 1) << " us";
    }
  }
  os << "\n";
  for (std::size_t c = 0; c < result.classes.size(); ++c) {
    const ClassResult& cr = result.classes[c];
    os << "\nclass " << c << " (rank " << cr.representative_rank << ", " << cr.num_ranks
       << " rank" << (cr.num_ranks == 1 ? "" : "s") << (cr.straggler ? ", stragglers" : "")
       << ")\n";
    os << "  end                  " << ms(cr.end) << "\n";
    os << "  compute busy         " << ms(cr.compute) << " ("
       << pct(cr.end.ps() > 0 ? static_cast<double>(cr.compute.ps()) /
                                    static_cast<double>(cr.end.ps())
                              : 0.0)
       << " of the step)\n";
    os << "  communication        " << ms(cr.communication) << " busy, "
       << ms(cr.exposed_communication) << " exposed, overlap " << pct(cr.overlap_fraction)
       << "\n";
    for (const CommStat& st : cr.comm) {
      os << "    " << to_string(st.stream) << " stream, axis " << axis_name(schedule, st.axis)
         << ": " << st.count << " collectives, " << ms(st.busy) << " busy, " << ms(st.exposed)
         << " exposed\n";
    }
    const MemoryResult& m = cr.memory;
    os << "  peak allocated       " << gib(m.peak_bytes) << " of " << gib(m.capacity_bytes)
       << " (resident " << gib(m.resident_bytes) << ")";
    if (m.runtime_outside_allocator_bytes > 0) {
      os << " beside " << gib(m.runtime_outside_allocator_bytes) << " of CUDA context and NCCL";
    }
    if (m.peak_op >= 0) {
      os << " at " << ms(m.peak_time) << ", op " << m.peak_op;
    }
    os << "\n";
    for (int b = 0; b < kNumBufferClasses; ++b) {
      const std::int64_t bytes = m.peak_by_class[static_cast<std::size_t>(b)];
      if (bytes != 0) {
        os << "    " << to_string(static_cast<BufferClass>(b)) << ": " << gib(bytes) << "\n";
      }
    }
    os << "  peak reserved        " << gib(m.peak_reserved_bytes)
       << " (caching allocator; " << (m.reserved_fits && m.fits ? "fits" : "DOES NOT FIT");
    if (!m.reserved_fits && m.first_reserved_overflow_op >= 0) {
      os << " from op " << m.first_reserved_overflow_op;
    }
    os << ")\n";
    if (!m.fits && m.first_overflow_op < 0) {
      os << "  overflow             the resident buffers alone exceed device memory\n";
    } else if (!m.fits) {
      os << "  overflow             first at op " << m.first_overflow_op << ", "
         << ms(m.first_overflow_time) << "\n";
    }
  }
  if (!result.collectives.empty()) {
    os << "\ncollectives (all classes)\n";
    for (const CollectiveKindStat& k : result.collectives) {
      os << "  " << to_string(k.kind) << " on " << axis_name(schedule, k.axis) << ": " << k.count
         << " calls, " << ms(k.time) << ", bus bandwidth "
         << sig3(k.bus_bytes_per_s() * 1e-9) << " GB/s\n";
    }
  }
  os << "\n" << result.events << " events simulated\n";
  return os.str();
}

nlohmann::json sim_result_to_json(const SimResult& result, const Schedule& schedule,
                                  const Hardware& hardware) {
  using nlohmann::json;
  json doc;
  doc["mesh"] = to_string(schedule.mesh());
  doc["ranks"] = schedule.mesh().size();
  doc["hardware"] = hardware.name();
  doc["microbatches"] = schedule.num_microbatches();
  doc["step_time_ps"] = result.step_time.ps();
  doc["step_time_ms"] = result.step_time.ms();
  doc["straggler_ranks"] = result.straggler_ranks;
  doc["baseline_step_time_ps"] = result.baseline_step_time.ps();
  doc["fits"] = result.fits;
  doc["events"] = result.events;
  json links = json::array();
  for (std::size_t a = 0; a < result.links.size(); ++a) {
    const AxisLink& l = result.links[a];
    links.push_back({{"axis", axis_name(schedule, static_cast<std::int32_t>(a))},
                     {"group_size", l.group_size},
                     {"inter_node", l.inter_node},
                     {"bytes_per_s", l.bytes_per_s},
                     {"latency_ns", l.latency_ns},
                     {"collectives", std::string(to_string(l.model))},
                     {"nodes", l.nodes},
                     {"ranks_per_node", l.ranks_per_node}});
  }
  doc["links"] = links;
  json classes = json::array();
  for (const ClassResult& cr : result.classes) {
    json c;
    c["representative_rank"] = cr.representative_rank;
    c["num_ranks"] = cr.num_ranks;
    c["program"] = cr.program;
    c["straggler"] = cr.straggler;
    c["end_ps"] = cr.end.ps();
    c["compute_ps"] = cr.compute.ps();
    c["communication_ps"] = cr.communication.ps();
    c["exposed_communication_ps"] = cr.exposed_communication.ps();
    c["overlap_fraction"] = cr.overlap_fraction;
    json comm = json::array();
    for (const CommStat& st : cr.comm) {
      comm.push_back({{"stream", std::string(to_string(st.stream))},
                      {"axis", axis_name(schedule, st.axis)},
                      {"count", st.count},
                      {"busy_ps", st.busy.ps()},
                      {"exposed_ps", st.exposed.ps()}});
    }
    c["communication"] = comm;
    const MemoryResult& m = cr.memory;
    json mem;
    mem["capacity_bytes"] = m.capacity_bytes;
    mem["runtime_outside_allocator_bytes"] = m.runtime_outside_allocator_bytes;
    mem["runtime_allocator_bytes"] = m.runtime_allocator_bytes;
    mem["resident_bytes"] = m.resident_bytes;
    mem["peak_bytes"] = m.peak_bytes;
    mem["peak_time_ps"] = m.peak_time.ps();
    mem["peak_op"] = m.peak_op;
    mem["end_bytes"] = m.end_bytes;
    mem["fits"] = m.fits;
    mem["first_overflow_op"] = m.first_overflow_op;
    mem["peak_reserved_bytes"] = m.peak_reserved_bytes;
    mem["end_reserved_bytes"] = m.end_reserved_bytes;
    mem["reserved_fits"] = m.reserved_fits;
    mem["first_reserved_overflow_op"] = m.first_reserved_overflow_op;
    json comp = json::object();
    json res = json::object();
    for (int b = 0; b < kNumBufferClasses; ++b) {
      const std::string name(to_string(static_cast<BufferClass>(b)));
      comp[name] = m.peak_by_class[static_cast<std::size_t>(b)];
      res[name] = m.resident_by_class[static_cast<std::size_t>(b)];
    }
    mem["peak_composition_bytes"] = comp;
    mem["resident_composition_bytes"] = res;
    c["memory"] = mem;
    classes.push_back(c);
  }
  doc["classes"] = classes;
  json colls = json::array();
  for (const CollectiveKindStat& k : result.collectives) {
    colls.push_back({{"kind", std::string(to_string(k.kind))},
                     {"axis", axis_name(schedule, k.axis)},
                     {"count", k.count},
                     {"time_ps", k.time.ps()},
                     {"bus_bytes", k.bus_bytes},
                     {"bus_bytes_per_s", k.bus_bytes_per_s()}});
  }
  doc["collectives"] = colls;
  return doc;
}

nlohmann::json chrome_trace(const SimResult& result, const Schedule& schedule) {
  nlohmann::json events = nlohmann::json::array();
  // Without stragglers class c is program c, and its ranks are those of rank_class() c.
  const bool by_program = result.classes.size() == schedule.programs().size();
  for (std::size_t c = 0; c < result.classes.size(); ++c) {
    const ClassResult& p = result.classes[c];
    std::vector<std::int64_t> ranks;
    for (std::size_t r = 0; by_program && r < schedule.rank_class().size(); ++r) {
      if (static_cast<std::size_t>(schedule.rank_class()[r]) == c) {
        ranks.push_back(static_cast<std::int64_t>(r));
      }
    }
    append_trace_process(events, static_cast<std::int64_t>(c),
                         str_cat("class ", c, " (rank ", p.representative_rank, ", ", p.num_ranks,
                                 " ranks", p.straggler ? ", stragglers" : "", ")"),
                         ranks);
  }
  for (const TraceRecord& r : result.trace) {
    const std::size_t program =
        static_cast<std::size_t>(result.classes[static_cast<std::size_t>(r.cls)].program);
    append_trace_op(events, schedule, schedule.programs()[program], r.op, r.cls, r.stream,
                    r.start.us(), (r.end - r.start).us());
  }
  // Each class's counter track gets one series per buffer class it ever holds (resident ones
  // included), the same series in every sample.
  std::vector<std::uint32_t> series(result.classes.size(), 0);
  for (std::size_t c = 0; c < result.classes.size(); ++c) {
    for (int b = 0; b < kNumBufferClasses; ++b) {
      if (result.classes[c].memory.resident_by_class[static_cast<std::size_t>(b)] > 0) {
        series[c] |= 1u << b;
      }
    }
  }
  for (const MemorySample& m : result.memory_trace) {
    for (int b = 0; b < kNumBufferClasses; ++b) {
      if (m.by_class[static_cast<std::size_t>(b)] > 0) {
        series[static_cast<std::size_t>(m.cls)] |= 1u << b;
      }
    }
  }
  for (const MemorySample& m : result.memory_trace) {
    append_trace_memory(events, m.cls, m.t.us(), m.bytes);
    append_trace_memory_by_class(events, m.cls, m.t.us(), m.by_class,
                                 series[static_cast<std::size_t>(m.cls)]);
  }
  return trace_document(std::move(events));
}

}  // namespace fsdp::sim

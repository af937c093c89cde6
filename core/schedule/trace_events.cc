// SPDX-License-Identifier: Apache-2.0
#include "core/schedule/trace_events.h"

#include <cstddef>
#include <vector>

namespace fsdp {

using nlohmann::json;

void append_trace_process(json& events, std::int64_t pid, const std::string& name,
                          std::span<const std::int64_t> ranks) {
  json args = {{"name", name}};
  if (!ranks.empty()) {
    args["ranks"] = std::vector<std::int64_t>(ranks.begin(), ranks.end());
  }
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", args}});
  for (int s = 0; s < kNumStreams; ++s) {
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", pid},
                      {"tid", s},
                      {"args", {{"name", std::string(to_string(static_cast<StreamKind>(s)))}}}});
  }
}

void append_trace_op(json& events, const Schedule& schedule, const RankProgram& program,
                     std::int32_t op_index, std::int64_t pid, StreamKind stream, double start_us,
                     double duration_us, std::int64_t step) {
  const Op& op = program.ops[static_cast<std::size_t>(op_index)];
  std::string name(to_string(op.kind));
  if (op.unit >= 0 && static_cast<std::size_t>(op.unit) < schedule.unit_names().size()) {
    name += " " + schedule.unit_names()[static_cast<std::size_t>(op.unit)];
  }
  json args = {{"op", op_index}, {"microbatch", op.microbatch}};
  if (step >= 0) {
    args["step"] = step;
  }
  if (is_collective(op.kind)) {
    args["axis"] = schedule.mesh().axis_name(op.axis);
    args["bytes"] = op.bytes;
  } else {
    args["flops"] = op.flops;
  }
  events.push_back({{"ph", "X"},
                    {"name", name},
                    {"cat", std::string(to_string(op.phase))},
                    {"pid", pid},
                    {"tid", static_cast<int>(stream)},
                    {"ts", start_us},
                    {"dur", duration_us},
                    {"args", args}});
}

void append_trace_memory(json& events, std::int64_t pid, double time_us, std::int64_t bytes) {
  events.push_back({{"ph", "C"},
                    {"name", "memory"},
                    {"pid", pid},
                    {"ts", time_us},
                    {"args", {{"GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0)}}}});
}

void append_trace_memory_by_class(json& events, std::int64_t pid, double time_us,
                                  const std::array<std::int64_t, kNumBufferClasses>& by_class,
                                  std::uint32_t series) {
  json args = json::object();
  for (int b = 0; b < kNumBufferClasses; ++b) {
    if ((series >> b) & 1u) {
      args[std::string(to_string(static_cast<BufferClass>(b)))] =
          static_cast<double>(by_class[static_cast<std::size_t>(b)]) / (1024.0 * 1024.0 * 1024.0);
    }
  }
  events.push_back({{"ph", "C"},
                    {"name", "memory by class"},
                    {"pid", pid},
                    {"ts", time_us},
                    {"args", std::move(args)}});
}

json trace_document(json events) {
  return json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// Chrome-trace events (chrome://tracing, Perfetto) for the ops of the schedule IR. The simulator's
// trace and the backends' measured trace are both built from these, so an op has the same name
// ("<kind> <unit>"), category (its phase) and arguments in both and `fsdpsim compare`-style tools
// can line them up. Times are microseconds.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "core/schedule/op.h"
#include "core/schedule/schedule.h"

namespace fsdp {

// Metadata: process `pid` is named `name`, and its threads 0..kNumStreams-1 are the streams.
// Non-empty `ranks` (the simulator's class of several ranks) go into the name event's "ranks"
// argument, so that a comparison can line its ops up with each rank's. Appends to `events` (a
// JSON array).
void append_trace_process(nlohmann::json& events, std::int64_t pid, const std::string& name,
                          std::span<const std::int64_t> ranks = {});

// A complete ("X") event for op `op_index` of `program`, run on `stream` of process `pid`.
// `step` < 0 leaves the step out of the arguments.
void append_trace_op(nlohmann::json& events, const Schedule& schedule, const RankProgram& program,
                     std::int32_t op_index, std::int64_t pid, StreamKind stream, double start_us,
                     double duration_us, std::int64_t step = -1);

// A "memory" counter sample (GiB) of process `pid`.
void append_trace_memory(nlohmann::json& events, std::int64_t pid, double time_us,
                         std::int64_t bytes);

// A "memory by class" counter sample (GiB) of process `pid`: one series per buffer class whose
// bit (1 << BufferClass) is set in `series`, named as to_string(BufferClass) names it, so that
// Perfetto stacks the classes. Pass the same `series` for every sample of a process (a track's
// series should not come and go); the series sum to the "memory" counter's total when `series`
// holds every class with bytes.
void append_trace_memory_by_class(nlohmann::json& events, std::int64_t pid, double time_us,
                                  const std::array<std::int64_t, kNumBufferClasses>& by_class,
                                  std::uint32_t series);

// The document: {"traceEvents": events, "displayTimeUnit": "ms"}.
nlohmann::json trace_document(nlohmann::json events);

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// Reads a Chrome trace written with the naming of core/schedule/trace_events.h (`fsdpsim simulate
// --trace`, `fsdpsim train --trace`, `fsdpsim calibrate --trace`): the ops that take time (compute
// and collectives) keyed by process, step, stream and op index. Used by `fsdpsim compare` and
// `fsdpsim calibrate --fit`.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/base/expected.h"

namespace fsdp::cli {

// Where an op sits: rank, step, stream, op index in the rank's program.
using OpKey = std::tuple<std::int64_t, std::int64_t, int, std::int32_t>;

struct TraceOp {
  std::string name;
  std::string kind;     // the name up to the first space ("all-gather", "forward", ...)
  std::int64_t bytes = -1;  // collectives only
  std::int64_t flops = -1;  // compute only, when the trace gives it (args.flops)
  std::string axis;         // collectives only, when the trace gives it (args.axis)
  double start_us = 0;
  double dur_us = 0;
};

// One trace: its ops per (pid, step, stream, op) and the ranks each pid stands for.
struct Trace {
  std::string path;
  std::map<std::tuple<std::int64_t, std::int64_t, int, std::int32_t>, TraceOp> ops;
  std::map<std::int64_t, std::vector<std::int64_t>> ranks_of_pid;
  std::set<std::int64_t> steps;
};

// Whether `kind` (an op name's first word) names a collective.
bool is_collective_kind(const std::string& kind);

// The trace at `path`. Errors (kInvalidArgument) name the file and, for malformed JSON, the line,
// column and byte; for a bad event its index, the field, the expected and the actual type.
Expected<Trace> read_trace(const std::string& path);

}  // namespace fsdp::cli

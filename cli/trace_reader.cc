// SPDX-License-Identifier: Apache-2.0
#include "cli/trace_reader.h"

#include <cstddef>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/base/printable.h"
#include "core/base/strings.h"
#include "core/schedule/op.h"

namespace fsdp::cli {

using nlohmann::json;

namespace {

bool is_timed_kind(const std::string& kind) {
  for (int k = 0; k < kNumOpKinds; ++k) {
    const auto op = static_cast<OpKind>(k);
    if (to_string(op) == kind) {
      return is_compute(op) || is_collective(op);
    }
  }
  return false;
}

}  // namespace

bool is_collective_kind(const std::string& kind) {
  return kind == to_string(OpKind::kAllGather) || kind == to_string(OpKind::kReduceScatter) ||
         kind == to_string(OpKind::kAllReduce);
}

namespace {

// 1-based line and column of byte `pos` of `text`.
std::pair<std::size_t, std::size_t> line_column(const std::string& text, std::size_t pos) {
  std::size_t line = 1;
  std::size_t column = 1;
  for (std::size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

Error format_error(const std::string& path, const std::string& what) {
  return Error(ErrorCode::kInvalidArgument,
               str_cat("'", path, "' is not a trace of fsdpsim: ", what));
}

// A field of event `i` of the expected JSON type, else an error naming it.
Expected<const json*> field(const std::string& path, const json& event, std::size_t i,
                            const char* name, bool (json::*is_type)() const noexcept,
                            const char* type) {
  const json* at = &event;
  std::string full;
  for (std::string_view rest = name; !rest.empty();) {
    const std::size_t dot = rest.find('.');
    const std::string part(rest.substr(0, dot));
    full += (full.empty() ? "" : ".") + part;
    if (!at->is_object() || !at->contains(part)) {
      return format_error(path, str_cat("traceEvents[", i, "] has no field '", full, "'"));
    }
    at = &(*at)[part];
    rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
  }
  if (!((*at).*is_type)()) {
    return format_error(path, str_cat("traceEvents[", i, "] field '", name, "' is ",
                                      at->type_name(), "; expected ", type));
  }
  return at;
}

}  // namespace

namespace {
Expected<Trace> trace_of(const std::string& path, const json& doc);
}  // namespace

Expected<Trace> read_trace(const std::string& path) {
  FSDP_TRY(std::string text, read_text_file(path));
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    const auto [line, column] = line_column(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    if (const std::size_t colon = what.find(": "); colon != std::string::npos) {
      what = what.substr(colon + 2);  // drop nlohmann's "[json.exception.parse_error.101] ..."
    }
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("'", path, "' is not valid JSON at line ", line, ", column ", column,
                         " (byte ", e.byte, "): ", what));
  } catch (const json::exception& e) {
    // Not a syntax error but a value nlohmann cannot hold (a number past double's range):
    // the reason without the library's "[json.exception.out_of_range.406] " prefix.
    std::string what = e.what();
    if (const std::size_t close = what.find("] "); close != std::string::npos) {
      what = what.substr(close + 2);
    }
    return Error(ErrorCode::kInvalidArgument, str_cat("'", path, "' is not valid JSON: ", what));
  }
  if (!doc.is_object() || !doc.contains("traceEvents")) {
    return format_error(path, "missing field 'traceEvents'");
  }
  if (!doc["traceEvents"].is_array()) {
    return format_error(path, "field 'traceEvents' is not an array");
  }
  try {
    return trace_of(path, doc);
  } catch (const json::exception& e) {
    // A net under the field checks: the reason, never nlohmann's "[json.exception...]" text.
    std::string what = e.what();
    if (const std::size_t close = what.find("] "); close != std::string::npos) {
      what = what.substr(close + 2);
    }
    return format_error(path, what);
  }
}

namespace {

// The events of a parsed trace `doc` (an object whose 'traceEvents' is an array).
Expected<Trace> trace_of(const std::string& path, const json& doc) {
  Trace trace;
  trace.path = path;
  const json& events = doc["traceEvents"];
  using J = json;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& ev = events[i];
    FSDP_TRY(const json* ph, field(path, ev, i, "ph", &J::is_string, "a string"));
    const bool named_process = ev.contains("name") && ev["name"].is_string() &&
                               ev["name"].get_ref<const std::string&>() == "process_name";
    if (*ph == "M" && named_process) {
      FSDP_TRY(const json* pid, field(path, ev, i, "pid", &J::is_number_integer, "an integer"));
      if (ev.contains("args") && ev["args"].contains("ranks")) {
        FSDP_TRY(const json* ranks, field(path, ev, i, "args.ranks", &J::is_array, "an array"));
        auto& list = trace.ranks_of_pid[pid->get<std::int64_t>()];
        for (const json& r : *ranks) {
          if (!r.is_number_integer()) {
            return format_error(path, str_cat("traceEvents[", i, "] field 'args.ranks' holds ",
                                              r.type_name(), "; expected integers"));
          }
          list.push_back(r.get<std::int64_t>());
        }
      }
      continue;
    }
    if (*ph != "X") {
      continue;
    }
    FSDP_TRY(const json* name, field(path, ev, i, "name", &J::is_string, "a string"));
    TraceOp op;
    op.name = name->get<std::string>();
    // `compare` prints op names: no escape sequences from a file reach the terminal (issue 16).
    if (auto printable = check_printable_name("op", op.name); !printable) {
      return format_error(path, str_cat("traceEvents[", i, "] field 'name': ",
                                        printable.error().message()));
    }
    op.kind = op.name.substr(0, op.name.find(' '));
    if (!is_timed_kind(op.kind)) {
      continue;  // records, waits, allocs and frees take no time in the simulator's trace
    }
    FSDP_TRY(const json* pid, field(path, ev, i, "pid", &J::is_number_integer, "an integer"));
    FSDP_TRY(const json* tid, field(path, ev, i, "tid", &J::is_number_integer, "an integer"));
    FSDP_TRY(const json* ts, field(path, ev, i, "ts", &J::is_number, "a number"));
    FSDP_TRY(const json* dur, field(path, ev, i, "dur", &J::is_number, "a number"));
    FSDP_TRY(const json* index, field(path, ev, i, "args.op", &J::is_number_integer,
                                      "an integer"));
    std::int64_t step = 0;
    if (ev["args"].contains("step")) {
      FSDP_TRY(const json* s, field(path, ev, i, "args.step", &J::is_number_integer,
                                    "an integer"));
      step = s->get<std::int64_t>();
    }
    if (is_collective_kind(op.kind)) {
      FSDP_TRY(const json* bytes, field(path, ev, i, "args.bytes", &J::is_number_integer,
                                        "an integer"));
      op.bytes = bytes->get<std::int64_t>();
      if (ev["args"].contains("axis")) {
        FSDP_TRY(const json* axis, field(path, ev, i, "args.axis", &J::is_string, "a string"));
        op.axis = axis->get<std::string>();
      }
    } else if (ev["args"].contains("flops")) {
      FSDP_TRY(const json* flops, field(path, ev, i, "args.flops", &J::is_number_integer,
                                        "an integer"));
      op.flops = flops->get<std::int64_t>();
    }
    const std::int64_t stream = tid->get<std::int64_t>();
    if (stream < 0 || stream >= kNumStreams) {
      return format_error(path, str_cat("traceEvents[", i, "] field 'tid' is ", stream,
                                        "; expected a stream in [0, ", kNumStreams, ")"));
    }
    op.start_us = ts->get<double>();
    op.dur_us = dur->get<double>();
    trace.steps.insert(step);
    const auto key = std::make_tuple(pid->get<std::int64_t>(), step, static_cast<int>(stream),
                                     index->get<std::int32_t>());
    if (!trace.ops.emplace(key, std::move(op)).second) {
      return format_error(path, str_cat("traceEvents[", i, "] repeats op ", std::get<3>(key),
                                        " of process ", std::get<0>(key), " step ", step));
    }
  }
  if (trace.ops.empty()) {
    return format_error(path, "no op events (\"ph\": \"X\" with a compute or collective name)");
  }
  return trace;
}

}  // namespace
}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
// Renderers of a Schedule: a text listing per rank class and stream, JSON for scripts (with a
// `summary` of collective counts per kind and mesh axis), and Graphviz DOT (one node per op for
// small schedules, one node per unit and phase for large ones, so the graph stays readable).
#pragma once

#include <cstdint>
#include <string>

#include "core/schedule/schedule.h"

#include <nlohmann/json.hpp>

namespace fsdp::viz {

// Text: a header (mesh, classes, collective counts), then per class its resident buffers and its
// ops stream by stream. At most max_ops_per_stream ops are listed per stream (the rest counted).
std::string render_schedule_text(const Schedule& schedule, std::int64_t max_ops_per_stream = 200);

// JSON: mesh, microbatches, unified_streams, summary, collectives, classes (ops with every
// field), and rank_class as runs [{"first": r, "count": n, "class": c}, ...].
nlohmann::json schedule_to_json(const Schedule& schedule);

// DOT of the program of class 0: op nodes coloured by stream, edges for stream order and events
// (record -> wait become direct edges). Above max_detailed_ops ops, nodes are (unit, microbatch,
// phase) summaries.
std::string render_schedule_dot(const Schedule& schedule, std::int64_t max_detailed_ops = 400);

}  // namespace fsdp::viz

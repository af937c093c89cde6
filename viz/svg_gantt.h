// SPDX-License-Identifier: Apache-2.0
// render_gantt_svg: an SVG Gantt chart of one simulated optimizer step: one lane per stream
// (compute, all-gather, reduce-scatter) of each rank class, labelled with the mesh axes its
// collectives ran on, one rectangle (class="op", with a tooltip) per op that took simulated time,
// coloured by op kind, over a time axis in milliseconds. The label column widens (and the image
// with it, past GanttOptions::width if need be) to fit the longest label. The same input gives
// the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/schedule/op.h"
#include "core/schedule/schedule.h"
#include "sim/engine/sim_result.h"

namespace fsdp::viz {

struct GanttOptions {
  double width = 1200;             // pixels (at least; more when labels are long)
  double lane_height = 18;         // pixels per stream lane
  std::int32_t max_classes = 8;    // classes drawn (the first ones); the rest are counted
};

// Fill colour of an op kind, shared with the legend ("#4e79a7" for all-gathers, ...).
std::string_view op_kind_color(OpKind kind);

// Needs a result simulated with SimOptions::record_trace (otherwise the lanes are empty). Lanes are
// drawn for result.classes[0, max_classes) and, per class, for each stream that ran an op.
std::string render_gantt_svg(const sim::SimResult& result, const Schedule& schedule,
                             const GanttOptions& options = {});

}  // namespace fsdp::viz

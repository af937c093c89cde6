// SPDX-License-Identifier: Apache-2.0
// render_memory_svg: an SVG plot of the allocated device memory of one rank of each simulated rank
// class over one optimizer step. One panel per class: the resident buffers stacked by buffer class
// (constant over the step), the transient bytes above them as a step function of simulated time,
// the device capacity (dashed), the caching allocator's peak reservation (dotted) and the peak
// instant. Axes in milliseconds and GiB; the same input gives the same bytes.
#pragma once

#include <cstdint>
#include <string>

#include "core/hardware/hardware.h"
#include "core/schedule/schedule.h"
#include "sim/engine/sim_result.h"

namespace fsdp::viz {

struct MemoryPlotOptions {
  double width = 960;              // pixels
  double panel_height = 220;       // pixels per class
  std::int32_t max_classes = 8;    // classes drawn (the first ones); the rest are counted
};

// `result` should come from a run with SimOptions::record_trace; without samples each panel
// shows the resident level only and says so. Panels are drawn for result.classes[0, max_classes).
std::string render_memory_svg(const sim::SimResult& result, const Schedule& schedule,
                              const Hardware& hardware, const MemoryPlotOptions& options = {});

}  // namespace fsdp::viz

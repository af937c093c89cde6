// SPDX-License-Identifier: Apache-2.0
// render_memory_svg: an SVG plot of the allocated device memory of one rank of each simulated rank
// class over one optimizer step. One panel per class: the live bytes of every buffer class
// (BufferClass: sharded weights, main grads, optimizer state, unsharded weights, partial grads,
// unit grads, activations) stacked in that order as step functions of simulated time, one filled
// path (class="stack", data-buffer-class=to_string(BufferClass)) and one legend colour per class
// that holds bytes; the device capacity (dashed), the caching allocator's peak reservation
// (dotted) and the peak instant. Axes in milliseconds and GiB; the same input gives the same
// bytes.
#pragma once

#include <cstdint>
#include <string>

#include "core/hardware/hardware.h"
#include "core/schedule/schedule.h"
#include "sim/engine/sim_result.h"

namespace fsdp::viz {

struct MemoryPlotOptions {
  double width = 960;              // pixels (at least; more when a title needs it)
  double panel_height = 220;       // pixels per class
  std::int32_t max_classes = 8;    // classes drawn (the first ones); the rest are counted
};

// `result` should come from a run with SimOptions::record_trace (MemorySample::by_class); without
// samples each panel shows the resident bands only and says so. Panels are drawn for result.classes[0, max_classes).
std::string render_memory_svg(const sim::SimResult& result, const Schedule& schedule,
                              const Hardware& hardware, const MemoryPlotOptions& options = {});

}  // namespace fsdp::viz

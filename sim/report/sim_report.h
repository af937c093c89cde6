// SPDX-License-Identifier: Apache-2.0
// Renders a SimResult: a text summary any engineer can read (step time, compute, exposed
// communication per stream and axis, overlap, bus bandwidth, peak memory with composition, fit),
// the same as JSON, and a Chrome trace (chrome://tracing, Perfetto): one process per rank class,
// one thread per stream, a memory counter track (the total) and a memory-by-class counter track
// (one series per buffer class, stacked).
#pragma once

#include <string>

#include "core/hardware/hardware.h"
#include "core/schedule/schedule.h"
#include "sim/engine/sim_result.h"

#include <nlohmann/json.hpp>

namespace fsdp::sim {

std::string render_sim_text(const SimResult& result, const Schedule& schedule,
                            const Hardware& hardware);
nlohmann::json sim_result_to_json(const SimResult& result, const Schedule& schedule,
                                  const Hardware& hardware);
// Needs a result simulated with SimOptions::record_trace (otherwise only metadata is written).
nlohmann::json chrome_trace(const SimResult& result, const Schedule& schedule);

}  // namespace fsdp::sim

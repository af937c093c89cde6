// SPDX-License-Identifier: Apache-2.0
// The CLI's text around the sweep engine (sweep/sweep.h): a --prefetch list item in; the table
// and the report JSON of `fsdpsim sweep` out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/expected.h"
#include "core/hardware/hardware.h"
#include "core/policy/schedule_policy.h"
#include "sweep/sweep.h"

#include <nlohmann/json.hpp>

namespace fsdp::cli {

// A list item of --prefetch: a depth K (0 = none, K = next(K), at most 6 digits) or a policy
// (none | next(K) | budget(ELEMENTS), as parse_prefetch_policy reads them).
Expected<PrefetchPolicy> parse_sweep_prefetch(std::string_view text);

struct SweepReport {
  std::string model;
  const Hardware* hardware = nullptr;
  std::int64_t ranks = 0;
  std::int64_t tokens_per_microbatch = 0;  // per rank: seq-len x micro-batch-size
  const std::vector<sweep::SweepPoint>* points = nullptr;
  const std::vector<sweep::SweepOutcome>* outcomes = nullptr;  // outcomes[i]: points[i]'s
};

enum class SweepSort { kThroughput, kMemory, kConfig };

// A table sorted by `sort` (ties by index; throughput: fitting rows first, most tokens/s/GPU
// first; memory: least peak reserved first): Pareto mark, the point's dimensions, step time,
// tokens/s/GPU, TFLOP/s/GPU, MFU, peak reserved, headroom, fit; then a summary and the failed configurations.
// front_only lists the Pareto front only.
std::string render_sweep_text(const SweepReport& report, SweepSort sort, bool front_only);
// {"model", "hardware", "ranks", "configurations": [...in index order...], "pareto_front":
// [indices, fastest first], "summary": {...}}.
nlohmann::json sweep_to_json(const SweepReport& report);

}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
// ASCII diagrams of a GlobalLayout in the reference's style: one line per rank, cells labelled
// "P<i> row <r>", "P<i>" (a one-row tensor), "gap" and "pad". Small layouts use four character
// columns per element; large ones collapse runs of rows ("P7 rows 0-4095") into cells whose widths
// stay roughly proportional, and elide ranks and cells beyond the configured limits.
#pragma once

#include <cstdint>
#include <string>

#include "core/layout/global_layout.h"

namespace fsdp::viz {

struct AsciiLayoutOptions {
  std::int64_t max_detailed_rank_elements = 32;  // above this, rows collapse into runs
  int collapsed_width = 96;                      // target columns per rank line when collapsed
  int max_cells_per_rank = 16;                   // beyond this, middle cells collapse to "…"
  std::int64_t max_ranks = 64;                   // beyond this, middle ranks are elided
};

// One line per rank, each ending in '\n'.
std::string render_layout_ascii(const GlobalLayout& layout, const AsciiLayoutOptions& options = {});

}  // namespace fsdp::viz

// SPDX-License-Identifier: Apache-2.0
// Machine- and human-readable reports of a GlobalLayout: JSON for scripts (tensor_offsets,
// rank_offsets, size, statistics) and a per-rank table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/layout/global_layout.h"

#include <nlohmann/json.hpp>

namespace fsdp::viz {

// What was asked for, echoed into the reports.
struct LayoutRequest {
  std::string placement;     // "row", "block" or "tensor"
  std::string shard_layout;  // "padded" or "unpadded" ("unpadded" for tensor placement)
  std::int64_t block_size = 1;
  std::string dtype = "bf16";
  std::int64_t bytes_per_element = 2;
  std::vector<std::string> tensor_names;  // one per tensor; empty means P<i>
  std::vector<std::int64_t> owners;       // tensor placement only
};

nlohmann::json layout_to_json(const GlobalLayout& layout, const LayoutRequest& request);

// A header with totals, then one line per rank: offset, elements, data, gap, pad, tensors, bytes.
// Elides middle ranks beyond max_ranks.
std::string render_layout_table(const GlobalLayout& layout, const LayoutRequest& request,
                                std::int64_t max_ranks = 64);

// Totals in one or two lines: size, data, gap and padding elements, imbalance.
std::string render_layout_summary(const GlobalLayout& layout, const LayoutRequest& request);

}  // namespace fsdp::viz

// SPDX-License-Identifier: Apache-2.0
#include "viz/layout_report.h"

#include <iomanip>
#include <sstream>

#include "core/base/strings.h"
#include "core/layout/layout_stats.h"

namespace fsdp::viz {
namespace {

std::string tensor_name(const LayoutRequest& request, std::size_t i) {
  return i < request.tensor_names.size() ? request.tensor_names[i] : str_cat("P", i);
}

std::string percent(std::int64_t part, std::int64_t whole) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2)
     << (whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole)) << "%";
  return os.str();
}

}  // namespace

nlohmann::json layout_to_json(const GlobalLayout& layout, const LayoutRequest& request) {
  const LayoutStats stats = compute_layout_stats(layout);
  nlohmann::json j;
  j["placement"] = request.placement;
  j["shard_layout"] = request.shard_layout;
  j["dp"] = layout.dp_size();
  j["block"] = request.block_size;
  j["dtype"] = request.dtype;
  j["size"] = layout.size();
  j["tensor_offsets"] = layout.tensor_to_offset();
  j["rank_offsets"] = layout.rank_to_offset();
  nlohmann::json tensors = nlohmann::json::array();
  for (std::size_t i = 0; i < layout.tensor_shapes().size(); ++i) {
    const Shape& s = layout.tensor_shapes()[i];
    nlohmann::json t = {{"id", i},
                        {"name", tensor_name(request, i)},
                        {"shape", std::vector<std::int64_t>(s.dims().begin(), s.dims().end())},
                        {"offset", layout.tensor_to_offset()[i]},
                        {"numel", s.numel()}};
    if (i < request.owners.size()) {
      t["owner"] = request.owners[i];
    }
    tensors.push_back(std::move(t));
  }
  j["tensors"] = std::move(tensors);
  nlohmann::json st;
  st["data_elements"] = stats.data_elements;
  st["gap_elements"] = stats.gap_elements;
  st["pad_elements"] = stats.pad_elements;
  st["min_rank_elements"] = stats.min_rank_elements;
  st["max_rank_elements"] = stats.max_rank_elements;
  st["mean_rank_elements"] = stats.mean_rank_elements;
  st["imbalance"] = stats.imbalance;
  st["bytes_per_element"] = request.bytes_per_element;
  auto max_bytes = max_rank_bytes(layout, request.bytes_per_element);
  st["max_rank_bytes"] = max_bytes ? nlohmann::json(*max_bytes) : nlohmann::json(nullptr);
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t k = 0; k < stats.ranks.size(); ++k) {
    const RankStats& r = stats.ranks[k];
    ranks.push_back({{"rank", k},
                     {"offset", r.offset},
                     {"elements", r.elements},
                     {"data_elements", r.data_elements},
                     {"gap_elements", r.gap_elements},
                     {"pad_elements", r.pad_elements},
                     {"tensors", r.num_tensors}});
  }
  st["ranks"] = std::move(ranks);
  j["statistics"] = std::move(st);
  return j;
}

std::string render_layout_summary(const GlobalLayout& layout, const LayoutRequest& request) {
  const LayoutStats s = compute_layout_stats(layout);
  std::ostringstream os;
  os << layout.num_tensors() << " tensors, dp " << layout.dp_size() << ", placement "
     << request.placement;
  if (request.placement != "tensor") {
    os << " (" << request.shard_layout << ", block " << request.block_size << ")";
  }
  os << "\nsize " << s.size << " elements: data " << s.data_elements << ", gap " << s.gap_elements
     << ", pad " << s.pad_elements << " (" << percent(s.gap_elements + s.pad_elements, s.size)
     << " unused)\nper rank: min " << s.min_rank_elements << ", max " << s.max_rank_elements
     << ", mean " << std::fixed << std::setprecision(1) << s.mean_rank_elements
     << " elements, imbalance (max/mean) " << std::setprecision(4) << s.imbalance;
  auto bytes = max_rank_bytes(layout, request.bytes_per_element);
  if (bytes) {
    os << ", largest rank " << *bytes << " bytes in " << request.dtype;
  }
  os << "\n";
  return os.str();
}

std::string render_layout_table(const GlobalLayout& layout, const LayoutRequest& request,
                                std::int64_t max_ranks) {
  const LayoutStats s = compute_layout_stats(layout);
  std::ostringstream os;
  os << render_layout_summary(layout, request) << "\n";
  os << std::right << std::setw(6) << "rank" << std::setw(16) << "offset" << std::setw(16)
     << "elements" << std::setw(16) << "data" << std::setw(12) << "gap" << std::setw(12) << "pad"
     << std::setw(10) << "tensors" << std::setw(18) << "bytes" << "\n";
  const std::int64_t dp = layout.dp_size();
  const std::int64_t head = max_ranks / 2;
  for (std::int64_t k = 0; k < dp; ++k) {
    if (dp > max_ranks && k == head) {
      os << "   ... " << dp - 2 * head << " ranks not shown\n";
      k = dp - head - 1;
      continue;
    }
    const RankStats& r = s.ranks[static_cast<std::size_t>(k)];
    std::int64_t bytes = 0;
    const bool ok = !__builtin_mul_overflow(r.elements, request.bytes_per_element, &bytes);
    // Each cell right-aligned in its column, and at least one space wide of the cell before,
    // so numbers wider than their column never run together (issue 16, class 6).
    const auto cell = [&os](const std::string& text, std::size_t width) {
      os << std::string(width > text.size() ? width - text.size() : 1, ' ') << text;
    };
    cell(std::to_string(k), 6);
    cell(std::to_string(r.offset), 16);
    cell(std::to_string(r.elements), 16);
    cell(std::to_string(r.data_elements), 16);
    cell(std::to_string(r.gap_elements), 12);
    cell(std::to_string(r.pad_elements), 12);
    cell(std::to_string(r.num_tensors), 10);
    cell(ok ? std::to_string(bytes) : std::string("overflow"), 18);
    os << "\n";
  }
  return os.str();
}

}  // namespace fsdp::viz

// SPDX-License-Identifier: Apache-2.0
#include "viz/layout_ascii.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <vector>

#include "core/base/strings.h"

namespace fsdp::viz {
namespace {

enum class CellKind { kTensor, kGap, kPad, kElided };

struct Cell {
  CellKind kind;
  std::int64_t tensor = -1;
  std::int64_t row_begin = 0;  // rows [row_begin, row_end) of the tensor
  std::int64_t row_end = 0;
  std::int64_t elements = 0;
  std::int64_t elided = 0;  // cells merged into a kElided cell
};

std::string label(const Cell& c, const GlobalLayout& layout) {
  switch (c.kind) {
    case CellKind::kGap:
      return "gap";
    case CellKind::kPad:
      return "pad";
    case CellKind::kElided:
      return str_cat("... ", c.elided, " more");
    case CellKind::kTensor:
      break;
  }
  const Shape& s = layout.tensor_shapes()[static_cast<std::size_t>(c.tensor)];
  if (s.rows() == 1) {
    return str_cat("P", c.tensor);
  }
  if (c.row_end - c.row_begin == 1) {
    return str_cat("P", c.tensor, " row ", c.row_begin);
  }
  return str_cat("P", c.tensor, " rows ", c.row_begin, "-", c.row_end - 1);
}

// Cells of segment [begin, end): tensors (sorted by offset, from *cursor on), gaps and padding.
std::vector<Cell> segment_cells(const GlobalLayout& layout, const std::vector<std::int64_t>& order,
                                std::size_t* cursor, std::int64_t begin, std::int64_t end,
                                std::int64_t data_end, bool per_row) {
  std::vector<Cell> cells;
  auto add_unused = [&](std::int64_t from, std::int64_t to) {
    if (from < to && from < data_end) {
      cells.push_back({CellKind::kGap, -1, 0, 0, std::min(to, data_end) - from, 0});
    }
    if (from < to && to > data_end) {
      cells.push_back({CellKind::kPad, -1, 0, 0, to - std::max(from, data_end), 0});
    }
  };
  // Skip tensors that end at or before this segment.
  while (*cursor < order.size() && layout.get_tensor_range(order[*cursor]).end() <= begin) {
    ++*cursor;
  }
  std::int64_t p = begin;
  for (std::size_t k = *cursor; k < order.size(); ++k) {
    const std::int64_t t = order[k];
    const Range r = layout.get_tensor_range(t);
    if (r.start >= end) {
      break;
    }
    add_unused(p, r.start);
    const std::int64_t from = std::max(begin, r.start);
    const std::int64_t to = std::min(end, r.end());
    const std::int64_t row = layout.tensor_shapes()[static_cast<std::size_t>(t)].row_size();
    const std::int64_t rb = (from - r.start) / row;
    const std::int64_t re = (to - r.start + row - 1) / row;
    if (per_row) {
      for (std::int64_t i = rb; i < re; ++i) {
        cells.push_back({CellKind::kTensor, t, i, i + 1, row, 0});
      }
    } else {
      cells.push_back({CellKind::kTensor, t, rb, re, to - from, 0});
    }
    p = to;
  }
  add_unused(p, end);
  return cells;
}

std::vector<Cell> elide_cells(std::vector<Cell> cells, int max_cells) {
  if (static_cast<int>(cells.size()) <= max_cells) {
    return cells;
  }
  const std::size_t keep = static_cast<std::size_t>(std::max(2, max_cells - 1) / 2);
  Cell mid{CellKind::kElided, -1, 0, 0, 0, 0};
  for (std::size_t i = keep; i < cells.size() - keep; ++i) {
    mid.elements += cells[i].elements;
    ++mid.elided;
  }
  std::vector<Cell> out(cells.begin(), cells.begin() + static_cast<std::ptrdiff_t>(keep));
  out.push_back(mid);
  out.insert(out.end(), cells.end() - static_cast<std::ptrdiff_t>(keep), cells.end());
  return out;
}

}  // namespace

std::string render_layout_ascii(const GlobalLayout& layout, const AsciiLayoutOptions& options) {
  const std::int64_t dp = layout.dp_size();
  std::int64_t max_seg = 0;
  for (std::int64_t k = 0; k < dp; ++k) {
    max_seg = std::max(max_seg, layout.rank_size(k));
  }
  const bool detailed = max_seg <= options.max_detailed_rank_elements;

  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(layout.num_tensors()));
  std::int64_t data_end = 0;
  for (std::int64_t i = 0; i < layout.num_tensors(); ++i) {
    const Range r = layout.get_tensor_range(i);
    if (r.numel > 0) {
      order.push_back(i);
      data_end = std::max(data_end, r.end());
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return layout.get_tensor_range(a).start < layout.get_tensor_range(b).start;
  });

  const int rank_w = static_cast<int>(std::to_string(std::max<std::int64_t>(dp - 1, 0)).size());
  const int off_w = static_cast<int>(std::to_string(layout.size()).size());
  auto pad_left = [](std::int64_t v, int w) {
    std::string s = std::to_string(v);
    return std::string(static_cast<std::size_t>(std::max(0, w - static_cast<int>(s.size()))),
                       ' ') +
           s;
  };

  std::ostringstream os;
  std::size_t cursor = 0;
  const std::int64_t head = options.max_ranks / 2;
  for (std::int64_t k = 0; k < dp; ++k) {
    if (dp > options.max_ranks && k == head) {
      const std::int64_t skip = dp - 2 * head;
      os << "... " << skip << " ranks not shown (ranks " << head << "-" << head + skip - 1
         << ")\n";
      k = head + skip - 1;
      continue;
    }
    const std::int64_t begin = layout.rank_to_offset()[static_cast<std::size_t>(k)];
    const std::int64_t seg = layout.rank_size(k);
    os << "rank " << pad_left(k, rank_w) << " [" << pad_left(begin, off_w) << ", "
       << pad_left(begin + seg, off_w) << "): ";
    if (seg == 0) {
      os << "(empty)\n";
      continue;
    }
    std::vector<Cell> cells =
        segment_cells(layout, order, &cursor, begin, begin + seg, data_end, detailed);
    cells = elide_cells(std::move(cells), options.max_cells_per_rank);
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string text = label(cells[i], layout);
      std::int64_t width = 0;
      if (detailed) {
        width = 4 * cells[i].elements + (i + 1 == cells.size() ? 1 : 0);
      } else {
        width = options.collapsed_width * cells[i].elements / seg;
      }
      width = std::max<std::int64_t>(width, static_cast<std::int64_t>(text.size()) + 3);
      os << "| " << text << std::string(static_cast<std::size_t>(width) - text.size() - 2, ' ');
    }
    os << "|\n";
  }
  return os.str();
}

}  // namespace fsdp::viz

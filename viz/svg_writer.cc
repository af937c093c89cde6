// SPDX-License-Identifier: Apache-2.0
#include "viz/svg_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/base/check.h"
#include "core/base/strings.h"

namespace fsdp::viz {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: {
        const auto u = static_cast<unsigned char>(ch);
        out += (u < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') ? ' ' : ch;
      }
    }
  }
  return out;
}

std::string svg_number(double v, int digits) {
  if (!std::isfinite(v)) {
    v = 0.0;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  std::string s = buf;
  // "-0.00" would make two identical drawings differ by a sign.
  if (s.front() == '-' && s.find_first_not_of("-0.") == std::string::npos) {
    s.erase(0, 1);
  }
  return s;
}

std::vector<double> nice_ticks(double max_value, int max_ticks) {
  std::vector<double> ticks = {0.0};
  if (!(max_value > 0.0) || !std::isfinite(max_value) || max_ticks < 1) {
    return ticks;
  }
  const double raw = max_value / max_ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude * 10.0;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  }
  // Multiply rather than accumulate so that rounding does not drift.
  for (int i = 1; i * step <= max_value * (1.0 + 1e-9); ++i) {
    ticks.push_back(i * step);
  }
  return ticks;
}

std::size_t classes_to_draw(std::size_t num_classes, std::int32_t max_classes) {
  return std::min(num_classes, static_cast<std::size_t>(std::max(max_classes, 1)));
}

double estimated_text_width(std::string_view text, double font_size) {
  double em = 0;
  for (char ch : text) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x80) {
      em += 0.62;
    } else if ((u & 0xC0) != 0x80) {  // the first byte of a multi-byte code point
      em += 1.0;
    }
  }
  return em * font_size;
}

namespace {

constexpr double kLegendFontSize = 12;  // the document's default

// Swatch, gap, label, space before the next entry.
double legend_item_width(const LegendItem& item) {
  return 18 + estimated_text_width(item.label, kLegendFontSize) + 8;
}

struct LegendSlot {
  double x = 0;
  std::int32_t row = 0;  // from 0
};

std::vector<LegendSlot> legend_layout(const std::vector<LegendItem>& items, double x,
                                      double right) {
  std::vector<LegendSlot> slots;
  slots.reserve(items.size());
  double at = x;
  std::int32_t row = 0;
  for (const LegendItem& item : items) {
    const double w = legend_item_width(item);
    if (!slots.empty() && at + w > right) {
      ++row;
      at = x;
    }
    slots.push_back(LegendSlot{at, row});
    at += w;
  }
  return slots;
}

}  // namespace

std::int32_t legend_rows(const std::vector<LegendItem>& items, double x, double right) {
  const std::vector<LegendSlot> slots = legend_layout(items, x, right);
  return slots.empty() ? 0 : slots.back().row + 1;
}

SvgWriter::SvgWriter(double width, double height) {
  out_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_number(width, 0) +
          "\" height=\"" + svg_number(height, 0) + "\" viewBox=\"0 0 " + svg_number(width, 0) +
          " " + svg_number(height, 0) +
          "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  rect(0, 0, width, height, "white");
}

void SvgWriter::open_tag(std::string_view name, const SvgAttributes& attributes) {
  out_ += '<';
  out_ += name;
  for (const auto& [key, value] : attributes) {
    out_ += ' ';
    out_ += key;
    out_ += "=\"";
    out_ += xml_escape(value);
    out_ += '"';
  }
}

void SvgWriter::begin_group(const SvgAttributes& attributes) {
  FSDP_CHECK(!finished_);
  open_tag("g", attributes);
  out_ += ">\n";
  ++open_groups_;
}

void SvgWriter::end_group() {
  FSDP_CHECK(open_groups_ > 0) << "end_group without begin_group";
  out_ += "</g>\n";
  --open_groups_;
}

void SvgWriter::element(std::string_view name, const SvgAttributes& attributes) {
  FSDP_CHECK(!finished_);
  open_tag(name, attributes);
  out_ += "/>\n";
}

void SvgWriter::element_with_title(std::string_view name, const SvgAttributes& attributes,
                                   std::string_view title) {
  FSDP_CHECK(!finished_);
  open_tag(name, attributes);
  out_ += "><title>";
  out_ += xml_escape(title);
  out_ += "</title></";
  out_ += name;
  out_ += ">\n";
}

void SvgWriter::text(double x, double y, std::string_view content, std::string_view anchor,
                     const SvgAttributes& attributes) {
  FSDP_CHECK(!finished_);
  SvgAttributes all = {{"x", svg_number(x)}, {"y", svg_number(y)}};
  if (anchor != "start") {
    all.emplace_back("text-anchor", std::string(anchor));
  }
  all.insert(all.end(), attributes.begin(), attributes.end());
  open_tag("text", all);
  out_ += '>';
  out_ += xml_escape(content);
  out_ += "</text>\n";
}

void SvgWriter::rect(double x, double y, double width, double height, std::string_view fill,
                     const SvgAttributes& attributes) {
  SvgAttributes all = {{"x", svg_number(x)},
                       {"y", svg_number(y)},
                       {"width", svg_number(width)},
                       {"height", svg_number(height)},
                       {"fill", std::string(fill)}};
  all.insert(all.end(), attributes.begin(), attributes.end());
  element("rect", all);
}

void SvgWriter::line(double x1, double y1, double x2, double y2, std::string_view stroke,
                     const SvgAttributes& attributes) {
  SvgAttributes all = {{"x1", svg_number(x1)},
                       {"y1", svg_number(y1)},
                       {"x2", svg_number(x2)},
                       {"y2", svg_number(y2)},
                       {"stroke", std::string(stroke)}};
  all.insert(all.end(), attributes.begin(), attributes.end());
  element("line", all);
}

namespace {

// Tick labels with as few decimals as the step needs ("0.5", "10", "0.25").
int tick_digits(const std::vector<double>& ticks) {
  if (ticks.size() < 2) {
    return 0;
  }
  const double step = ticks[1];
  int digits = 0;
  while (digits < 6 && std::fabs(step * std::pow(10.0, digits) -
                                 std::round(step * std::pow(10.0, digits))) > 1e-6) {
    ++digits;
  }
  return digits;
}

}  // namespace

void SvgWriter::x_axis(double x0, double y0, double length, double max_value,
                       double grid_height, std::string_view title) {
  const std::vector<double> ticks = nice_ticks(max_value);
  const int digits = tick_digits(ticks);
  begin_group({{"class", "x-axis"}, {"font-size", "10"}});
  line(x0, y0, x0 + length, y0, "black");
  for (double t : ticks) {
    const double x = max_value > 0 ? x0 + length * t / max_value : x0;
    line(x, y0, x, y0 + 4, "black");
    if (grid_height > 0 && t > 0) {
      line(x, y0, x, y0 - grid_height, "#dddddd", {{"stroke-width", "0.5"}});
    }
    text(x, y0 + 15, svg_number(t, digits), "middle");
  }
  text(x0 + length / 2, y0 + 30, title, "middle", {{"font-size", "12"}});
  end_group();
}

void SvgWriter::y_axis(double x0, double y0, double length, double max_value, double grid_width,
                       std::string_view title) {
  const std::vector<double> ticks = nice_ticks(max_value, 5);
  const int digits = tick_digits(ticks);
  begin_group({{"class", "y-axis"}, {"font-size", "10"}});
  line(x0, y0, x0, y0 - length, "black");
  for (double t : ticks) {
    const double y = max_value > 0 ? y0 - length * t / max_value : y0;
    line(x0 - 4, y, x0, y, "black");
    if (grid_width > 0 && t > 0) {
      line(x0, y, x0 + grid_width, y, "#dddddd", {{"stroke-width", "0.5"}});
    }
    text(x0 - 6, y + 3, svg_number(t, digits), "end");
  }
  const std::string rotate = "rotate(-90 " + svg_number(x0 - 38) + " " +
                             svg_number(y0 - length / 2) + ")";
  text(x0 - 38, y0 - length / 2, title, "middle", {{"transform", rotate}, {"font-size", "12"}});
  end_group();
}

void SvgWriter::legend(const std::vector<LegendItem>& items, double x, double y, double right) {
  const std::vector<LegendSlot> slots = legend_layout(items, x, right);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const LegendItem& item = items[i];
    const double at = slots[i].x;
    const double base = y + slots[i].row * kLegendRowHeight;
    if (item.as_line) {
      SvgAttributes a = {{"class", "legend"}, {"stroke-width", "2"}};
      if (!item.dash.empty()) {
        a.emplace_back("stroke-dasharray", item.dash);
      }
      line(at, base - 4, at + 14, base - 4, item.color, a);
    } else {
      rect(at, base - 10, 14, 10, item.color, {{"class", "legend"}});
    }
    text(at + 18, base, item.label);
  }
}

void SvgWriter::undrawn_classes_note(double x, double y, std::size_t drawn, std::size_t total) {
  if (drawn < total) {
    text(x, y, str_cat(total - drawn, " more rank classes not drawn (of ", total, ")"));
  }
}

std::string SvgWriter::finish() {
  FSDP_CHECK(!finished_) << "finish called twice";
  FSDP_CHECK(open_groups_ == 0) << open_groups_ << " groups left open";
  finished_ = true;
  out_ += "</svg>\n";
  return std::move(out_);
}

}  // namespace fsdp::viz

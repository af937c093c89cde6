// SPDX-License-Identifier: Apache-2.0
// SvgWriter: builds a standalone SVG document as text, with no dependency. Every attribute value
// and text node is XML-escaped, numbers are printed with a fixed number of decimals (so the same
// drawing gives the same bytes on every machine), and groups must be closed in order (checked).
// Also the axis helpers shared by the plots: "nice" tick steps (1, 2 or 5 x 10^k).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fsdp::viz {

// `text` with &, <, >, " and ' replaced by entities; other control characters than tab, newline
// and carriage return (not allowed in XML 1.0) become spaces.
std::string xml_escape(std::string_view text);

// `v` with `digits` decimals ("12.50"); -0 prints as 0, non-finite values as 0.
std::string svg_number(double v, int digits = 2);

// Tick positions covering [0, max_value] (max_value > 0): multiples of a step of 1, 2 or 5 x 10^k
// chosen so that there are at most `max_ticks` + 1 ticks, starting at 0. For max_value <= 0
// returns {0}.
std::vector<double> nice_ticks(double max_value, int max_ticks = 6);

// How many of `num_classes` rank classes a plot limited to `max_classes` draws (at least one
// when there are any; a limit below 1 counts as 1).
std::size_t classes_to_draw(std::size_t num_classes, std::int32_t max_classes);

// The font family of text whose width must be bounded (lane labels): monospace fonts advance
// every ASCII glyph by the same width, about 0.6 em (DejaVu Sans Mono, Liberation Mono, Courier
// New, Menlo), so a character count bounds the drawn width.
inline constexpr std::string_view kMonospaceFonts =
    "DejaVu Sans Mono, Liberation Mono, Menlo, Consolas, Courier New, monospace";

// An upper bound on the width in pixels of `text` drawn at `font_size` in kMonospaceFonts:
// 0.62 em per ASCII character (the fonts' 0.6 em plus a margin) and 1 em per other code point
// (a glyph from a fallback font may be full-width). Also a generous estimate for the default
// sans-serif font, whose lowercase letters are narrower (0.5 em on average).
double estimated_text_width(std::string_view text, double font_size);

using SvgAttributes = std::vector<std::pair<std::string, std::string>>;

// One legend entry: a filled swatch, or a line swatch (as_line, dashed when `dash` is set).
struct LegendItem {
  std::string color;
  std::string label;
  bool as_line = false;
  std::string dash;
};

// Legend entries run left to right from x and wrap to a new row (kLegendRowHeight lower) before
// an entry would pass `right`; an entry wider than the row gets a row of its own. How many rows
// `items` take (0 for none).
inline constexpr double kLegendRowHeight = 16;
std::int32_t legend_rows(const std::vector<LegendItem>& items, double x, double right);

class SvgWriter {
 public:
  // Starts <svg width height viewBox> with a white background and a default font.
  SvgWriter(double width, double height);

  // <g ...> ... </g>; FSDP_CHECKs that end_group matches a begin_group.
  void begin_group(const SvgAttributes& attributes = {});
  void end_group();

  // An element with no children: <name a="v" .../>.
  void element(std::string_view name, const SvgAttributes& attributes);
  // An element with a <title> child (a hover tooltip in browsers).
  void element_with_title(std::string_view name, const SvgAttributes& attributes,
                          std::string_view title);
  // <text x y ...>escaped text</text>; anchor is "start", "middle" or "end".
  void text(double x, double y, std::string_view content, std::string_view anchor = "start",
            const SvgAttributes& attributes = {});
  void rect(double x, double y, double width, double height, std::string_view fill,
            const SvgAttributes& attributes = {});
  void line(double x1, double y1, double x2, double y2, std::string_view stroke,
            const SvgAttributes& attributes = {});

  // Axes of a plot area whose origin is (x0, y0) (bottom left) in pixels: a horizontal axis of
  // `length` pixels for values [0, max_value] with ticks, labels and vertical grid lines up to
  // y0 - grid_height, and the axis title below; the vertical axis likewise (grid to the right).
  void x_axis(double x0, double y0, double length, double max_value, double grid_height,
              std::string_view title);
  void y_axis(double x0, double y0, double length, double max_value, double grid_width,
              std::string_view title);

  // The legend laid out as legend_rows() says, its first row's text baseline at y (12 px text).
  void legend(const std::vector<LegendItem>& items, double x, double y, double right);

  // "K more rank classes not drawn (of N)" at (x, y) when drawn < total; nothing otherwise.
  void undrawn_classes_note(double x, double y, std::size_t drawn, std::size_t total);

  // Closes the document; FSDP_CHECKs that every group was closed. Call once.
  std::string finish();

 private:
  void open_tag(std::string_view name, const SvgAttributes& attributes);
  std::string out_;
  int open_groups_ = 0;
  bool finished_ = false;
};

}  // namespace fsdp::viz

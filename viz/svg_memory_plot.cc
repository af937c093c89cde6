// SPDX-License-Identifier: Apache-2.0
// The memory plot: resident buffers are constant over a step, so they are drawn as stacked bands
// from the schedule's resident list; only the transient part varies and comes from the samples.
#include "viz/svg_memory_plot.h"

#include <algorithm>
#include <array>
#include <vector>

#include "core/base/strings.h"
#include "viz/svg_writer.h"

namespace fsdp::viz {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kLeft = 70;
constexpr double kRight = 20;
constexpr double kHeader = 62;     // title and legend
constexpr double kPanelTitle = 20;
constexpr double kPanelAxis = 44;  // x axis ticks and title below each panel

constexpr std::array<std::string_view, kNumBufferClasses> kBufferColors = {
    "#4e79a7",  // sharded weights
    "#f28e2b",  // main grads
    "#59a14f",  // optimizer state
    "#e15759",  // unsharded weights
    "#b07aa1",  // partial grads
    "#edc948",  // unit grads
    "#76b7b2",  // activations
};
constexpr std::string_view kTransientFill = "#9ecae1";
constexpr std::string_view kTransientStroke = "#3182bd";
constexpr std::string_view kCapacityColor = "#d62728";
constexpr std::string_view kReservedColor = "#ff7f0e";

std::string gib_text(std::int64_t bytes) {
  return svg_number(static_cast<double>(bytes) / kGiB) + " GiB";
}

struct Legend {
  SvgWriter& w;
  double x = kLeft;
  double y = 44;
  void swatch(std::string_view color, std::string_view label, bool as_line = false,
              std::string_view dash = "") {
    if (as_line) {
      SvgAttributes a = {{"stroke-width", "2"}};
      if (!dash.empty()) {
        a.emplace_back("stroke-dasharray", std::string(dash));
      }
      w.line(x, y - 4, x + 14, y - 4, color, a);
    } else {
      w.rect(x, y - 10, 14, 10, color, {{"class", "legend"}});
    }
    w.text(x + 18, y, label);
    x += 26 + 6.2 * static_cast<double>(label.size());
  }
};

}  // namespace

std::string render_memory_svg(const sim::SimResult& result, const Schedule& schedule,
                              const Hardware& hardware, const MemoryPlotOptions& options) {
  const std::size_t num_classes = result.classes.size();
  const std::size_t drawn = classes_to_draw(num_classes, options.max_classes);
  const double panel_total = options.panel_height + kPanelTitle + kPanelAxis;
  const double height =
      kHeader + static_cast<double>(drawn) * panel_total + (drawn < num_classes ? 20 : 0);
  const double plot_width = std::max(options.width - kLeft - kRight, 50.0);
  SvgWriter w(options.width, height);

  // Samples per class, in time order (the engine emits them so; sort stably to be sure).
  std::vector<std::vector<sim::MemorySample>> samples(drawn);
  for (const sim::MemorySample& s : result.memory_trace) {
    if (s.cls >= 0 && static_cast<std::size_t>(s.cls) < drawn) {
      samples[static_cast<std::size_t>(s.cls)].push_back(s);
    }
  }
  // One vertical scale for every panel, so classes compare at a glance.
  std::int64_t top_bytes = hardware.memory_bytes();
  std::array<bool, kNumBufferClasses> resident_used{};
  for (std::size_t c = 0; c < drawn; ++c) {
    const sim::MemoryResult& m = result.classes[c].memory;
    top_bytes = std::max({top_bytes, m.peak_bytes, m.peak_reserved_bytes});
    std::stable_sort(samples[c].begin(), samples[c].end(),
                     [](const auto& a, const auto& b) { return a.t < b.t; });
    for (const sim::MemorySample& s : samples[c]) {
      top_bytes = std::max(top_bytes, s.bytes);
    }
    for (int b = 0; b < kNumBufferClasses; ++b) {
      resident_used[static_cast<std::size_t>(b)] |=
          m.resident_by_class[static_cast<std::size_t>(b)] > 0;
    }
  }
  const double y_max_gib = static_cast<double>(top_bytes) * 1.08 / kGiB;
  const double t_max_ms = std::max(result.step_time.ms(), 1e-9);

  w.text(kLeft, 20,
         str_cat("Allocated memory per rank over one step: ", to_string(schedule.mesh()), " on ",
                 hardware.name(), ", ", schedule.num_microbatches(), " microbatches"),
         "start", {{"font-size", "14"}, {"font-weight", "bold"}});
  Legend legend{w};
  for (int b = 0; b < kNumBufferClasses; ++b) {
    if (resident_used[static_cast<std::size_t>(b)]) {
      legend.swatch(kBufferColors[static_cast<std::size_t>(b)],
                    str_cat("resident ", to_string(static_cast<BufferClass>(b))));
    }
  }
  legend.swatch(kTransientFill, "transient");
  legend.swatch(kCapacityColor, "device capacity", /*as_line=*/true, "6 3");
  legend.swatch(kReservedColor, "peak reserved", /*as_line=*/true, "2 2");

  for (std::size_t c = 0; c < drawn; ++c) {
    const sim::ClassResult& cr = result.classes[c];
    const sim::MemoryResult& m = cr.memory;
    const double top = kHeader + static_cast<double>(c) * panel_total;
    const double y0 = top + kPanelTitle + options.panel_height;  // plot bottom
    auto ypx = [&](double bytes) { return y0 - options.panel_height * bytes / kGiB / y_max_gib; };
    auto xpx = [&](sim::SimTime t) { return kLeft + plot_width * t.ms() / t_max_ms; };
    w.begin_group({{"class", "panel"}, {"id", str_cat("class-", c)}});
    w.text(kLeft, top + 14,
           str_cat("class ", c, ": rank ", cr.representative_rank, " (", cr.num_ranks, " rank",
                   cr.num_ranks == 1 ? "" : "s", cr.straggler ? ", straggler" : "", ")  peak ",
                   gib_text(m.peak_bytes), " at ", svg_number(m.peak_time.ms(), 3),
                   " ms, resident ", gib_text(m.resident_bytes),
                   m.fits ? "" : "  DOES NOT FIT"),
           "start", {{"font-weight", "bold"}});
    w.y_axis(kLeft, y0, options.panel_height, y_max_gib, plot_width, "memory (GiB)");
    w.x_axis(kLeft, y0, plot_width, t_max_ms, options.panel_height, "time (ms)");

    double level = 0;
    for (int b = 0; b < kNumBufferClasses; ++b) {
      const auto bytes = static_cast<double>(m.resident_by_class[static_cast<std::size_t>(b)]);
      if (bytes > 0) {
        w.element_with_title(
            "rect",
            {{"class", "resident"},
             {"x", svg_number(kLeft)},
             {"y", svg_number(ypx(level + bytes))},
             {"width", svg_number(plot_width)},
             {"height", svg_number(ypx(level) - ypx(level + bytes))},
             {"fill", std::string(kBufferColors[static_cast<std::size_t>(b)])},
             {"fill-opacity", "0.8"}},
            str_cat("resident ", to_string(static_cast<BufferClass>(b)), ": ",
                    gib_text(static_cast<std::int64_t>(bytes))));
        level += bytes;
      }
    }
    if (samples[c].empty()) {
      w.text(kLeft + plot_width / 2, y0 - options.panel_height / 2,
             "no memory samples (simulate with a trace to record them)", "middle");
    } else {
      // The step function of resident + transient bytes, closed down to the resident level.
      const auto resident = static_cast<double>(m.resident_bytes);
      std::string path = "M" + svg_number(kLeft) + " " + svg_number(ypx(resident));
      double prev = resident;
      for (const sim::MemorySample& s : samples[c]) {
        const std::string x = svg_number(xpx(s.t));
        path += " L" + x + " " + svg_number(ypx(prev));
        prev = static_cast<double>(s.bytes);
        path += " L" + x + " " + svg_number(ypx(prev));
      }
      const std::string x_end = svg_number(kLeft + plot_width);
      path += " L" + x_end + " " + svg_number(ypx(prev));
      path += " L" + x_end + " " + svg_number(ypx(resident)) + " Z";
      w.element("path", {{"class", "transient"},
                         {"d", path},
                         {"fill", std::string(kTransientFill)},
                         {"fill-opacity", "0.7"},
                         {"stroke", std::string(kTransientStroke)},
                         {"stroke-width", "1"}});
      w.element_with_title("circle",
                           {{"cx", svg_number(xpx(m.peak_time))},
                            {"cy", svg_number(ypx(static_cast<double>(m.peak_bytes)))},
                            {"r", "3"},
                            {"fill", "black"}},
                           str_cat("peak ", gib_text(m.peak_bytes), " at ",
                                   svg_number(m.peak_time.ms(), 3), " ms"));
    }
    const double cap_y = ypx(static_cast<double>(m.capacity_bytes));
    w.line(kLeft, cap_y, kLeft + plot_width, cap_y, kCapacityColor,
           {{"class", "capacity"}, {"stroke-width", "1.5"}, {"stroke-dasharray", "6 3"}});
    w.text(kLeft + plot_width - 4, cap_y - 4,
           str_cat("capacity ", gib_text(m.capacity_bytes)), "end", {{"fill", "#d62728"}});
    if (m.peak_reserved_bytes > 0) {
      const double res_y = ypx(static_cast<double>(m.peak_reserved_bytes));
      w.line(kLeft, res_y, kLeft + plot_width, res_y, kReservedColor,
             {{"class", "reserved"}, {"stroke-width", "1.5"}, {"stroke-dasharray", "2 2"}});
    }
    w.end_group();
  }
  w.undrawn_classes_note(kLeft, height - 6, drawn, num_classes);
  return w.finish();
}

}  // namespace fsdp::viz

// SPDX-License-Identifier: Apache-2.0
// The memory plot: the live bytes of each buffer class are stacked in BufferClass order (the
// resident classes, flat over a step, at the bottom), each a step function of simulated time
// drawn as one filled path between its lower and upper boundary. Before the first sample a class
// holds its resident bytes (the engine starts every class from them), so a run without samples
// draws the resident bands only.
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
constexpr double kTitleBaseline = 20;
constexpr double kTitleFontSize = 14;
constexpr double kLegendBaseline = 44;
constexpr double kBelowLegend = 18;
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
constexpr std::string_view kCapacityColor = "#d62728";
constexpr std::string_view kReservedColor = "#ff7f0e";

using ClassBytes = std::array<std::int64_t, kNumBufferClasses>;

std::string gib_text(std::int64_t bytes) {
  return svg_number(static_cast<double>(bytes) / kGiB) + " GiB";
}

// "unsharded weights" for BufferClass::kUnshardedWeights (to_string's name, spaced).
std::string class_label(int b) {
  std::string label(to_string(static_cast<BufferClass>(b)));
  std::replace(label.begin(), label.end(), '_', ' ');
  return label;
}

// A class's state after each distinct sample time (the last sample at a time wins: buffers
// allocated and freed at one instant hold no area).
struct Step {
  sim::SimTime t;
  ClassBytes by_class{};
};

// The outline of a filled path as "M x y L x y ... Z", with points rounded as svg_number prints
// them. Consecutive points on one vertical keep only the first and the last (the ones between
// enclose no area), and repeated points are dropped.
class Outline {
 public:
  void add(double x, double y) {
    std::string xs = svg_number(x);
    std::string ys = svg_number(y);
    const std::size_t n = points_.size();
    if (n > 0 && points_[n - 1].first == xs && points_[n - 1].second == ys) {
      return;
    }
    if (n > 1 && points_[n - 1].first == xs && points_[n - 2].first == xs) {
      points_[n - 1].second = std::move(ys);
      return;
    }
    points_.emplace_back(std::move(xs), std::move(ys));
  }
  std::string path() const {
    std::string d;
    for (std::size_t i = 0; i < points_.size(); ++i) {
      d += (i == 0 ? "M" : " L") + points_[i].first + " " + points_[i].second;
    }
    return d + " Z";
  }

 private:
  std::vector<std::pair<std::string, std::string>> points_;
};

}  // namespace

std::string render_memory_svg(const sim::SimResult& result, const Schedule& schedule,
                              const Hardware& hardware, const MemoryPlotOptions& options) {
  const std::size_t num_classes = result.classes.size();
  const std::size_t drawn = classes_to_draw(num_classes, options.max_classes);

  // Per drawn class: its steps in time order (the engine emits samples so; sort stably to be
  // sure), which buffer classes ever hold bytes, and the most each holds.
  std::vector<std::vector<Step>> steps(drawn);
  {
    std::vector<std::vector<const sim::MemorySample*>> samples(drawn);
    for (const sim::MemorySample& s : result.memory_trace) {
      if (s.cls >= 0 && static_cast<std::size_t>(s.cls) < drawn) {
        samples[static_cast<std::size_t>(s.cls)].push_back(&s);
      }
    }
    for (std::size_t c = 0; c < drawn; ++c) {
      std::stable_sort(samples[c].begin(), samples[c].end(),
                       [](const auto* a, const auto* b) { return a->t < b->t; });
      for (const sim::MemorySample* s : samples[c]) {
        if (!steps[c].empty() && steps[c].back().t == s->t) {
          steps[c].back().by_class = s->by_class;
        } else {
          steps[c].push_back(Step{s->t, s->by_class});
        }
      }
    }
  }
  std::vector<ClassBytes> most(drawn);
  std::array<bool, kNumBufferClasses> legend_used{};
  std::int64_t top_bytes = hardware.memory_bytes();
  for (std::size_t c = 0; c < drawn; ++c) {
    const sim::MemoryResult& m = result.classes[c].memory;
    most[c] = m.resident_by_class;
    top_bytes = std::max({top_bytes, m.peak_bytes, m.peak_reserved_bytes});
    for (const Step& s : steps[c]) {
      std::int64_t total = 0;
      for (std::size_t b = 0; b < kNumBufferClasses; ++b) {
        most[c][b] = std::max(most[c][b], s.by_class[b]);
        total += s.by_class[b];
      }
      top_bytes = std::max(top_bytes, total);
    }
    for (std::size_t b = 0; b < kNumBufferClasses; ++b) {
      legend_used[b] = legend_used[b] || most[c][b] > 0;
    }
  }
  // One vertical scale for every panel, so classes compare at a glance.
  const double y_max_gib = static_cast<double>(top_bytes) * 1.08 / kGiB;
  const double t_max_ms = std::max(result.step_time.ms(), 1e-9);

  // The image is as wide as asked, or wider when a title would not fit (a long mesh).
  const std::string title =
      str_cat("Allocated memory per rank over one step, by buffer class: ",
              to_string(schedule.mesh()), " on ", hardware.name(), ", ",
              schedule.num_microbatches(), " microbatches");
  std::vector<std::string> panel_titles;
  double title_width = estimated_text_width(title, kTitleFontSize);
  for (std::size_t c = 0; c < drawn; ++c) {
    const sim::ClassResult& cr = result.classes[c];
    const sim::MemoryResult& m = cr.memory;
    panel_titles.push_back(str_cat(
        "class ", c, ": rank ", cr.representative_rank, " (", cr.num_ranks, " rank",
        cr.num_ranks == 1 ? "" : "s", cr.straggler ? ", straggler" : "", ")  peak ",
        gib_text(m.peak_bytes), " at ", svg_number(m.peak_time.ms(), 3), " ms, resident ",
        gib_text(m.resident_bytes), m.fits ? "" : "  DOES NOT FIT"));
    title_width = std::max(title_width, estimated_text_width(panel_titles.back(), 12));
  }
  const double width =
      std::max({options.width, kLeft + 50.0 + kRight, kLeft + title_width + kRight});
  const double plot_width = width - kLeft - kRight;

  std::vector<LegendItem> legend;
  for (int b = 0; b < kNumBufferClasses; ++b) {
    if (legend_used[static_cast<std::size_t>(b)]) {
      legend.push_back(
          LegendItem{std::string(kBufferColors[static_cast<std::size_t>(b)]), class_label(b),
                     false, ""});
    }
  }
  legend.push_back(LegendItem{std::string(kCapacityColor), "device capacity", true, "6 3"});
  legend.push_back(LegendItem{std::string(kReservedColor), "peak reserved", true, "2 2"});
  const double header =
      kLegendBaseline +
      kLegendRowHeight * std::max(legend_rows(legend, kLeft, width - kRight) - 1, 0) +
      kBelowLegend;
  const double panel_total = options.panel_height + kPanelTitle + kPanelAxis;
  const double height =
      header + static_cast<double>(drawn) * panel_total + (drawn < num_classes ? 20 : 0);
  SvgWriter w(width, height);

  w.text(kLeft, kTitleBaseline, title, "start",
         {{"font-size", svg_number(kTitleFontSize, 0)}, {"font-weight", "bold"}});
  w.legend(legend, kLeft, kLegendBaseline, width - kRight);

  for (std::size_t c = 0; c < drawn; ++c) {
    const sim::MemoryResult& m = result.classes[c].memory;
    const double top = header + static_cast<double>(c) * panel_total;
    const double y0 = top + kPanelTitle + options.panel_height;  // plot bottom
    auto ypx = [&](std::int64_t bytes) {
      return y0 - options.panel_height * static_cast<double>(bytes) / kGiB / y_max_gib;
    };
    auto xpx = [&](sim::SimTime t) { return kLeft + plot_width * t.ms() / t_max_ms; };
    w.begin_group({{"class", "panel"}, {"id", str_cat("class-", c)}});
    w.text(kLeft, top + 14, panel_titles[c], "start", {{"font-weight", "bold"}});
    w.y_axis(kLeft, y0, options.panel_height, y_max_gib, plot_width, "memory (GiB)");
    w.x_axis(kLeft, y0, plot_width, t_max_ms, options.panel_height, "time (ms)");

    // Boundaries of the stack: below(s, b) is the bytes of the buffer classes under b at step s
    // (s = -1: the resident state before the first sample).
    const std::vector<Step>& st = steps[c];
    auto bytes_at = [&](std::ptrdiff_t s, std::size_t b) {
      return s < 0 ? m.resident_by_class[b] : st[static_cast<std::size_t>(s)].by_class[b];
    };
    auto below = [&](std::ptrdiff_t s, std::size_t b) {
      std::int64_t sum = 0;
      for (std::size_t k = 0; k < b; ++k) {
        sum += bytes_at(s, k);
      }
      return sum;
    };
    const auto n = static_cast<std::ptrdiff_t>(st.size());
    const double x_start = kLeft;
    const double x_end = kLeft + plot_width;
    for (std::size_t b = 0; b < kNumBufferClasses; ++b) {
      if (most[c][b] <= 0) {
        continue;
      }
      // Along the upper boundary forward in time, then back along the lower one.
      Outline outline;
      std::int64_t prev = below(-1, b) + bytes_at(-1, b);
      outline.add(x_start, ypx(prev));
      for (std::ptrdiff_t s = 0; s < n; ++s) {
        const std::int64_t upper = below(s, b) + bytes_at(s, b);
        if (upper != prev) {
          const double x = xpx(st[static_cast<std::size_t>(s)].t);
          outline.add(x, ypx(prev));
          outline.add(x, ypx(upper));
          prev = upper;
        }
      }
      outline.add(x_end, ypx(prev));
      prev = below(n - 1, b);
      outline.add(x_end, ypx(prev));
      for (std::ptrdiff_t s = n - 1; s >= 0; --s) {
        const std::int64_t lower = below(s - 1, b);
        if (lower != prev) {
          const double x = xpx(st[static_cast<std::size_t>(s)].t);
          outline.add(x, ypx(prev));
          outline.add(x, ypx(lower));
          prev = lower;
        }
      }
      outline.add(x_start, ypx(prev));
      w.element_with_title("path",
                           {{"class", "stack"},
                            {"data-buffer-class",
                             std::string(to_string(static_cast<BufferClass>(b)))},
                            {"d", outline.path()},
                            {"fill", std::string(kBufferColors[b])},
                            {"fill-opacity", "0.85"}},
                           str_cat(class_label(static_cast<int>(b)), ": up to ",
                                   gib_text(most[c][b]), ", resident ",
                                   gib_text(m.resident_by_class[b])));
    }
    if (st.empty()) {
      w.text(kLeft + plot_width / 2, y0 - options.panel_height / 2,
             "no memory samples (simulate with a trace to record them)", "middle");
    } else {
      w.element_with_title("circle",
                           {{"cx", svg_number(xpx(m.peak_time))},
                            {"cy", svg_number(ypx(m.peak_bytes))},
                            {"r", "3"},
                            {"fill", "black"}},
                           str_cat("peak ", gib_text(m.peak_bytes), " at ",
                                   svg_number(m.peak_time.ms(), 3), " ms"));
    }
    const double cap_y = ypx(m.capacity_bytes);
    w.line(kLeft, cap_y, kLeft + plot_width, cap_y, kCapacityColor,
           {{"class", "capacity"}, {"stroke-width", "1.5"}, {"stroke-dasharray", "6 3"}});
    w.text(kLeft + plot_width - 4, cap_y - 4,
           str_cat("capacity ", gib_text(m.capacity_bytes)), "end", {{"fill", "#d62728"}});
    if (m.peak_reserved_bytes > 0) {
      const double res_y = ypx(m.peak_reserved_bytes);
      w.line(kLeft, res_y, kLeft + plot_width, res_y, kReservedColor,
             {{"class", "reserved"}, {"stroke-width", "1.5"}, {"stroke-dasharray", "2 2"}});
    }
    w.end_group();
  }
  w.undrawn_classes_note(kLeft, height - 6, drawn, num_classes);
  return w.finish();
}

}  // namespace fsdp::viz

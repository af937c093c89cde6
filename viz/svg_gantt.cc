// SPDX-License-Identifier: Apache-2.0
// The Gantt chart: lanes are (class, stream) pairs that ran something, in class then stream order;
// every trace record of a drawn class becomes exactly one rect of class "op". Lane labels are set
// in a monospace font and the label column is sized from the longest one (estimated_text_width,
// an upper bound), so no label is clipped at the left edge or runs into the lanes; the image
// widens past the requested width when the labels or the title need it.
#include "viz/svg_gantt.h"

#include <algorithm>
#include <array>
#include <vector>

#include "core/base/strings.h"
#include "viz/svg_writer.h"

namespace fsdp::viz {
namespace {

constexpr double kMinLeft = 150;    // the label column when every label is short
constexpr double kLabelGap = 6;     // between a label's end and the lanes
constexpr double kLabelMargin = 8;  // between the image's left edge and the longest label
constexpr double kLabelFontSize = 10;
constexpr double kMinPlotWidth = 50;
constexpr double kRight = 20;
constexpr double kTitleBaseline = 20;
constexpr double kTitleFontSize = 14;
constexpr double kLegendBaseline = 43;
constexpr double kBelowLegend = 15;
constexpr double kAxis = 46;
constexpr double kMinOpWidth = 0.3;  // so that short ops stay visible

constexpr std::array<OpKind, 9> kDrawnKinds = {
    OpKind::kForward,   OpKind::kBackward, OpKind::kRecompute,
    OpKind::kGradCopy,  OpKind::kCast,     OpKind::kOptimizerStep,
    OpKind::kAllGather, OpKind::kReduceScatter, OpKind::kAllReduce};

std::string op_label(const Schedule& schedule, const Op& op) {
  std::string label(to_string(op.kind));
  if (op.unit >= 0 && static_cast<std::size_t>(op.unit) < schedule.unit_names().size()) {
    label += " " + schedule.unit_names()[static_cast<std::size_t>(op.unit)];
  }
  if (op.microbatch >= 0) {
    label += str_cat(" mb ", op.microbatch);
  }
  if (is_collective(op.kind) && op.axis >= 0 && op.axis < schedule.mesh().ndim()) {
    label += " on " + schedule.mesh().axis_name(op.axis);
  }
  return label;
}

}  // namespace

std::string_view op_kind_color(OpKind kind) {
  switch (kind) {
    case OpKind::kForward: return "#59a14f";
    case OpKind::kBackward: return "#76b7b2";
    case OpKind::kRecompute: return "#edc948";
    case OpKind::kGradCopy: return "#b07aa1";
    case OpKind::kCast: return "#ff9da7";
    case OpKind::kOptimizerStep: return "#9c755f";
    case OpKind::kAllGather: return "#4e79a7";
    case OpKind::kReduceScatter: return "#f28e2b";
    case OpKind::kAllReduce: return "#e15759";
    case OpKind::kAllToAll:
      return "#ff9d9a";
    default: return "#bab0ac";
  }
}

std::string render_gantt_svg(const sim::SimResult& result, const Schedule& schedule,
                             const GanttOptions& options) {
  const std::size_t num_classes = result.classes.size();
  const std::size_t drawn = classes_to_draw(num_classes, options.max_classes);
  // Which lanes exist and which op kinds appear (for the legend).
  std::vector<std::array<bool, kNumStreams>> used(drawn, std::array<bool, kNumStreams>{});
  std::array<bool, 256> kind_used{};
  std::vector<const sim::TraceRecord*> records;
  for (const sim::TraceRecord& r : result.trace) {
    if (r.cls < 0 || static_cast<std::size_t>(r.cls) >= drawn) {
      continue;
    }
    const auto& program = schedule.programs()[static_cast<std::size_t>(
        result.classes[static_cast<std::size_t>(r.cls)].program)];
    if (r.op < 0 || static_cast<std::size_t>(r.op) >= program.ops.size()) {
      continue;
    }
    used[static_cast<std::size_t>(r.cls)][static_cast<std::size_t>(r.stream)] = true;
    kind_used[static_cast<std::size_t>(program.ops[static_cast<std::size_t>(r.op)].kind)] = true;
    records.push_back(&r);
  }
  // Lane index of each (class, stream), -1 when the stream ran nothing.
  std::vector<std::array<int, kNumStreams>> lane(drawn, std::array<int, kNumStreams>{});
  int num_lanes = 0;
  for (std::size_t c = 0; c < drawn; ++c) {
    for (int s = 0; s < kNumStreams; ++s) {
      lane[c][static_cast<std::size_t>(s)] = used[c][static_cast<std::size_t>(s)] ? num_lanes++ : -1;
    }
  }
  // The mesh axes each lane's collectives ran on, named in its label.
  const auto ndim = static_cast<std::size_t>(std::max<std::int64_t>(schedule.mesh().ndim(), 0));
  std::vector<bool> lane_axis(static_cast<std::size_t>(num_lanes) * ndim, false);
  for (const sim::TraceRecord* r : records) {
    const sim::ClassResult& cr = result.classes[static_cast<std::size_t>(r->cls)];
    const Op& op = schedule.programs()[static_cast<std::size_t>(cr.program)]
                       .ops[static_cast<std::size_t>(r->op)];
    if (is_collective(op.kind) && op.axis >= 0 && static_cast<std::size_t>(op.axis) < ndim) {
      const int l = lane[static_cast<std::size_t>(r->cls)][static_cast<std::size_t>(r->stream)];
      lane_axis[static_cast<std::size_t>(l) * ndim + static_cast<std::size_t>(op.axis)] = true;
    }
  }
  std::vector<std::string> labels(static_cast<std::size_t>(num_lanes));
  double label_width = 0;
  for (std::size_t c = 0; c < drawn; ++c) {
    for (int s = 0; s < kNumStreams; ++s) {
      const int l = lane[c][static_cast<std::size_t>(s)];
      if (l < 0) {
        continue;
      }
      std::string label = str_cat("class ", c, " (rank ", result.classes[c].representative_rank,
                                  ") ", to_string(static_cast<StreamKind>(s)));
      const char* sep = " on ";
      for (std::size_t a = 0; a < ndim; ++a) {
        if (lane_axis[static_cast<std::size_t>(l) * ndim + a]) {
          label += sep + schedule.mesh().axis_name(static_cast<std::int64_t>(a));
          sep = ", ";
        }
      }
      label_width = std::max(label_width, estimated_text_width(label, kLabelFontSize));
      labels[static_cast<std::size_t>(l)] = std::move(label);
    }
  }
  const double left = std::max(kMinLeft, kLabelMargin + label_width + kLabelGap);
  // The title and legend start at the left margin; the image widens for a long title too.
  const std::string title = str_cat("Streams over one step: ", to_string(schedule.mesh()), ", ",
                                    schedule.num_microbatches(), " microbatches, step ",
                                    svg_number(result.step_time.ms(), 3), " ms");
  const double width =
      std::max({options.width, left + kMinPlotWidth + kRight,
                kLabelMargin + estimated_text_width(title, kTitleFontSize) + kRight});
  const double plot_width = width - left - kRight;

  std::vector<LegendItem> legend;
  for (OpKind k : kDrawnKinds) {
    if (kind_used[static_cast<std::size_t>(k)]) {
      legend.push_back(
          LegendItem{std::string(op_kind_color(k)), std::string(to_string(k)), false, ""});
    }
  }
  const double header =
      kLegendBaseline +
      kLegendRowHeight * std::max(legend_rows(legend, kLabelMargin, width - kRight) - 1, 0) +
      kBelowLegend;
  const double lanes_height = std::max(num_lanes, 1) * options.lane_height;
  const double height = header + lanes_height + kAxis + (drawn < num_classes ? 20 : 0);
  const double t_max_ms = std::max(result.step_time.ms(), 1e-9);
  auto xpx = [&](sim::SimTime t) { return left + plot_width * t.ms() / t_max_ms; };
  auto lane_top = [&](int l) { return header + l * options.lane_height; };

  SvgWriter w(width, height);
  w.text(kLabelMargin, kTitleBaseline, title, "start",
         {{"font-size", svg_number(kTitleFontSize, 0)}, {"font-weight", "bold"}});
  w.legend(legend, kLabelMargin, kLegendBaseline, width - kRight);

  // Lane backgrounds and labels.
  w.begin_group({{"class", "lanes"}, {"font-size", svg_number(kLabelFontSize, 0)}});
  for (int l = 0; l < num_lanes; ++l) {
    w.rect(left, lane_top(l), plot_width, options.lane_height, l % 2 == 0 ? "#f7f7f7" : "#ffffff");
    w.text(left - kLabelGap, lane_top(l) + options.lane_height * 0.7,
           labels[static_cast<std::size_t>(l)], "end",
           {{"class", "lane-label"}, {"font-family", std::string(kMonospaceFonts)}});
  }
  w.end_group();
  w.x_axis(left, header + lanes_height, plot_width, t_max_ms, lanes_height, "time (ms)");

  w.begin_group({{"class", "ops"}});
  for (const sim::TraceRecord* r : records) {
    const sim::ClassResult& cr = result.classes[static_cast<std::size_t>(r->cls)];
    const Op& op = schedule.programs()[static_cast<std::size_t>(cr.program)]
                       .ops[static_cast<std::size_t>(r->op)];
    const int l = lane[static_cast<std::size_t>(r->cls)][static_cast<std::size_t>(r->stream)];
    const double x = xpx(r->start);
    const double op_width = std::max(xpx(r->end) - x, kMinOpWidth);
    w.element_with_title(
        "rect",
        {{"class", "op"},
         {"x", svg_number(x)},
         {"y", svg_number(lane_top(l) + 2)},
         {"width", svg_number(op_width)},
         {"height", svg_number(options.lane_height - 4)},
         {"fill", std::string(op_kind_color(op.kind))}},
        str_cat(op_label(schedule, op), ": ", svg_number(r->start.ms(), 3), " - ",
                svg_number(r->end.ms(), 3), " ms"));
  }
  w.end_group();
  w.undrawn_classes_note(left, height - 6, drawn, num_classes);
  return w.finish();
}

}  // namespace fsdp::viz

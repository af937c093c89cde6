// SPDX-License-Identifier: Apache-2.0
// The Gantt chart: lanes are (class, stream) pairs that ran something, in class then stream order;
// every trace record of a drawn class becomes exactly one rect of class "op".
#include "viz/svg_gantt.h"

#include <algorithm>
#include <array>
#include <vector>

#include "core/base/strings.h"
#include "viz/svg_writer.h"

namespace fsdp::viz {
namespace {

constexpr double kLeft = 150;  // lane labels
constexpr double kRight = 20;
constexpr double kHeader = 58;  // title and legend
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
  const double lanes_height = std::max(num_lanes, 1) * options.lane_height;
  const double height = kHeader + lanes_height + kAxis + (drawn < num_classes ? 20 : 0);
  const double plot_width = std::max(options.width - kLeft - kRight, 50.0);
  const double t_max_ms = std::max(result.step_time.ms(), 1e-9);
  auto xpx = [&](sim::SimTime t) { return kLeft + plot_width * t.ms() / t_max_ms; };
  auto lane_top = [&](int l) { return kHeader + l * options.lane_height; };

  SvgWriter w(options.width, height);
  w.text(kLeft, 20,
         str_cat("Streams over one step: ", to_string(schedule.mesh()), ", ",
                 schedule.num_microbatches(), " microbatches, step ",
                 svg_number(result.step_time.ms(), 3), " ms"),
         "start", {{"font-size", "14"}, {"font-weight", "bold"}});
  double lx = kLeft;
  for (OpKind k : kDrawnKinds) {
    if (!kind_used[static_cast<std::size_t>(k)]) {
      continue;
    }
    const std::string_view name = to_string(k);
    w.rect(lx, 34, 14, 10, op_kind_color(k), {{"class", "legend"}});
    w.text(lx + 18, 43, name);
    lx += 30 + 6.2 * static_cast<double>(name.size());
  }

  // Lane backgrounds and labels.
  w.begin_group({{"class", "lanes"}, {"font-size", "10"}});
  for (std::size_t c = 0; c < drawn; ++c) {
    for (int s = 0; s < kNumStreams; ++s) {
      const int l = lane[c][static_cast<std::size_t>(s)];
      if (l < 0) {
        continue;
      }
      w.rect(kLeft, lane_top(l), plot_width, options.lane_height, l % 2 == 0 ? "#f7f7f7" : "#ffffff");
      w.text(kLeft - 6, lane_top(l) + options.lane_height * 0.7,
             str_cat("class ", c, " (rank ", result.classes[c].representative_rank, ") ",
                     to_string(static_cast<StreamKind>(s))),
             "end");
    }
  }
  w.end_group();
  w.x_axis(kLeft, kHeader + lanes_height, plot_width, t_max_ms, lanes_height, "time (ms)");

  w.begin_group({{"class", "ops"}});
  for (const sim::TraceRecord* r : records) {
    const sim::ClassResult& cr = result.classes[static_cast<std::size_t>(r->cls)];
    const Op& op = schedule.programs()[static_cast<std::size_t>(cr.program)]
                       .ops[static_cast<std::size_t>(r->op)];
    const int l = lane[static_cast<std::size_t>(r->cls)][static_cast<std::size_t>(r->stream)];
    const double x = xpx(r->start);
    const double width = std::max(xpx(r->end) - x, kMinOpWidth);
    w.element_with_title(
        "rect",
        {{"class", "op"},
         {"x", svg_number(x)},
         {"y", svg_number(lane_top(l) + 2)},
         {"width", svg_number(width)},
         {"height", svg_number(options.lane_height - 4)},
         {"fill", std::string(op_kind_color(op.kind))}},
        str_cat(op_label(schedule, op), ": ", svg_number(r->start.ms(), 3), " - ",
                svg_number(r->end.ms(), 3), " ms"));
  }
  w.end_group();
  w.undrawn_classes_note(kLeft, height - 6, drawn, num_classes);
  return w.finish();
}

}  // namespace fsdp::viz

// SPDX-License-Identifier: Apache-2.0
// Tests of the SVG writer, the memory plot and the Gantt chart: well-formed XML (checked by
// tests/viz/xml_check.h), one rect per simulated op, one panel per rank class, deterministic
// bytes.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/run_options.h"
#include "cli/subcommands.h"
#include "core/mesh/device_mesh.h"
#include "sim/engine/simulator.h"
#include "tests/cli/cli_test_util.h"
#include "tests/viz/xml_check.h"
#include "viz/svg_gantt.h"
#include "viz/svg_memory_plot.h"
#include "viz/svg_writer.h"

#include <gtest/gtest.h>

namespace fsdp::viz {
namespace {

using fsdp::testing::check_xml;
using fsdp::testing::count_occurrences;

struct Simulated {
  Schedule schedule;
  Hardware hardware;
  sim::SimResult result;
};

Simulated simulate_options(cli::RunOptions options, bool record_trace = true) {
  auto schedule = cli::build_schedule_from_options(options);
  EXPECT_TRUE(schedule.has_value()) << schedule.error().message();
  auto hardware = cli::load_hardware_argument("h100");
  EXPECT_TRUE(hardware.has_value());
  sim::SimOptions sim_options;
  sim_options.record_trace = record_trace;
  auto result = sim::simulate(*schedule, *hardware, sim_options);
  EXPECT_TRUE(result.has_value()) << result.error().message();
  return Simulated{std::move(*schedule), std::move(*hardware), std::move(*result)};
}

cli::RunOptions small_run(std::string mesh, std::int64_t microbatches) {
  cli::RunOptions o;
  o.mesh = std::move(mesh);
  o.microbatches = microbatches;
  return o;
}

// The text of every `attribute="..."` in `svg` from `from` on, in order, up to `to`.
std::vector<std::string> attribute_values(const std::string& svg, const std::string& attribute,
                                          std::size_t from = 0,
                                          std::size_t to = std::string::npos) {
  std::vector<std::string> values;
  const std::string key = " " + attribute + "=\"";
  for (std::size_t at = svg.find(key, from); at < to && at != std::string::npos;
       at = svg.find(key, at + 1)) {
    const std::size_t begin = at + key.size();
    values.push_back(svg.substr(begin, svg.find('"', begin) - begin));
  }
  return values;
}

TEST(SvgWriterTest, EscapesNumbersAndTicks) {
  EXPECT_EQ(xml_escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  EXPECT_EQ(xml_escape(std::string("x\x01y", 3)), "x y");
  EXPECT_EQ(svg_number(-0.0001), "0.00");
  EXPECT_EQ(svg_number(12.345, 1), "12.3");
  EXPECT_EQ(nice_ticks(7.3), (std::vector<double>{0, 2, 4, 6}));
  EXPECT_EQ(nice_ticks(100), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(0), (std::vector<double>{0}));
  const std::vector<double> small = nice_ticks(0.037, 4);
  ASSERT_GE(small.size(), 2u);
  EXPECT_LE(small.back(), 0.037);
  EXPECT_LE(small.size(), 5u);
}

TEST(SvgWriterTest, WriterOutputIsWellFormedAndCheckerRejectsBrokenXml) {
  SvgWriter w(100, 50);
  w.begin_group({{"class", "a&b"}});
  w.rect(1, 2, 3, 4, "red");
  w.text(5, 6, "<label> & \"quotes\"");
  w.element_with_title("circle", {{"r", "2"}}, "tip <1>");
  w.end_group();
  const std::string svg = w.finish();
  EXPECT_EQ(check_xml(svg), "") << svg;
  EXPECT_NE(svg.find("&lt;label&gt; &amp; &quot;quotes&quot;"), std::string::npos);
  // The checker itself must be able to fail.
  EXPECT_NE(check_xml("<a><b></a></b>"), "");
  EXPECT_NE(check_xml("<a x=1/>"), "");
  EXPECT_NE(check_xml("<a>&nbsp;</a>"), "");
  EXPECT_NE(check_xml("<a/><b/>"), "");
  EXPECT_NE(check_xml("<a x=\"1\" x=\"2\"/>"), "");
  EXPECT_NE(check_xml("<a>"), "");
  EXPECT_NE(check_xml("<a y=\"<\"/>"), "");
  EXPECT_EQ(check_xml("<?xml version=\"1.0\"?>\n<a><!-- c --><b k='v'>t &amp; &#38;</b></a>\n"),
            "");
}

TEST(SvgGanttTest, OneRectPerSimulatedOpInLanesPerStream) {
  const Simulated s = simulate_options(small_run("dp=2", 2));
  ASSERT_FALSE(s.result.trace.empty());
  const std::string svg = render_gantt_svg(s.result, s.schedule);
  EXPECT_EQ(check_xml(svg), "");
  EXPECT_EQ(count_occurrences(svg, "class=\"op\""), s.result.trace.size());
  EXPECT_NE(svg.find("(rank 0) compute</text>"), std::string::npos);
  EXPECT_NE(svg.find("(rank 0) all-gather on dp</text>"), std::string::npos);
  EXPECT_NE(svg.find("(rank 0) reduce-scatter on dp</text>"), std::string::npos);
  EXPECT_NE(svg.find("time (ms)"), std::string::npos);
  // Legend entries for the kinds that ran, coloured like the ops.
  EXPECT_NE(svg.find(std::string("fill=\"") + std::string(op_kind_color(OpKind::kForward))),
            std::string::npos);
  EXPECT_NE(svg.find(">forward</text>"), std::string::npos);
  EXPECT_NE(svg.find(">reduce-scatter</text>"), std::string::npos);
  // Deterministic: the same inputs give the same bytes.
  const Simulated again = simulate_options(small_run("dp=2", 2));
  EXPECT_EQ(render_gantt_svg(again.result, again.schedule), svg);
}

TEST(SvgGanttTest, UnifiedStreamsHaveNoReduceScatterLane) {
  cli::RunOptions o = small_run("dp=2", 1);
  o.unified_streams = true;
  const Simulated s = simulate_options(o);
  const std::string svg = render_gantt_svg(s.result, s.schedule);
  EXPECT_EQ(check_xml(svg), "");
  EXPECT_EQ(svg.find("(rank 0) reduce-scatter"), std::string::npos);
  EXPECT_EQ(count_occurrences(svg, "class=\"op\""), s.result.trace.size());
}

TEST(SvgGanttTest, ClassLimitDrawsTheFirstClassesOnly) {
  cli::RunOptions o = small_run("dp=3", 1);
  o.shard_layout = "unpadded";
  const Simulated s = simulate_options(o);
  ASSERT_GT(s.result.classes.size(), 1u);
  std::size_t class0_ops = 0;
  for (const sim::TraceRecord& r : s.result.trace) {
    class0_ops += r.cls == 0 ? 1 : 0;
  }
  GanttOptions options;
  options.max_classes = 1;
  const std::string svg = render_gantt_svg(s.result, s.schedule, options);
  EXPECT_EQ(check_xml(svg), "");
  EXPECT_EQ(count_occurrences(svg, "class=\"op\""), class0_ops);
  EXPECT_NE(svg.find("more rank classes not drawn"), std::string::npos);
  const std::string all = render_gantt_svg(s.result, s.schedule);
  EXPECT_EQ(count_occurrences(all, "class=\"op\""), s.result.trace.size());
}

// Lane labels name the mesh axes of their collectives, so a long axis name makes a long label:
// the label column must hold the estimated width of every label (estimated_text_width, an upper
// bound for the monospace font the labels are set in) between the image's left edge and the lanes.
TEST(SvgGanttTest, LaneLabelsFitTheLabelColumnEvenWithLongAxisNames) {
  const std::string outer = "replicas_across_the_whole_cluster_of_many_nodes";
  const std::string inner = "data_parallel_shards_within_one_node_of_eight_gpus";
  // The CLI names only the axes it models (core/mesh/axis_names.h); the core takes any name, so
  // the schedule is assembled from the options with the mesh swapped in.
  cli::RunOptions o = small_run("dp_outer=2,dp_inner=2", 1);
  o.strategy = "hsdp";
  ConfigOptions config_options = cli::parse_config_options(o).value();
  config_options.mesh = parse_device_mesh(outer + "=2," + inner + "=2").value();
  const FsdpConfig config = assemble_config(config_options).value();
  const Model model = cli::load_model_argument(o.model, o.sizes).value();
  auto schedule = build_schedule(model, config, cli::make_workload(o).value());
  ASSERT_TRUE(schedule.has_value()) << schedule.error().message();
  const Hardware hardware = cli::load_hardware_argument("h100").value();
  sim::SimOptions sim_options;
  sim_options.record_trace = true;
  auto result = sim::simulate(*schedule, hardware, sim_options);
  ASSERT_TRUE(result.has_value()) << result.error().message();
  const Simulated s{std::move(*schedule), hardware, std::move(*result)};
  const std::string svg = render_gantt_svg(s.result, s.schedule);
  EXPECT_EQ(check_xml(svg), "");
  // The lanes' left edge: the first lane background rect of the "lanes" group.
  const std::size_t lanes = svg.find("class=\"lanes\"");
  ASSERT_NE(lanes, std::string::npos);
  const double lanes_x = std::stod(attribute_values(svg, "x", lanes).front());
  std::size_t labels = 0;
  bool saw_both_axes = false;
  double longest = 0;
  for (std::size_t at = svg.find("class=\"lane-label\""); at != std::string::npos;
       at = svg.find("class=\"lane-label\"", at + 1)) {
    const std::size_t open = svg.rfind("<text", at);
    const std::size_t close = svg.find("</text>", at);
    const std::string element = svg.substr(open, close - open);
    const std::string content = element.substr(element.find('>') + 1);
    ASSERT_EQ(content.find('&'), std::string::npos) << "escaped text: widths would not match";
    EXPECT_NE(element.find("font-family=\"" + std::string(kMonospaceFonts) + "\""),
              std::string::npos);
    EXPECT_NE(element.find("text-anchor=\"end\""), std::string::npos);
    const double x_end = std::stod(attribute_values(svg, "x", open).front());
    const double width = estimated_text_width(content, 10);
    longest = std::max(longest, width);
    EXPECT_GE(x_end - width, 0.0) << content;  // not clipped at the left edge
    EXPECT_LE(x_end, lanes_x) << content;      // not over the lanes
    saw_both_axes = saw_both_axes || (content.find(outer) != std::string::npos &&
                                      content.find(inner) != std::string::npos);
    ++labels;
  }
  EXPECT_EQ(labels, 3 * s.result.classes.size());  // compute, all-gather, reduce-scatter
  // HSDP reduces over both axes: the longest label names both, and needs far more than the
  // default 150 px column (as the old fixed column had it).
  EXPECT_TRUE(saw_both_axes);
  EXPECT_GT(longest, 150.0);
  // The title (which names the mesh) fits too: the image widens past the requested width when
  // the title or the label column needs it, and lanes keep a plot area right of the labels.
  const std::size_t title = svg.find("font-size=\"14\"");
  ASSERT_NE(title, std::string::npos);
  const std::size_t title_open = svg.rfind("<text", title);
  const double title_x = std::stod(attribute_values(svg, "x", title_open).front());
  const std::string title_text = svg.substr(svg.find('>', title) + 1,
                                            svg.find("</text>", title) - svg.find('>', title) - 1);
  const double image_width = std::stod(attribute_values(svg, "width").front());
  EXPECT_GE(image_width, 1200.0);
  EXPECT_LE(title_x + estimated_text_width(title_text, 14), image_width) << title_text;
  GanttOptions narrow;
  narrow.width = 300;
  const std::string grown = render_gantt_svg(s.result, s.schedule, narrow);
  EXPECT_EQ(check_xml(grown), "");
  EXPECT_GT(std::stod(attribute_values(grown, "width").front()), longest + 50);
  EXPECT_EQ(count_occurrences(grown, "class=\"op\""), s.result.trace.size());
  // A short mesh keeps the requested width.
  const Simulated plain = simulate_options(small_run("dp=2", 1));
  EXPECT_EQ(attribute_values(render_gantt_svg(plain.result, plain.schedule), "width").front(),
            "1200");
}

TEST(SvgWriterTest, EstimatedTextWidthBoundsMonospaceAndWideCharacters) {
  EXPECT_DOUBLE_EQ(estimated_text_width("", 10), 0.0);
  // Monospace fonts advance 0.6 em per ASCII glyph; the estimate is above that.
  EXPECT_GT(estimated_text_width("mmmmWWWW", 10), 8 * 0.6 * 10);
  EXPECT_DOUBLE_EQ(estimated_text_width("abc", 10), 3 * estimated_text_width("a", 10));
  // A multi-byte code point counts once, as a full em.
  EXPECT_DOUBLE_EQ(estimated_text_width("\xe6\x95\xb0", 10), 10.0);
  EXPECT_DOUBLE_EQ(estimated_text_width("a\xc3\xa9", 20), estimated_text_width("a", 20) + 20.0);
}

TEST(SvgWriterTest, LegendWrapsBeforeTheRightEdge) {
  std::vector<LegendItem> items;
  for (int i = 0; i < 6; ++i) {
    items.push_back(
        LegendItem{"#000000", "a label of some length " + std::to_string(i), false, ""});
  }
  EXPECT_EQ(legend_rows({}, 0, 100), 0);
  EXPECT_EQ(legend_rows(items, 0, 100000), 1);
  const std::int32_t rows = legend_rows(items, 10, 400);
  EXPECT_GT(rows, 1);
  EXPECT_LE(rows, 6);
  SvgWriter w(400, 200);
  w.legend(items, 10, 20, 400);
  const std::string svg = w.finish();
  EXPECT_EQ(check_xml(svg), "");
  std::vector<double> baselines;
  for (std::size_t at = svg.find("<text"); at != std::string::npos;
       at = svg.find("<text", at + 1)) {
    const std::size_t close = svg.find("</text>", at);
    const std::string element = svg.substr(at, close - at);
    const double x = std::stod(attribute_values(element, "x").front());
    const std::string content = element.substr(element.find('>') + 1);
    EXPECT_LE(x + estimated_text_width(content, 12), 400.0) << content;
    baselines.push_back(std::stod(attribute_values(element, "y").front()));
  }
  ASSERT_EQ(baselines.size(), items.size());
  std::sort(baselines.begin(), baselines.end());
  baselines.erase(std::unique(baselines.begin(), baselines.end()), baselines.end());
  EXPECT_EQ(static_cast<std::int32_t>(baselines.size()), rows);
}

TEST(SvgMemoryPlotTest, PanelPerClassWithEverySampleCapacityAndLegend) {
  const Simulated s = simulate_options(small_run("dp=2", 2));
  const std::string svg = render_memory_svg(s.result, s.schedule, s.hardware);
  EXPECT_EQ(check_xml(svg), "");
  EXPECT_EQ(count_occurrences(svg, "class=\"panel\""), s.result.classes.size());
  EXPECT_EQ(count_occurrences(svg, "class=\"capacity\""), s.result.classes.size());
  // 80 GiB less the runtime's 979 MiB outside the allocator (CUDA context, NCCL).
  EXPECT_NE(svg.find("capacity 79.04 GiB"), std::string::npos);
  EXPECT_NE(svg.find("memory (GiB)"), std::string::npos);
  EXPECT_NE(svg.find("time (ms)"), std::string::npos);
  EXPECT_NE(svg.find(">optimizer state</text>"), std::string::npos) << svg.substr(0, 3000);
  EXPECT_NE(svg.find(">activations</text>"), std::string::npos);
  EXPECT_NE(svg.find(">device capacity</text>"), std::string::npos);
  EXPECT_NE(svg.find(">peak reserved</text>"), std::string::npos);
  EXPECT_EQ(count_occurrences(svg, "class=\"reserved\""), s.result.classes.size());
  EXPECT_EQ(svg.find("transient"), std::string::npos);
  EXPECT_EQ(render_memory_svg(s.result, s.schedule, s.hardware), svg);
}

// One filled area per buffer class that holds bytes in a panel's samples (or resident), in
// BufferClass order, each coloured differently, its tooltip giving the class's most bytes (the
// result's own high-water mark); classes that never hold bytes get no area.
TEST(SvgMemoryPlotTest, StacksOneAreaPerBufferClassPresent) {
  cli::RunOptions o = small_run("dp=2", 2);
  const Simulated s = simulate_options(o);
  ASSERT_FALSE(s.result.memory_trace.empty());
  const std::string svg = render_memory_svg(s.result, s.schedule, s.hardware);
  EXPECT_EQ(check_xml(svg), "");
  std::vector<std::size_t> panels;
  for (std::size_t at = svg.find("class=\"panel\""); at != std::string::npos;
       at = svg.find("class=\"panel\"", at + 1)) {
    panels.push_back(at);
  }
  ASSERT_EQ(panels.size(), s.result.classes.size());
  for (std::size_t c = 0; c < panels.size(); ++c) {
    const std::size_t end = c + 1 < panels.size() ? panels[c + 1] : std::string::npos;
    std::vector<std::string> expected;
    const sim::MemoryResult& m = s.result.classes[c].memory;
    for (int b = 0; b < kNumBufferClasses; ++b) {
      bool holds = m.resident_by_class[static_cast<std::size_t>(b)] > 0;
      for (const sim::MemorySample& sample : s.result.memory_trace) {
        holds = holds || (sample.cls == static_cast<std::int32_t>(c) &&
                          sample.by_class[static_cast<std::size_t>(b)] > 0);
      }
      if (holds) {
        expected.emplace_back(to_string(static_cast<BufferClass>(b)));
        // The tooltip: "<label>: up to <high-water> GiB".
        std::string label(to_string(static_cast<BufferClass>(b)));
        std::replace(label.begin(), label.end(), '_', ' ');
        const std::string tip =
            label + ": up to " +
            svg_number(static_cast<double>(m.high_water_by_class[static_cast<std::size_t>(b)]) /
                       (1024.0 * 1024.0 * 1024.0)) +
            " GiB";
        const std::size_t found = svg.find("<title>" + tip, panels[c]);
        EXPECT_TRUE(found < end) << "class " << c << ": no area titled " << tip;
      }
    }
    // Gathered weights and activations come and go; weights and optimizer state stay.
    EXPECT_GE(expected.size(), 4u);
    EXPECT_EQ(count_occurrences(svg.substr(panels[c], end == std::string::npos ? std::string::npos
                                                                               : end - panels[c]),
                                "class=\"stack\""),
              expected.size());
    EXPECT_EQ(attribute_values(svg, "data-buffer-class", panels[c], end), expected);
    // Every area its own colour: the fill follows data-buffer-class on each path.
    std::vector<std::string> fills;
    for (std::size_t at = svg.find("class=\"stack\"", panels[c]); at < end;
         at = svg.find("class=\"stack\"", at + 1)) {
      fills.push_back(attribute_values(svg, "fill", at).front());
    }
    std::sort(fills.begin(), fills.end());
    EXPECT_EQ(std::unique(fills.begin(), fills.end()), fills.end());
    EXPECT_EQ(fills.size(), expected.size());
  }
  // A legend entry per class drawn anywhere.
  for (const std::string& name : attribute_values(svg, "data-buffer-class")) {
    std::string label = name;
    std::replace(label.begin(), label.end(), '_', ' ');
    EXPECT_EQ(count_occurrences(svg, ">" + label + "</text>"), 1u) << label;
  }
}

TEST(SvgMemoryPlotTest, WithoutSamplesAndWithAClassLimit) {
  const Simulated plain = simulate_options(small_run("dp=2", 1), /*record_trace=*/false);
  const std::string svg = render_memory_svg(plain.result, plain.schedule, plain.hardware);
  EXPECT_EQ(check_xml(svg), "");
  EXPECT_NE(svg.find("no memory samples"), std::string::npos);
  // Without samples only the resident classes are drawn, as flat bands.
  std::size_t resident_classes = 0;
  for (std::int64_t bytes : plain.result.classes[0].memory.resident_by_class) {
    resident_classes += bytes > 0 ? 1 : 0;
  }
  ASSERT_EQ(plain.result.classes.size(), 1u);
  EXPECT_GE(resident_classes, 2u);
  EXPECT_EQ(count_occurrences(svg, "class=\"stack\""), resident_classes);
  EXPECT_EQ(svg.find(">activations</text>"), std::string::npos);

  cli::RunOptions o = small_run("dp=3", 1);
  o.shard_layout = "unpadded";
  const Simulated s = simulate_options(o);
  ASSERT_GT(s.result.classes.size(), 1u);
  MemoryPlotOptions options;
  options.max_classes = 1;
  const std::string one = render_memory_svg(s.result, s.schedule, s.hardware, options);
  EXPECT_EQ(check_xml(one), "");
  EXPECT_EQ(count_occurrences(one, "class=\"panel\""), 1u);
  EXPECT_NE(one.find("more rank classes not drawn"), std::string::npos);
}

TEST(SvgSimulateCommandTest, PlotAndGanttFilesAreWrittenAndWellFormed) {
  const std::string plot = ::testing::TempDir() + "fsdpsim_svg_memory.svg";
  const std::string gantt = ::testing::TempDir() + "fsdpsim_svg_gantt.svg";
  const cli::testing::Result r = cli::testing::run_command(
      &cli::run_simulate_command,
      {"--mesh", "dp=2", "--microbatches", "1", "--plot", plot, "--gantt", gantt});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote memory plot " + plot), std::string::npos);
  EXPECT_NE(r.out.find("wrote Gantt chart " + gantt), std::string::npos);
  for (const std::string& path : {plot, gantt}) {
    std::ifstream in(path);
    const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(check_xml(svg), "") << path;
    EXPECT_NE(svg.find("<svg "), std::string::npos);
  }
  const cli::testing::Result bad = cli::testing::run_command(
      &cli::run_simulate_command, {"--mesh", "dp=2", "--gantt", "/nonexistent-dir/x.svg"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err,
            "fsdpsim: error: --gantt (Gantt chart): /nonexistent-dir/x.svg: cannot write the "
            "file: No such file or directory\n");
}

}  // namespace
}  // namespace fsdp::viz

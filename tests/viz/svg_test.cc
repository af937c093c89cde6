// SPDX-License-Identifier: Apache-2.0
// Tests of the SVG writer, the memory plot and the Gantt chart: well-formed XML (checked by
// tests/viz/xml_check.h), one rect per simulated op, one panel per rank class, deterministic
// bytes.
#include <fstream>
#include <iterator>
#include <string>

#include "cli/run_options.h"
#include "cli/subcommands.h"
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
  EXPECT_NE(svg.find("(rank 0) all-gather</text>"), std::string::npos);
  EXPECT_NE(svg.find("(rank 0) reduce-scatter</text>"), std::string::npos);
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
  EXPECT_EQ(svg.find("(rank 0) reduce-scatter</text>"), std::string::npos);
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
  EXPECT_NE(svg.find(">resident optimizer_state</text>"), std::string::npos) << svg.substr(0, 3000);
  EXPECT_NE(svg.find(">transient</text>"), std::string::npos);
  // The transient path: a move, two line commands per sample, two to close.
  const std::size_t path = svg.find("class=\"transient\"");
  ASSERT_NE(path, std::string::npos);
  const std::size_t d = svg.find("d=\"", path);
  const std::string commands = svg.substr(d, svg.find('"', d + 3) - d);
  EXPECT_EQ(count_occurrences(commands, " L"), 2 * s.result.memory_trace.size() + 2);
  EXPECT_EQ(render_memory_svg(s.result, s.schedule, s.hardware), svg);
}

TEST(SvgMemoryPlotTest, WithoutSamplesAndWithAClassLimit) {
  const Simulated plain = simulate_options(small_run("dp=2", 1), /*record_trace=*/false);
  const std::string svg = render_memory_svg(plain.result, plain.schedule, plain.hardware);
  EXPECT_EQ(check_xml(svg), "");
  EXPECT_NE(svg.find("no memory samples"), std::string::npos);
  EXPECT_EQ(svg.find("class=\"transient\""), std::string::npos);

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

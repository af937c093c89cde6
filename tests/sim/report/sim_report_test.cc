// SPDX-License-Identifier: Apache-2.0
#include "sim/report/sim_report.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "sim/engine/simulator.h"
#include "tests/sim/sim_test_util.h"

namespace fsdp::sim {
namespace {

using testing::build;
using testing::layered_model;
using testing::round_hardware;

TEST(SimReportTest, StragglersAndReservedMemoryAppearInEveryRendering) {
  FsdpOptions fo;
  fo.num_microbatches = 2;
  const Schedule s = build(layered_model(3, 512, 512), "dp_outer=2,dp_inner=4", fo, Strategy::kHsdp);
  SimOptions o;
  o.straggler = parse_straggler("rank=5,compute=2").value();
  o.record_trace = true;
  const SimResult r = simulate(s, round_hardware(), o).value();
  ASSERT_GT(r.classes.size(), s.programs().size());
  EXPECT_GT(r.step_time, r.baseline_step_time);

  const std::string text = render_sim_text(r, s, round_hardware());
  EXPECT_NE(text.find("stragglers           1 rank cost"), std::string::npos) << text;
  EXPECT_NE(text.find("without them"), std::string::npos);
  EXPECT_NE(text.find("peak reserved"), std::string::npos);
  EXPECT_NE(text.find(", stragglers)"), std::string::npos);

  const auto json = sim_result_to_json(r, s, round_hardware());
  EXPECT_EQ(json["straggler_ranks"], 1);
  EXPECT_EQ(json["baseline_step_time_ps"], r.baseline_step_time.ps());
  EXPECT_EQ(json["classes"][0]["memory"]["peak_reserved_bytes"],
            r.classes[0].memory.peak_reserved_bytes);

  // One trace process per simulated class, each with its ops.
  const auto trace = chrome_trace(r, s);
  std::set<int> pids;
  for (const auto& ev : trace["traceEvents"]) {
    if (ev["ph"] == "X") {
      pids.insert(ev["pid"].get<int>());
    }
  }
  EXPECT_EQ(pids.size(), r.classes.size());
}

// The trace's "memory by class" counter: one event beside each "memory" (total) event, with the
// same series (named after the buffer classes) in every event of a process, summing to the total;
// the classes a process holds appear, and none it never holds.
TEST(SimReportTest, TraceMemoryByClassSeriesSumToTheTotal) {
  FsdpOptions fo;
  fo.num_microbatches = 2;
  const Schedule s = build(layered_model(3, 512, 256), "dp=2", fo);
  SimOptions o;
  o.record_trace = true;
  const SimResult r = simulate(s, round_hardware(), o).value();
  const auto trace = chrome_trace(r, s);
  std::vector<const nlohmann::json*> totals;
  std::vector<const nlohmann::json*> by_class;
  for (const auto& ev : trace["traceEvents"]) {
    if (ev["ph"] == "C" && ev["name"] == "memory") {
      totals.push_back(&ev);
    } else if (ev["ph"] == "C" && ev["name"] == "memory by class") {
      by_class.push_back(&ev);
    }
  }
  ASSERT_EQ(totals.size(), r.memory_trace.size());
  ASSERT_EQ(by_class.size(), totals.size());
  std::map<int, std::set<std::string>> series_of;
  for (std::size_t i = 0; i < totals.size(); ++i) {
    const auto& total = *totals[i];
    const auto& split = *by_class[i];
    EXPECT_EQ(split["pid"], total["pid"]);
    EXPECT_EQ(split["ts"], total["ts"]);
    double sum = 0;
    std::set<std::string> names;
    for (const auto& [name, gib] : split["args"].items()) {
      sum += gib.get<double>();
      names.insert(name);
    }
    EXPECT_NEAR(sum, total["args"]["GiB"].get<double>(), 1e-9) << "event " << i;
    const auto [it, first] = series_of.emplace(split["pid"].get<int>(), names);
    EXPECT_EQ(it->second, names) << "series change within process " << split["pid"];
  }
  ASSERT_EQ(series_of.size(), r.classes.size());
  for (const auto& [pid, names] : series_of) {
    const MemoryResult& m = r.classes[static_cast<std::size_t>(pid)].memory;
    for (int b = 0; b < kNumBufferClasses; ++b) {
      const std::string name(to_string(static_cast<BufferClass>(b)));
      EXPECT_EQ(names.count(name) == 1, m.high_water_by_class[static_cast<std::size_t>(b)] > 0)
          << name;
    }
    EXPECT_TRUE(names.count("activations") == 1 && names.count("unsharded_weights") == 1);
  }
}

TEST(SimReportTest, NoStragglerLineWithoutStragglers) {
  const Schedule s = build(layered_model(2, 256, 256), "dp=2");
  const SimResult r = simulate(s, round_hardware()).value();
  EXPECT_EQ(r.baseline_step_time, r.step_time);
  EXPECT_EQ(render_sim_text(r, s, round_hardware()).find("stragglers"), std::string::npos);
}

}  // namespace
}  // namespace fsdp::sim

// SPDX-License-Identifier: Apache-2.0
#include "sim/report/sim_report.h"

#include <gtest/gtest.h>

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

TEST(SimReportTest, NoStragglerLineWithoutStragglers) {
  const Schedule s = build(layered_model(2, 256, 256), "dp=2");
  const SimResult r = simulate(s, round_hardware()).value();
  EXPECT_EQ(r.baseline_step_time, r.step_time);
  EXPECT_EQ(render_sim_text(r, s, round_hardware()).find("stragglers"), std::string::npos);
}

}  // namespace
}  // namespace fsdp::sim

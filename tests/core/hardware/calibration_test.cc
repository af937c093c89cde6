// SPDX-License-Identifier: Apache-2.0
// Calibration: the measured figures of a hardware file (validation, JSON round trip, one-line
// errors) and the interpolation of a collective curve.
#include "core/hardware/calibration.h"

#include "core/hardware/hardware_json.h"
#include "core/hardware/hardware_presets.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fsdp {
namespace {

using nlohmann::json;

Calibration sample() {
  Calibration c;
  c.source = "test";
  c.ranks = 4;
  c.copy_bytes_per_s = 8'000'000'000;
  c.compute_slowdown_permille = 1250;
  c.compute = {{OpKind::kForward, 20'000'000'000, 0},
               {OpKind::kBackward, 15'000'000'000, 0},
               {OpKind::kGradCopy, 0, 8'000'000'000}};
  c.collectives = {{OpKind::kAllGather, 4, {{4096, 20'000}, {1 << 20, 400'000}}},
                   {OpKind::kReduceScatter, 4, {{4096, 30'000}}}};
  c.matmuls = {{64, 256, 128, 30'000'000'000}};
  return c;
}

json calibrated_file() {
  HardwareSpec spec = find_hardware_preset("h100")->spec();
  spec.calibration = sample();
  return json::parse(hardware_to_json_text(Hardware::make(spec).value()));
}

std::string parse_error(const json& doc) {
  const auto hw = parse_hardware_json(doc.dump(), "cpu.json");
  return hw.has_value() ? std::string("(parsed)") : hw.error().message();
}

TEST(CalibrationTest, HardwareJsonRoundTripsTheMeasuredFigures) {
  const json doc = calibrated_file();
  ASSERT_TRUE(doc.contains("calibration"));
  const auto hw = parse_hardware_json(doc.dump(), "cpu.json");
  ASSERT_TRUE(hw.has_value()) << hw.error().message();
  ASSERT_NE(hw->calibration(), nullptr);
  EXPECT_EQ(*hw->calibration(), sample());
  EXPECT_NE(to_string(*hw).find("compute slowdown during communication: 1.25x"),
            std::string::npos);
}

TEST(CalibrationTest, FilesWithoutCalibrationStayValidAndWriteNone) {
  const Hardware h100 = find_hardware_preset("h100").value();
  EXPECT_EQ(h100.calibration(), nullptr);
  EXPECT_FALSE(json::parse(hardware_to_json_text(h100)).contains("calibration"));
  // Optional fields inside the section: only ranks and copy bandwidth are required.
  json doc = json::parse(hardware_to_json_text(h100));
  doc["calibration"] = {{"ranks", 2}, {"copy_bytes_per_s", 1000}};
  const auto hw = parse_hardware_json(doc.dump(), "cpu.json");
  ASSERT_TRUE(hw.has_value()) << hw.error().message();
  EXPECT_EQ(hw->calibration()->compute_slowdown_permille, 1000);
  EXPECT_TRUE(hw->calibration()->collectives.empty());
}

TEST(CalibrationTest, BadFiguresGetOneLineErrors) {
  json d = calibrated_file();
  d["calibration"]["compute"][0]["op"] = "all-gather";
  EXPECT_EQ(parse_error(d),
            "cpu.json: field 'calibration.compute[0].op': expected one of forward, backward, "
            "recompute, grad-copy, cast, optimizer-step, got \"all-gather\"");
  d = calibrated_file();
  d["calibration"]["collectives"][0]["points"][1]["bytes"] = 4096;
  EXPECT_EQ(parse_error(d),
            "cpu.json: field 'calibration.collectives[0].points[1].bytes': expected more than "
            "the previous point's 4096, got 4096");
  d = calibrated_file();
  d["calibration"]["compute_slowdown_permille"] = 900;
  EXPECT_EQ(parse_error(d),
            "cpu.json: field 'calibration.compute_slowdown_permille': expected an integer >= "
            "1000, got 900");
  d["calibration"]["compute_slowdown_permille"] = 200000;
  EXPECT_EQ(parse_error(d),
            "cpu.json: field 'calibration.compute_slowdown_permille': expected an integer in "
            "[1000, 100000], got 200000");
  d = calibrated_file();
  d["calibration"]["collectives"][1]["ranks"] = 1;
  EXPECT_EQ(parse_error(d),
            "cpu.json: field 'calibration.collectives[1].ranks': expected an integer >= 2, got 1");
  d = calibrated_file();
  d["calibration"]["compute"][1]["op"] = "forward";
  EXPECT_EQ(parse_error(d),
            "cpu.json: field 'calibration.compute[1].op': expected one entry per kind, got a "
            "second 'forward'");
  d = calibrated_file();
  d["calibration"]["compute"][2]["bytes_per_s"] = 0;
  EXPECT_EQ(parse_error(d),
            "cpu.json: field 'calibration.compute[2]': expected flops_per_s or bytes_per_s > 0, "
            "got both 0");
  d = calibrated_file();
  d["calibration"]["copy_bytes_per_s"] = -1;
  EXPECT_EQ(parse_error(d),
            "cpu.json: field 'calibration.copy_bytes_per_s': expected a positive integer, got -1");
  d = calibrated_file();
  d["calibration"]["gflops"] = 1;
  EXPECT_EQ(parse_error(d).rfind("cpu.json: field 'calibration.gflops': expected one of the "
                                 "known fields",
                                 0),
            0U);
  d = calibrated_file();
  d["calibration"]["collectives"][0]["points"] = json::array();
  EXPECT_EQ(parse_error(d),
            "cpu.json: field 'calibration.collectives[0].points': expected at least one point, "
            "got none");
}

TEST(CalibrationTest, FactoryRejectsABadCalibrationNamingTheHardware) {
  HardwareSpec spec = find_hardware_preset("h100")->spec();
  spec.calibration = sample();
  spec.calibration->matmuls[0].k = 0;
  const auto hw = Hardware::make(spec);
  ASSERT_FALSE(hw.has_value());
  EXPECT_EQ(hw.error().message(),
            "hardware 'h100': field 'calibration.matmuls[0].k': expected a positive integer, "
            "got 0");
}

TEST(CalibrationTest, CurveInterpolatesBetweenPointsAndScalesBeyond) {
  const CollectiveCurve curve{
      OpKind::kAllGather, 4, {{1000, 10'000}, {3000, 30'000}, {5000, 34'000}}};
  EXPECT_DOUBLE_EQ(curve_ns(curve, 10), 10'000);      // latency floor below the first point
  EXPECT_DOUBLE_EQ(curve_ns(curve, 1000), 10'000);
  EXPECT_DOUBLE_EQ(curve_ns(curve, 2000), 20'000);    // halfway on the first segment
  EXPECT_DOUBLE_EQ(curve_ns(curve, 4000), 32'000);
  EXPECT_DOUBLE_EQ(curve_ns(curve, 10'000), 68'000);  // the last point's bandwidth
  const Calibration c = sample();
  EXPECT_EQ(find_collective_curve(c, OpKind::kAllGather, 4), &c.collectives[0]);
  EXPECT_EQ(find_collective_curve(c, OpKind::kAllGather, 8), nullptr);
  EXPECT_EQ(find_compute_rate(c, OpKind::kBackward), &c.compute[1]);
  EXPECT_EQ(find_compute_rate(c, OpKind::kOptimizerStep), nullptr);
}

}  // namespace
}  // namespace fsdp

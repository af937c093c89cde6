// SPDX-License-Identifier: Apache-2.0
// `fsdpsim hardware` through its command function.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "cli/subcommands.h"
#include "tests/cli/cli_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fsdp::cli {

namespace {

using testing::Result;

Result run_hardware(std::vector<std::string> args) {
  return testing::run_command(&run_hardware_command, std::move(args));
}

TEST(HardwareCommandTest, ListsThePresets) {
  const Result r = run_hardware({});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"a100", "a100-40gb", "h100", "h100-96gb", "h200", "b200", "gb200"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
  EXPECT_NE(r.out.find("989.5"), std::string::npos) << r.out;
  const auto json = nlohmann::json::parse(run_hardware({"--format", "json"}).out);
  EXPECT_EQ(json.size(), 7U);
}

TEST(HardwareCommandTest, ShowsOnePresetOrAFile) {
  Result r = run_hardware({"--show", "h200"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("memory per device:    141 GiB"), std::string::npos) << r.out;
  r = run_hardware({"--show", "b200", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string path =
      (std::filesystem::temp_directory_path() / "fsdpsim_hardware_cmd.json").string();
  std::ofstream(path) << r.out;
  const Result again = run_hardware({"--file", path, "--format", "json"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.out, r.out);
}

TEST(HardwareCommandTest, ErrorsAndUsage) {
  Result r = run_hardware({"--show", "tpu"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "fsdpsim: error: hardware preset: expected one of a100, a100-40gb, h100, h100-96gb, "
            "h200, b200, "
            "gb200, got 'tpu'\n");
  const std::string path =
      (std::filesystem::temp_directory_path() / "fsdpsim_hardware_cmd_bad.json").string();
  std::ofstream(path) << R"({"name": "x", "devices_per_node": -1})";
  r = run_hardware({"--file", path});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "fsdpsim: error: " + path +
                       ": field 'devices_per_node': expected a positive integer, got -1\n");
  EXPECT_EQ(run_hardware({"--show", "h100", "--file", path}).code, 2);
  EXPECT_EQ(run_hardware({"--format", "xml"}).code, 2);
}

TEST(HardwareCommandTest, BusBandwidthTable) {
  Result r = run_hardware(
      {"--bus-bandwidth", "--show", "h100", "--gpus", "8,16", "--sizes", "64KiB,1GiB"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("predicted bus bandwidth (GB/s, as nccl-tests reports busbw) on 'h100'"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("collective           size              8 GPUs             16 GPUs"),
            std::string::npos)
      << r.out;
  // Four collectives x two sizes.
  EXPECT_NE(r.out.find("all-gather         64 KiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("all-reduce          1 GiB"), std::string::npos) << r.out;
  // All-to-all of 1 GiB: on one node NVLink's 450 x 0.824 = 370.8 GB/s; on two, each GPU's NIC
  // (50 x 0.94 = 47 GB/s) carries half its bytes: busbw 47 x 15 / 8 = 88.1, less the latency.
  EXPECT_NE(r.out.find("all-to-all          1 GiB           370.7 p2p            88.1 p2p"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("nvls/Simple"), std::string::npos) << r.out;  // 1 GiB on one H100 node
  r = run_hardware(
      {"--bus-bandwidth", "--show", "a100", "--gpus", "16", "--sizes", "1GiB", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["hardware"], "a100");
  ASSERT_EQ(j["rows"].size(), 4U);
  EXPECT_EQ(j["rows"][3]["collective"], "all-to-all");
  EXPECT_EQ(j["rows"][3]["algorithm"], "p2p");
  EXPECT_FALSE(j["rows"][3].contains("protocol"));
  EXPECT_EQ(j["rows"][0]["collective"], "all-gather");
  EXPECT_EQ(j["rows"][0]["gpus"], 16);
  EXPECT_EQ(j["rows"][0]["algorithm"], "ring");
  // A100: 8 HDR NICs (25 GB/s x 0.94 each) per node, NVLink 300 x 0.824: the NICs bound the
  // ring at 188 GB/s, less the latency of a 1 GiB call.
  const double bus = j["rows"][0]["bus_gb_per_s"].get<double>();
  EXPECT_GT(bus, 180.0);
  EXPECT_LT(bus, 188.0);
}

TEST(HardwareCommandTest, BusBandwidthErrors) {
  Result r = run_hardware({"--bus-bandwidth"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--bus-bandwidth needs --show NAME or --file FILE"), std::string::npos)
      << r.err;
  r = run_hardware({"--show", "h100", "--gpus", "8"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--gpus and --sizes need --bus-bandwidth"), std::string::npos) << r.err;
  r = run_hardware({"--bus-bandwidth", "--show", "h100", "--gpus", "8,1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--gpus item '1': expected an integer in [2, 1048576]"), std::string::npos)
      << r.err;
  r = run_hardware({"--bus-bandwidth", "--show", "h100", "--sizes", "1TB"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--sizes item '1TB': expected a size like 4096, 64KiB, 16MiB or 1GiB in "
                       "[1, 1099511627776]"),
            std::string::npos)
      << r.err;
  r = run_hardware({"--bus-bandwidth", "--show", "h100", "--gpus", "64", "--sizes", "32"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "fsdpsim: error: bus bandwidth: size: expected at least one byte per GPU (64), got "
            "32\n");
}

}  // namespace
}  // namespace fsdp::cli

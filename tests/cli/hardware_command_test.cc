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

}  // namespace
}  // namespace fsdp::cli

// SPDX-License-Identifier: Apache-2.0
#include "core/mesh/axis_names.h"

#include <string>

#include <gtest/gtest.h>

namespace fsdp {
namespace {

constexpr const char* kExpected =
    "expected dp, dp_outer, dp_inner, dp_shard, dp_replicate, edp, outer, inner, tp or ep";

TEST(AxisNamesTest, ModelledNamesParse) {
  for (const char* text : {"dp=8", "dp_outer=2,dp_inner=4", "dp_replicate=2,dp_shard=4,tp=2",
                           "outer=2,inner=2", "ep=8,edp=16", "dp=2,ep=2"}) {
    const auto mesh = parse_run_mesh(text);
    ASSERT_TRUE(mesh.has_value()) << text << ": " << mesh.error().message();
    EXPECT_EQ(*mesh, parse_device_mesh(text).value()) << text;
  }
  EXPECT_TRUE(is_data_parallel_axis_name("dp_shard"));
  EXPECT_FALSE(is_data_parallel_axis_name("tp"));
  EXPECT_FALSE(is_data_parallel_axis_name("pp"));
}

TEST(AxisNamesTest, AnAxisNotModelledIsOneLineNamingTheAxesThatAre) {
  EXPECT_EQ(parse_run_mesh("pp=8,dp=8").error().message(),
            std::string("axis 'pp' is not modelled (pipeline parallelism); ") + kExpected);
  EXPECT_EQ(parse_run_mesh("dp=8,cp=2").error().message(),
            std::string("axis 'cp' is not modelled (context parallelism); ") + kExpected);
  EXPECT_EQ(parse_run_mesh("a=2,b=2").error().message(),
            std::string("axis 'a' is not modelled; ") + kExpected);
  // A mesh that does not parse keeps parse_device_mesh's error.
  EXPECT_EQ(parse_run_mesh("pp=x").error().message(), parse_device_mesh("pp=x").error().message());
  // DeviceMesh itself takes any identifier; the check is the commands'.
  const DeviceMesh free = parse_device_mesh("pp=2,x=2").value();
  EXPECT_FALSE(check_modelled_axes(free).has_value());
  EXPECT_TRUE(check_modelled_axes(parse_device_mesh("dp=2,tp=2").value()).has_value());
}

}  // namespace
}  // namespace fsdp

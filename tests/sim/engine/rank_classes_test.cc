// SPDX-License-Identifier: Apache-2.0
#include "sim/engine/rank_classes.h"

#include <gtest/gtest.h>

#include <vector>

namespace fsdp::sim {
namespace {

TEST(RankClassesTest, OneProgramIsOneClassWithOneTypePerAxis) {
  const DeviceMesh mesh = parse_device_mesh("dp_outer=4,dp_inner=8").value();
  const std::vector<std::int32_t> programs(32, 0);
  const SimClasses c = make_sim_classes(mesh, programs, 1).value();
  EXPECT_EQ(c.num_classes(), 1);
  EXPECT_EQ(c.num_ranks[0], 32);
  ASSERT_EQ(c.types.size(), 2u);
  EXPECT_EQ(c.types[0], std::vector<std::int32_t>{0});
  EXPECT_EQ(c.type_axis[1], 1);
}

TEST(RankClassesTest, StablePrograms1dKeepTheirIds) {
  const DeviceMesh mesh = parse_device_mesh("dp=4").value();
  const std::vector<std::int32_t> programs = {0, 1, 1, 2};
  const SimClasses c = make_sim_classes(mesh, programs, 3).value();
  EXPECT_EQ(c.rank_class, programs);
  EXPECT_EQ(c.program, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(c.representative, (std::vector<std::int64_t>{0, 1, 3}));
  ASSERT_EQ(c.types.size(), 1u);
  EXPECT_EQ(c.types[0], (std::vector<std::int32_t>{0, 1, 2}));
}

TEST(RankClassesTest, AStragglerSplitsItsNodeAndItsOuterGroup) {
  // HSDP 2 x 8, rank 3 slow: its node-mates, its outer partner (rank 11) and the rest differ.
  const DeviceMesh mesh = parse_device_mesh("dp_outer=2,dp_inner=8").value();
  const std::vector<std::int32_t> programs(16, 0);
  std::vector<char> slow(16, 0);
  slow[3] = 1;
  const SimClasses c = make_sim_classes(mesh, programs, 1, slow).value();
  ASSERT_EQ(c.num_classes(), 4);
  EXPECT_EQ(c.representative, (std::vector<std::int64_t>{0, 8, 11, 3}));
  EXPECT_EQ(c.num_ranks, (std::vector<std::int64_t>{7, 7, 1, 1}));
  EXPECT_EQ(c.straggler, (std::vector<char>{0, 0, 0, 1}));
  // Stability: every rank of a class sees the same classes in its group on every axis.
  for (std::int64_t a = 0; a < 2; ++a) {
    for (std::int32_t k = 0; k < c.num_classes(); ++k) {
      const auto& members =
          c.types[static_cast<std::size_t>(c.group_type[static_cast<std::size_t>(k * 2 + a)])];
      EXPECT_NE(std::find(members.begin(), members.end(), k), members.end());
    }
  }
  // The straggler's node group holds classes {0, 3}; its outer group {2, 3}.
  EXPECT_EQ(c.types[static_cast<std::size_t>(c.group_type[3 * 2 + 1])],
            (std::vector<std::int32_t>{0, 3}));
  EXPECT_EQ(c.types[static_cast<std::size_t>(c.group_type[3 * 2 + 0])],
            (std::vector<std::int32_t>{2, 3}));
}

TEST(RankClassesTest, RejectsMismatchedSizes) {
  const DeviceMesh mesh = parse_device_mesh("dp=4").value();
  EXPECT_FALSE(make_sim_classes(mesh, std::vector<std::int32_t>(3, 0), 1));
  EXPECT_FALSE(make_sim_classes(mesh, std::vector<std::int32_t>{0, 0, 0, 5}, 1));
  EXPECT_FALSE(make_sim_classes(mesh, std::vector<std::int32_t>(4, 0), 1, std::vector<char>(2, 0)));
}

}  // namespace
}  // namespace fsdp::sim

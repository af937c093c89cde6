// SPDX-License-Identifier: Apache-2.0
#include "core/mesh/device_mesh.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace fsdp {
namespace {

TEST(DeviceMeshTest, ParsesNamedAxesOutermostFirst) {
  auto mesh = parse_device_mesh("dp_outer=4,dp_inner=64");
  ASSERT_TRUE(mesh) << mesh.error().message();
  EXPECT_EQ(mesh->ndim(), 2);
  EXPECT_EQ(mesh->size(), 256);
  EXPECT_EQ(mesh->axis_name(0), "dp_outer");
  EXPECT_EQ(mesh->axis_size(1), 64);
  EXPECT_EQ(mesh->axis_index("dp_inner"), 1);
  EXPECT_EQ(mesh->axis_index("tp"), std::nullopt);
  EXPECT_EQ(to_string(*mesh), "dp_outer=4,dp_inner=64");
}

TEST(DeviceMeshTest, ParseIgnoresWhitespaceAndRoundTrips) {
  auto mesh = parse_device_mesh(" ep = 8 , edp=16 ");
  ASSERT_TRUE(mesh) << mesh.error().message();
  EXPECT_EQ(to_string(*mesh), "ep=8,edp=16");
  EXPECT_EQ(parse_device_mesh(to_string(*mesh)).value(), *mesh);
  EXPECT_EQ(*mesh, DeviceMesh::make({{"ep", 8}, {"edp", 16}}).value());
}

TEST(DeviceMeshTest, ParseErrorsNameTheItem) {
  EXPECT_EQ(parse_device_mesh("").error().message(),
            "device mesh '' is empty; expected name=size[,name=size...]");
  EXPECT_EQ(parse_device_mesh("dp").error().message(), "mesh axis 'dp' in 'dp' is not name=size");
  EXPECT_EQ(parse_device_mesh("dp=x").error().message(),
            "mesh axis 'dp=x' in 'dp=x' has size 'x'; expected an integer");
  EXPECT_EQ(parse_device_mesh("dp=4,").error().message(),
            "mesh axis '' in 'dp=4,' is not name=size");
  EXPECT_EQ(parse_device_mesh("dp=99999999999999999999").error().code(),
            ErrorCode::kInvalidArgument);
}

TEST(DeviceMeshTest, MakeValidatesNamesAndSizes) {
  EXPECT_EQ(DeviceMesh::make({}).error().message(),
            "device mesh must have at least one axis, got 0");
  EXPECT_EQ(DeviceMesh::make({{"", 2}}).error().message(),
            "mesh axis 0 name '' is not an identifier; expected [A-Za-z_][A-Za-z0-9_]*");
  EXPECT_EQ(DeviceMesh::make({{"0", 2}}).error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(DeviceMesh::make({{"a b", 2}}).error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(DeviceMesh::make({{"dp", 2}, {"dp", 4}}).error().message(),
            "mesh axis name 'dp' must be unique; axes 0 and 1 share it");
  EXPECT_EQ(DeviceMesh::make({{"dp", 0}}).error().message(),
            "mesh axis 'dp' size must be >= 1, got 0");
  EXPECT_EQ(parse_device_mesh("dp=-2").error().message(),
            "mesh axis 'dp' size must be >= 1, got -2");
  EXPECT_TRUE(DeviceMesh::make({{"_x1", 1}}));
}

TEST(DeviceMeshTest, TotalSizeIsOverflowChecked) {
  auto big = DeviceMesh::make({{"a", 65536}, {"b", 65536}});
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(big.error().message(),
            "device mesh size overflows at axis 'b': expected at most 2147483647 ranks");
  auto huge = DeviceMesh::make({{"a", INT64_MAX}, {"b", 2}});
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error().code(), ErrorCode::kOutOfRange);
  EXPECT_TRUE(DeviceMesh::make({{"a", 2147483647}}));
}

TEST(DeviceMeshTest, RankCoordinateRoundTripIsRowMajor) {
  auto mesh = parse_device_mesh("a=2,b=3,c=4").value();
  auto c = mesh.coordinate(23);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->axis_sizes, (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_EQ(c->local_ranks, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(mesh.coordinate(1)->local_ranks, (std::vector<std::int64_t>{0, 0, 1}));
  EXPECT_EQ(mesh.coordinate(4)->local_ranks, (std::vector<std::int64_t>{0, 1, 0}));
  for (std::int64_t r = 0; r < mesh.size(); ++r) {
    auto coord = mesh.coordinate(r).value();
    EXPECT_EQ(mesh.rank_of(coord.local_ranks).value(), r);
  }
}

TEST(DeviceMeshTest, RankAndCoordinateErrors) {
  auto mesh = parse_device_mesh("o=2,i=2").value();
  EXPECT_EQ(mesh.coordinate(4).error().message(),
            "rank 4 is outside mesh o=2,i=2: expected [0, 4)");
  EXPECT_EQ(mesh.coordinate(-1).error().code(), ErrorCode::kOutOfRange);
  const std::vector<std::int64_t> short_coord = {1};
  EXPECT_EQ(mesh.rank_of(short_coord).error().message(),
            "expected 2 local ranks (one per axis of mesh o=2,i=2), got 1");
  const std::vector<std::int64_t> bad = {0, 2};
  EXPECT_EQ(mesh.rank_of(bad).error().message(),
            "local rank on mesh axis 'i' must be in [0, 2), got 2");
}

}  // namespace
}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// MpiSession outside mpirun: one local process of rank 0 whose collectives are local, and the MPI
// communicators and the collective benchmark refuse to start. (Under mpirun: tests/mpi.)
#include "backends/cpu/mpi_session.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/comm_bench.h"
#include "backends/cpu/mpi_comm.h"

namespace fsdp::cpu {
namespace {

class MpiSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (launched_by_mpi()) {
      GTEST_SKIP() << "runs outside mpirun only";
    }
  }
};

TEST_F(MpiSessionTest, WithoutALauncherIsOneLocalProcess) {
  auto session = MpiSession::get();
  ASSERT_TRUE(session.has_value()) << session.error().message();
  const MpiSession& s = **session;
  EXPECT_FALSE(s.distributed());
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.size(), 1);
  EXPECT_TRUE(s.is_root());
  EXPECT_TRUE(s.require_thread_multiple().ok());
  // The same object on every call.
  auto again = MpiSession::get();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *session);
}

TEST_F(MpiSessionTest, LocalCollectivesReturnTheLocalValue) {
  auto session = MpiSession::get();
  ASSERT_TRUE(session.has_value());
  auto parts = (*session)->gather_to_root("rank zero's bytes");
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(*parts, (std::vector<std::string>{"rank zero's bytes"}));
  for (bool v : {false, true}) {
    auto all = (*session)->all_true(v);
    ASSERT_TRUE(all.has_value());
    EXPECT_EQ(*all, v);
  }
}

TEST_F(MpiSessionTest, CommunicatorsNeedMpirun) {
  auto session = MpiSession::get();
  ASSERT_TRUE(session.has_value());
  std::vector<MeshAxis> axes(1);
  axes[0].name = "dp";
  axes[0].size = 1;
  auto mesh = DeviceMesh::make(std::move(axes));
  ASSERT_TRUE(mesh.has_value());
  auto comms = make_mpi_communicators(**session, *mesh, /*timeout_s=*/1.0);
  ASSERT_FALSE(comms.has_value());
  EXPECT_EQ(comms.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(comms.error().message().find("mpirun"), std::string::npos)
      << comms.error().message();
}

TEST_F(MpiSessionTest, BenchRejectsBadOptionsBeforeAnyMpiCall) {
  auto session = MpiSession::get();
  ASSERT_TRUE(session.has_value());
  CommBenchOptions options;
  options.total_bytes = {1 << 20};
  options.iters = 0;
  auto rows = bench_collectives(**session, options);
  ASSERT_FALSE(rows.has_value());
  EXPECT_EQ(rows.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(rows.error().message().find("iters is 0"), std::string::npos);

  options.iters = 1;
  options.repeats = 0;
  rows = bench_collectives(**session, options);
  ASSERT_FALSE(rows.has_value());
  EXPECT_NE(rows.error().message().find("repeats is 0"), std::string::npos);

  options.repeats = 1;
  options.total_bytes = {2};
  rows = bench_collectives(**session, options);
  ASSERT_FALSE(rows.has_value());
  EXPECT_NE(rows.error().message().find("below 4 bytes per rank"), std::string::npos);

  options.total_bytes = {std::int64_t{1} << 40};
  rows = bench_collectives(**session, options);
  ASSERT_FALSE(rows.has_value());
  EXPECT_NE(rows.error().message().find("MPI counts stop at"), std::string::npos);
}

TEST_F(MpiSessionTest, BenchWithoutMpirunIsAPreconditionError) {
  auto session = MpiSession::get();
  ASSERT_TRUE(session.has_value());
  CommBenchOptions options;
  options.total_bytes = {4096};
  options.iters = 1;
  options.repeats = 1;
  auto rows = bench_collectives(**session, options);
  ASSERT_FALSE(rows.has_value());
  EXPECT_EQ(rows.error().code(), ErrorCode::kFailedPrecondition);
}

}  // namespace
}  // namespace fsdp::cpu

// SPDX-License-Identifier: Apache-2.0
// The NCCL bootstrap shared by the MPI and store paths. NcclBootstrapTest runs anywhere (label
// cuda): the axis groups of a rank, and the unique-id exchange over a file store with threads as
// ranks (fake 128-byte ids; the exchange itself needs no GPU). NcclStoreBootstrapGpuTest (label
// gpu) makes real communicators over a store: one rank, and two ranks on two GPUs when present.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/nccl_communicator.h"
#include "backends/store/file_store.h"
#include "backends/store/tcp_store.h"
#include "core/mesh/device_mesh.h"
#include "tests/backends/cuda/cuda_test_util.h"
#include "tests/backends/store/store_test_util.h"

namespace fsdp::cuda {
namespace {

using namespace std::chrono_literals;
using store::testing::TempDir;
using testing::DeviceVector;

DeviceMesh mesh_of(const char* text) {
  auto mesh = parse_device_mesh(text);
  EXPECT_TRUE(mesh.has_value()) << text;
  return *mesh;
}

// A fake unique id that names its group, so a member that got another group's id is caught.
NcclId fake_id(std::int64_t axis, std::int64_t first_rank) {
  NcclId id;
  for (std::size_t i = 0; i < id.bytes.size(); ++i) {
    id.bytes[i] =
        static_cast<char>((static_cast<std::int64_t>(i) * 29 + axis * 101 + first_rank * 7) & 0xff);
  }
  return id;
}

TEST(NcclBootstrapTest, GroupsOfARankFollowTheMesh) {
  const DeviceMesh mesh = mesh_of("outer=2,inner=3");
  auto groups = nccl_groups_of(mesh, 4);  // coordinate (1, 1)
  ASSERT_TRUE(groups.has_value()) << groups.error().message();
  ASSERT_EQ(groups->size(), 2U);
  EXPECT_EQ((*groups)[0], (NcclGroup{0, "outer", /*index=*/1, /*first_rank=*/1, /*member=*/1,
                                     /*size=*/2}));
  EXPECT_EQ((*groups)[1], (NcclGroup{1, "inner", /*index=*/1, /*first_rank=*/3, /*member=*/1,
                                     /*size=*/3}));
  EXPECT_FALSE(nccl_groups_of(mesh, 6).has_value());
}

TEST(NcclBootstrapTest, EveryGroupHasOneIndexOneFirstRankAndDistinctMembers) {
  const DeviceMesh mesh = mesh_of("a=2,b=3,c=2");
  // (axis, index) -> first_rank and the members seen.
  std::map<std::pair<std::int64_t, std::int64_t>, std::pair<std::int64_t, std::set<int>>> seen;
  for (std::int64_t r = 0; r < mesh.size(); ++r) {
    auto groups = nccl_groups_of(mesh, r);
    ASSERT_TRUE(groups.has_value());
    for (const NcclGroup& g : *groups) {
      EXPECT_GE(g.index, 0);
      EXPECT_LT(g.index, mesh.size() / g.size);
      auto [it, fresh] = seen.try_emplace({g.axis, g.index}, g.first_rank, std::set<int>{});
      EXPECT_EQ(it->second.first, g.first_rank) << "rank " << r << " axis " << g.axis;
      EXPECT_TRUE(it->second.second.insert(g.member).second) << "rank " << r;
      if (g.member == 0) {
        EXPECT_EQ(g.first_rank, r);
      }
    }
  }
  for (const auto& [key, value] : seen) {
    EXPECT_EQ(value.second.size(), static_cast<std::size_t>(mesh.axis_size(key.first)));
  }
}

TEST(NcclBootstrapTest, StoreExchangeHandsEveryGroupItsFirstMembersId) {
  const DeviceMesh mesh = mesh_of("outer=2,inner=2");
  TempDir dir;
  const auto n = static_cast<std::size_t>(mesh.size());
  std::vector<std::vector<Expected<NcclId>>> got(n);
  std::vector<std::vector<NcclGroup>> groups_of(n);
  std::vector<std::thread> threads;
  for (std::int64_t r = mesh.size() - 1; r >= 0; --r) {
    threads.emplace_back([&, r] {
      auto store = store::FileStore::make(dir.path());  // one store object per "process"
      ASSERT_TRUE(store.has_value());
      const NcclIdExchange exchange = store_nccl_id_exchange(**store, 30s);
      auto groups = nccl_groups_of(mesh, r);
      ASSERT_TRUE(groups.has_value());
      for (const NcclGroup& g : *groups) {
        NcclId garbage;
        garbage.bytes.fill(static_cast<char>(r + 1));  // what a non-first member passes
        const Expected<NcclId> mine = g.member == 0 ? fake_id(g.axis, g.first_rank) : garbage;
        got[static_cast<std::size_t>(r)].push_back(exchange(g, mine));
      }
      groups_of[static_cast<std::size_t>(r)] = *groups;
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  for (std::size_t r = 0; r < n; ++r) {
    ASSERT_EQ(got[r].size(), 2U) << "rank " << r;
    for (std::size_t a = 0; a < 2; ++a) {
      const NcclGroup& g = groups_of[r][a];
      ASSERT_TRUE(got[r][a].has_value()) << got[r][a].error().message();
      EXPECT_EQ(got[r][a]->bytes, fake_id(g.axis, g.first_rank).bytes)
          << "rank " << r << " axis " << g.axis_name;
    }
  }
  // The keys name the axis and the group index.
  auto store = store::FileStore::make(dir.path());
  ASSERT_TRUE(store.has_value());
  for (const char* key :
       {"outer/0/nccl-id", "outer/1/nccl-id", "inner/0/nccl-id", "inner/1/nccl-id"}) {
    auto value = (*store)->get(key, 1s);
    ASSERT_TRUE(value.has_value()) << value.error().message();
    EXPECT_EQ(value->size(), 129U) << key;  // a one-byte tag and the 128-byte id
  }
}

TEST(NcclBootstrapTest, AFirstMemberWithoutAnIdFailsItsWholeGroup) {
  TempDir dir;
  auto store = store::FileStore::make(dir.path());
  ASSERT_TRUE(store.has_value());
  const NcclIdExchange exchange = store_nccl_id_exchange(**store, 600s);
  const NcclGroup first{0, "dp", 0, 0, 0, 2};
  const NcclGroup second{0, "dp", 0, 0, 1, 2};
  const Expected<NcclId> failed = Error(ErrorCode::kUnavailable, "ncclGetUniqueId: no network");
  auto a = exchange(first, failed);
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error().message(), "ncclGetUniqueId: no network");
  auto b = exchange(second, NcclId{});
  ASSERT_FALSE(b.has_value());  // at once, not after 600 s
  EXPECT_NE(b.error().message().find("the first member failed: ncclGetUniqueId: no network"),
            std::string::npos)
      << b.error().message();
}

TEST(NcclBootstrapTest, StoreRankEnvWithoutAGpuIsOneLine) {
  if (cuda_device_count() > 0) {
    GTEST_SKIP() << "a GPU is visible (NcclStoreBootstrapGpuTest covers this machine)";
  }
  TempDir dir;
  auto store = store::FileStore::make(dir.path());
  ASSERT_TRUE(store.has_value());
  auto env = make_store_rank_env(mesh_of("dp=1"), 0, **store, 1s);
  ASSERT_FALSE(env.has_value());
  EXPECT_NE(env.error().message().find("backend cuda: no usable GPU"), std::string::npos)
      << env.error().message();
}

// All-reduce of (rank + 1) over every rank's env: each gets world (world + 1) / 2.
void expect_all_reduce_sums(exec::RankEnv& env, int ordinal, std::int64_t rank,
                            std::int64_t world) {
  ASSERT_EQ(cudaSetDevice(ordinal), cudaSuccess);
  DeviceVector<float> buf(std::vector<float>(64, static_cast<float>(rank + 1)));
  ASSERT_TRUE(
      env.comms->axis(0).all_reduce(StreamKind::kCompute, DType::kFp32, buf.get(), 64).ok());
  ASSERT_TRUE(env.device->synchronize().ok());
  EXPECT_EQ(buf.download(), std::vector<float>(64, static_cast<float>(world * (world + 1) / 2)));
}

TEST(NcclStoreBootstrapGpuTest, OneRankBootstrapsOverAFileStore) {
  FSDP_SKIP_WITHOUT_GPU();
  TempDir dir;
  auto store = store::FileStore::make(dir.path());
  ASSERT_TRUE(store.has_value());
  auto env = make_store_rank_env(mesh_of("dp=1"), 0, **store, 30s);
  ASSERT_TRUE(env.has_value()) << env.error().message();
  ASSERT_EQ(env->comms->num_axes(), 1);
  EXPECT_EQ(env->comms->axis(0).size(), 1);
  EXPECT_EQ(env->comms->axis(0).axis_name(), "dp");
  expect_all_reduce_sums(*env, 0, 0, 1);
  EXPECT_TRUE((*store)->get("dp/0/nccl-id", 1s).has_value());
}

TEST(NcclStoreBootstrapGpuTest, TwoRanksOnTwoGpusBootstrapOverATcpStore) {
  FSDP_SKIP_WITHOUT_GPU();
  if (cuda_device_count() < 2) {
    GTEST_SKIP() << "needs 2 GPUs (NCCL 2.28 refuses two members on one GPU)";
  }
  auto server = store::TcpStore::serve("127.0.0.1", 0);
  ASSERT_TRUE(server.has_value()) << server.error().message();
  auto client = store::TcpStore::connect("127.0.0.1", (*server)->port(), 30s);
  ASSERT_TRUE(client.has_value()) << client.error().message();
  store::Store* stores[2] = {server->get(), client->get()};
  const DeviceMesh mesh = mesh_of("dp=2");
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto env = make_store_rank_env(mesh, r, *stores[r], 60s);
      ASSERT_TRUE(env.has_value()) << env.error().message();
      expect_all_reduce_sums(*env, r, r, 2);
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
}

}  // namespace
}  // namespace fsdp::cuda

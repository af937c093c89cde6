// SPDX-License-Identifier: Apache-2.0
// In-process collectives: uneven all-gather and reduce-scatter (also in place), all-reduce,
// all-to-all, axis groups of a 2-D mesh, mismatches and timeouts.
#include "backends/cpu/in_process_comm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

#include "tests/backends/cpu/timeout_test_util.h"

namespace fsdp::cpu {
namespace {

// Runs fn(rank, comms) on one thread per rank of `mesh`.
void run_ranks(const std::string& mesh_text, std::chrono::milliseconds timeout,
               const std::function<void(std::int64_t, exec::CommunicatorSet&)>& fn) {
  const DeviceMesh mesh = parse_device_mesh(mesh_text).value();
  auto world = InProcessWorld::make(mesh, timeout).value();
  std::vector<std::thread> threads;
  for (std::int64_t r = 0; r < mesh.size(); ++r) {
    threads.emplace_back([&, r] {
      auto comms = world->communicators(r);
      fn(r, *comms);
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
}

TEST(InProcessCommTest, UnevenAllGatherAndReduceScatter) {
  const std::vector<std::int64_t> counts = {1, 0, 3};
  std::vector<std::vector<float>> gathered(3), scattered(3);
  run_ranks("dp=3", std::chrono::seconds(10), [&](std::int64_t r, exec::CommunicatorSet& c) {
    std::vector<float> mine(static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]),
                            static_cast<float>(r + 1));
    std::vector<float> all(4, -1.0F);
    ASSERT_TRUE(c.axis(0).all_gather_v(StreamKind::kAllGather, DType::kFp32, mine.data(), counts,
                                       all.data()).has_value());
    gathered[static_cast<std::size_t>(r)] = all;
    std::vector<float> send = {1.0F * (r + 1), 2.0F, 3.0F, 4.0F * (r + 1)};
    std::vector<float> out(static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]));
    ASSERT_TRUE(c.axis(0).reduce_scatter_v(StreamKind::kReduceScatter, DType::kFp32, send.data(),
                                           counts, out.data()).has_value());
    scattered[static_cast<std::size_t>(r)] = out;
  });
  for (const auto& g : gathered) {
    EXPECT_EQ(g, (std::vector<float>{1, 3, 3, 3}));
  }
  EXPECT_EQ(scattered[0], (std::vector<float>{6}));
  EXPECT_TRUE(scattered[1].empty());
  EXPECT_EQ(scattered[2], (std::vector<float>{6, 9, 24}));  // 2·3, 3·3, 4·(1+2+3)
}

// In place: recv = send + the counts of the members before this one (the executor's first
// reduce-scatter of a two-axis gradient reduction). Each member's own chunk is both an input and
// its output; the sum must still count every member's input, its own included (the rest of the
// buffer, which the contract leaves undefined, keeps its input here). Uneven counts, one member
// empty, repeated so a member that writes early would be caught by a slower peer.
TEST(InProcessCommTest, InPlaceReduceScatterSumsEveryInputBeforeWriting) {
  const std::vector<std::int64_t> counts = {2, 0, 3};
  const std::vector<std::int64_t> offsets = {0, 2, 2};
  std::vector<std::vector<float>> after(3);
  run_ranks("dp=3", std::chrono::seconds(10), [&](std::int64_t r, exec::CommunicatorSet& c) {
    const auto ri = static_cast<std::size_t>(r);
    std::vector<float> buf(5);
    for (int round = 0; round < 20; ++round) {
      for (std::size_t j = 0; j < buf.size(); ++j) {
        buf[j] = static_cast<float>((r + 1) * 10 + static_cast<std::int64_t>(j));
      }
      if (r == 0 && round % 2 == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // let the others go first
      }
      ASSERT_TRUE(c.axis(0)
                      .reduce_scatter_v(StreamKind::kReduceScatter, DType::kFp32, buf.data(),
                                        counts, buf.data() + offsets[ri])
                      .has_value());
    }
    after[ri] = buf;
  });
  // Element j sums to (10 + 20 + 30) + 3j.
  EXPECT_EQ(after[0], (std::vector<float>{60, 63, 12, 13, 14}));
  EXPECT_EQ(after[1], (std::vector<float>{20, 21, 22, 23, 24}));  // its chunk is empty
  EXPECT_EQ(after[2], (std::vector<float>{30, 31, 66, 69, 72}));
}

TEST(InProcessCommTest, AllReduceStaysInsideTheAxisGroup) {
  // outer=2,inner=2: ranks 0,1 share outer coordinate 0; axis 1 (inner) groups {0,1} and {2,3}.
  std::vector<float> inner(4), outer(4);
  run_ranks("outer=2,inner=2", std::chrono::seconds(10),
            [&](std::int64_t r, exec::CommunicatorSet& c) {
              float v = static_cast<float>(r);
              ASSERT_TRUE(c.axis(1).all_reduce(StreamKind::kCompute, DType::kFp32, &v, 1)
                              .has_value());
              inner[static_cast<std::size_t>(r)] = v;
              float w = static_cast<float>(r);
              ASSERT_TRUE(c.axis(0).all_reduce(StreamKind::kCompute, DType::kFp32, &w, 1)
                              .has_value());
              outer[static_cast<std::size_t>(r)] = w;
            });
  EXPECT_EQ(inner, (std::vector<float>{1, 1, 5, 5}));
  EXPECT_EQ(outer, (std::vector<float>{2, 4, 2, 4}));
}

// Member r sends block k (2 values) to member k; block r of every member lands in member r's
// recv in member order, on each inner group of a 2-D mesh separately.
TEST(InProcessCommTest, AllToAllTransposesTheBlocksInsideTheAxisGroup) {
  std::vector<std::vector<float>> got(4);
  run_ranks(
      "outer=2,inner=2", std::chrono::seconds(10), [&](std::int64_t r, exec::CommunicatorSet& c) {
        std::vector<float> send;
        for (std::int64_t k = 0; k < 2; ++k) {
          send.push_back(static_cast<float>(10 * r + k));
          send.push_back(static_cast<float>(100 * r + k));
        }
        std::vector<float> recv(4, -1.0F);
        ASSERT_TRUE(c.axis(1)
                        .all_to_all(StreamKind::kCompute, DType::kFp32, send.data(), 2, recv.data())
                        .has_value());
        got[static_cast<std::size_t>(r)] = recv;
      });
  // Rank 1 (inner member 1 of group {0, 1}) gets block 1 of rank 0, then of itself.
  EXPECT_EQ(got[0], (std::vector<float>{0, 0, 10, 100}));
  EXPECT_EQ(got[1], (std::vector<float>{1, 1, 11, 101}));
  EXPECT_EQ(got[2], (std::vector<float>{20, 200, 30, 300}));
  EXPECT_EQ(got[3], (std::vector<float>{21, 201, 31, 301}));
}

TEST(InProcessCommTest, MismatchedCollectivesFailOnEveryMember) {
  std::vector<std::string> errors(2);
  run_ranks("dp=2", std::chrono::seconds(10), [&](std::int64_t r, exec::CommunicatorSet& c) {
    float v[2] = {0, 0};
    const std::int64_t counts[] = {1, 1};
    Status s = r == 0 ? c.axis(0).all_reduce(StreamKind::kCompute, DType::kFp32, v, 1)
                      : c.axis(0).all_gather_v(StreamKind::kCompute, DType::kFp32, v, counts, v);
    ASSERT_FALSE(s.has_value());
    errors[static_cast<std::size_t>(r)] = s.error().message();
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("collective mismatch"), std::string::npos) << e;
  }
}

TEST(InProcessCommTest, AMemberThatNeverJoinsTimesOut) {
  std::vector<std::string> errors(3);
  run_ranks("dp=3", std::chrono::milliseconds(100),
            [&](std::int64_t r, exec::CommunicatorSet& c) {
              if (r == 1) {
                return;  // never joins
              }
              float v = 1;
              Status s = c.axis(0).all_reduce(StreamKind::kReduceScatter, DType::kFp32, &v, 1);
              ASSERT_FALSE(s.has_value());
              errors[static_cast<std::size_t>(r)] = s.error().message();
            });
  for (std::int64_t r : {0, 2}) {
    const std::vector<std::string> missing =
        test::missing_ranks(errors[static_cast<std::size_t>(r)]);
    EXPECT_NE(std::find(missing.begin(), missing.end(), "1"), missing.end())
        << errors[static_cast<std::size_t>(r)];
  }
}

}  // namespace
}  // namespace fsdp::cpu

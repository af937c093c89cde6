// SPDX-License-Identifier: Apache-2.0
// The engine's parts on their own (sim/engine/internal): the flow model of link sharing driven by
// hand through an EventQueue, and the exposure clock of one class. The whole engine's behaviour is
// in simulator_test.cc and contention_test.cc; these pin the closed forms at the part that
// implements them.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "sim/engine/event_queue.h"
#include "sim/engine/internal/link_sharing.h"
#include "sim/engine/internal/statistics.h"
#include "sim/engine/sim_time.h"

namespace fsdp::sim::internal {
namespace {

SimTime at(std::int64_t ps) { return SimTime::ps(ps); }
SimDuration ps(std::int64_t v) { return SimDuration::ps(v); }

// Runs the queue to the end as the event loop does (stale generations skipped); returns when each
// flow's collective ended (after its latency).
std::map<std::int32_t, std::int64_t> drain(LinkSharing& sharing, EventQueue& queue) {
  std::map<std::int32_t, std::int64_t> end;
  while (!queue.empty()) {
    const Event ev = queue.pop();
    if (ev.generation != sharing.generation(ev.subject)) {
      continue;
    }
    const auto id = static_cast<std::int32_t>(ev.subject);
    if (ev.kind == EventKind::kFlowDone && sharing.end_transfer(id, ev.t, queue)) {
      continue;  // its latency follows
    }
    end[id] = ev.t.ps();
    sharing.release(id);
  }
  return end;
}

// Group types 0 and 1 both hold class 0, so their flows meet on class 0's links.
const std::vector<std::vector<std::int32_t>> kTwoTypesOfOneClass = {{0}, {0}};

TEST(LinkSharingTest, TwoTransfersStartedTogetherEndAtTwiceTheShorterAndTheSum) {
  LinkSharing sharing(kTwoTypesOfOneClass, /*contention=*/true);
  sharing.reset(1);
  EventQueue queue;
  const std::int32_t a = sharing.start(0, 1, /*link=*/1, ps(300), ps(0), at(0), queue);
  const std::int32_t b = sharing.start(1, 2, /*link=*/1, ps(500), ps(0), at(0), queue);
  const auto end = drain(sharing, queue);
  EXPECT_EQ(end.at(a), 600);  // 2 T1
  EXPECT_EQ(end.at(b), 800);  // T1 + T2
}

TEST(LinkSharingTest, WithoutContentionEveryFlowHasTheWholeLink) {
  LinkSharing sharing(kTwoTypesOfOneClass, /*contention=*/false);
  sharing.reset(1);
  EventQueue queue;
  const std::int32_t a = sharing.start(0, 1, 1, ps(300), ps(0), at(0), queue);
  const std::int32_t b = sharing.start(1, 2, 1, ps(500), ps(0), at(0), queue);
  const auto end = drain(sharing, queue);
  EXPECT_EQ(end.at(a), 300);
  EXPECT_EQ(end.at(b), 500);
}

TEST(LinkSharingTest, FlowsOnDifferentLinksDoNotContend) {
  LinkSharing sharing(kTwoTypesOfOneClass, /*contention=*/true);
  sharing.reset(1);
  EventQueue queue;
  const std::int32_t intra = sharing.start(0, 1, /*link=*/0, ps(300), ps(0), at(0), queue);
  const std::int32_t inter = sharing.start(1, 2, /*link=*/1, ps(500), ps(0), at(0), queue);
  const auto end = drain(sharing, queue);
  EXPECT_EQ(end.at(intra), 300);
  EXPECT_EQ(end.at(inter), 500);
}

TEST(LinkSharingTest, LatencyFollowsTheSharedTransferUnshared) {
  LinkSharing sharing(kTwoTypesOfOneClass, /*contention=*/true);
  sharing.reset(1);
  EventQueue queue;
  const std::int32_t a = sharing.start(0, 1, 1, ps(300), ps(1000), at(0), queue);
  const std::int32_t b = sharing.start(1, 2, 1, ps(500), ps(0), at(0), queue);
  const auto end = drain(sharing, queue);
  EXPECT_EQ(end.at(a), 600 + 1000);  // its latency does not slow b
  EXPECT_EQ(end.at(b), 800);
}

TEST(LinkSharingTest, ResetForgetsFlowsAndReusesIds) {
  LinkSharing sharing(kTwoTypesOfOneClass, /*contention=*/true);
  sharing.reset(1);
  EventQueue queue;
  EXPECT_EQ(sharing.start(0, 1, 1, ps(300), ps(0), at(0), queue), 0);
  EXPECT_EQ(sharing.start(1, 2, 1, ps(500), ps(0), at(0), queue), 1);
  sharing.reset(1);
  queue.clear();
  const std::int32_t a = sharing.start(0, 1, 1, ps(300), ps(0), at(0), queue);
  EXPECT_EQ(a, 0);
  EXPECT_EQ(drain(sharing, queue).at(a), 300);  // alone on its link again
}

TEST(ClassClockTest, ComputeOnTwoStreamsAtOnceCountsOnceInTheUnion) {
  ClassClock clock;
  clock.begin_communication(at(0));
  clock.begin_compute(at(10));
  clock.begin_compute(at(20));
  clock.end_compute(at(10), at(40));
  clock.end_compute(at(20), at(50));
  EXPECT_EQ(clock.compute.ps(), 60);          // the sum of the ops
  EXPECT_EQ(clock.compute_before(at(70)), 40);  // their union, [10, 50)
  EXPECT_EQ(clock.exposed_since(at(0), 0, at(70)).ps(), 30);
  clock.end_communication(at(70));
  EXPECT_EQ(clock.communication.ps(), 70);
  EXPECT_EQ(clock.exposed.ps(), 30);
}

TEST(ClassClockTest, AnOpenComputeStretchCountsUpToNow) {
  ClassClock clock;
  clock.begin_compute(at(100));
  EXPECT_EQ(clock.compute_before(at(100)), 0);
  EXPECT_EQ(clock.compute_before(at(250)), 150);
  const std::int64_t at_start = clock.compute_before(at(200));
  EXPECT_EQ(clock.exposed_since(at(200), at_start, at(300)).ps(), 0);  // hidden by the compute
}

TEST(MemoryAccountingTest, PeakAndOverflowMoveOnlyAtAnAlloc) {
  MemoryResult m;
  m.capacity_bytes = 100;
  ClassBytes by_class{};
  std::int64_t total = 0;
  add_live_bytes(m, by_class, total, 1, 60);
  note_peak(m, by_class, total, at(5), 3);
  EXPECT_EQ(m.peak_bytes, 60);
  EXPECT_TRUE(m.fits);
  remove_live_bytes(by_class, total, 1, -60);
  add_live_bytes(m, by_class, total, 2, 120);
  note_peak(m, by_class, total, at(9), 7);
  EXPECT_EQ(m.peak_bytes, 120);
  EXPECT_EQ(m.peak_op, 7);
  EXPECT_EQ(m.peak_time, at(9));
  EXPECT_FALSE(m.fits);
  EXPECT_EQ(m.first_overflow_op, 7);
  EXPECT_EQ(m.high_water_by_class[1], 60);
  EXPECT_EQ(m.high_water_by_class[2], 120);
  note_reserved(m, 150, 7);
  EXPECT_EQ(m.peak_reserved_bytes, 150);
  EXPECT_FALSE(m.reserved_fits);
  EXPECT_EQ(m.first_reserved_overflow_op, 7);
}

}  // namespace
}  // namespace fsdp::sim::internal

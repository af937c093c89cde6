// SPDX-License-Identifier: Apache-2.0
// Closed forms for memory: the ZeRO paper's model-state formulas and the §5.2 transient peak in
// backward (4 full unit buffers with separate streams, 3 with a unified communication stream),
// which shows up in the caching allocator's reserved bytes.
#include <gtest/gtest.h>

#include <cstdint>

#include "sim/engine/simulator.h"
#include "sim/model/caching_allocator.h"
#include "tests/sim/sim_test_util.h"

namespace fsdp::sim {
namespace {

using testing::build;
using testing::layered_model;
using testing::round_hardware;

std::int64_t model_states(const MemoryResult& m) {
  const auto& by = m.resident_by_class;
  return by[static_cast<std::size_t>(BufferClass::kShardedWeights)] +
         by[static_cast<std::size_t>(BufferClass::kMainGrads)] +
         by[static_cast<std::size_t>(BufferClass::kOptimizerState)];
}

TEST(MemoryBoundsTest, UnshardedModelStatesMatchTheZeroPaper) {
  // ZeRO (Rajbhandari et al. 2020, §3.1): mixed-precision Adam keeps 16 bytes per parameter, so
  // 7.5B parameters need 120 GB on every rank without sharding.
  const Schedule s = build(layered_model(30, 16'000, 15'625), "dp=64", {}, Strategy::kNoShard);
  const SimResult r = simulate(s, round_hardware()).value();
  EXPECT_NEAR(static_cast<double>(model_states(r.classes[0].memory)), 120e9, 120e9 * 0.001);
}

struct Transient {
  std::int64_t allocated = 0;  // peak allocated minus resident
  std::int64_t reserved = 0;   // peak reserved minus the resident buffers' and workspace's segments
};

Transient backward_peak(bool unified) {
  // Units of one 4096 x 4096 bf16 weight (32 MiB, exact 2 MiB rounding in the large pool) and
  // tiny activations (1 byte per token: 4 KiB blocks in one 2 MiB small-pool segment).
  FsdpOptions o;
  o.schedule = SchedulePolicy::make(PrefetchPolicy(), PrefetchPolicy(), 0, unified).value();
  const Schedule s = build(layered_model(6, 4096, 4096, /*activation_bytes=*/1), "dp=2", o);
  const SimResult r = simulate(s, round_hardware()).value();
  const MemoryResult& m = r.classes[0].memory;
  std::int64_t resident_reserved = 0;
  for (const ResidentBuffer& b : s.programs()[0].resident) {
    resident_reserved += CachingAllocator::segment_size(CachingAllocator::round_size(b.bytes));
  }
  // The runtime's cuBLAS workspace, allocated before the step like the resident buffers.
  resident_reserved += CachingAllocator::segment_size(
      CachingAllocator::round_size(s.runtime_memory().allocator_bytes));
  return Transient{m.peak_bytes - m.resident_bytes, m.peak_reserved_bytes - resident_reserved};
}

TEST(MemoryBoundsTest, BackwardPeakIsFourUnitBuffersOrThreeWithAUnifiedStream) {
  // §5.2: current + prefetched unsharded weights + the unit's full grad + one partial-grad
  // buffer = 4 full unit buffers with separate streams; 3 with a unified stream, where the
  // reduce-scatter's buffer takes the place of the freed weights.
  constexpr std::int64_t kUnit = 4096LL * 4096 * 2;
  constexpr std::int64_t kActivations = 6 * 4096 * 1;  // all units' activations at most
  const Transient separate = backward_peak(/*unified=*/false);
  const Transient unified = backward_peak(/*unified=*/true);
  EXPECT_GE(separate.allocated, 4 * kUnit);
  EXPECT_LE(separate.allocated, 4 * kUnit + kActivations);
  EXPECT_GE(unified.allocated, 3 * kUnit);
  EXPECT_LE(unified.allocated, 3 * kUnit + kActivations);
  // Reserved: the same blocks, each in its own stream's large pool, plus one small segment.
  EXPECT_EQ(separate.reserved, 4 * kUnit + CachingAllocator::kSmallBuffer);
  EXPECT_EQ(unified.reserved, 3 * kUnit + CachingAllocator::kSmallBuffer);
}

}  // namespace
}  // namespace fsdp::sim

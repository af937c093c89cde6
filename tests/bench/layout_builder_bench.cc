// SPDX-License-Identifier: Apache-2.0
// Benchmarks of the layout builders on seeded synthetic parameter groups.
//
// Scenarios (all inputs are built once per size, outside the timed loop; seed 20260822):
//   BM_BuildForRowAtomicPadded/N    PADDED builder (fsdp-behaviour.md §2.2), N tensors, dp 1024, block 1, given
//                                   the shapes as an rvalue vector (the layout takes it over; the
//                                   vector is copied from the cached mix outside the timing).
//                                   Row sizes are divisors of 720720 (so the chunk is 720720 and
//                                   there are ~240 distinct row sizes); ~55% of the tensors are
//                                   fragments (numel < chunk) and the rest regulars of 1-4 chunks
//                                   plus a random remainder, so conjugate pairing, gap filling and
//                                   the tail all run. Target: N=1e6 < 2 s, N=1e5 < 0.2 s, and
//                                   time(10N) <= 15 * time(N).
//   BM_BuildForRowAtomicPaddedFromSpan/N  the same from a span (the layout copies the shapes).
//   BM_BuildUnpadded/N              UNPADDED builder (fsdp-behaviour.md §2.3) on the same mix, dp 16384.
//                                   Target: N=1e6 < 0.5 s.
//   BM_BuildTensorAtomic/N          TensorAtomic builder (fsdp-behaviour.md §2.4) on the same mix, dp 16384,
//                                   seeded random owners. Target: N=1e6 < 0.5 s.
//   BM_PlanTensorOwners/N           plan_tensor_owners (LPT greedy) on the same mix, dp 16384.
//   BM_ReferencePadded/N            the naive quadratic transcription of the reference
//                                   (tests/core/layout/reference_row_atomic.h), dp 1024, for
//                                   comparison with BM_BuildForRowAtomicPadded at the same N.
//
// Run: cmake --preset bench && cmake --build --preset bench -j2 &&
//      build/bench/bin/layout_builder_bench --benchmark_repetitions=3
//      --benchmark_report_aggregates_only=true
#include "core/layout/layout_builder.h"

#include "core/layout/owner_planner.h"
#include "core/layout/shape.h"
#include "tests/core/layout/reference_row_atomic.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

namespace fsdp {
namespace {

constexpr std::int64_t kChunk = 720720;  // lcm(1..16) = 2^4 * 3^2 * 5 * 7 * 11 * 13
constexpr std::uint64_t kSeed = 20260822;

std::vector<std::int64_t> divisors_of_chunk() {
  std::vector<std::int64_t> ds;
  for (std::int64_t d = 1; d <= kChunk; ++d) {
    if (kChunk % d == 0) {
      ds.push_back(d);
    }
  }
  return ds;
}

// The seeded mix described in the header; identical for every benchmark at the same n.
std::vector<Shape> make_mix(std::int64_t n) {
  static const std::vector<std::int64_t> kDivisors = divisors_of_chunk();
  std::mt19937_64 rng(kSeed + static_cast<std::uint64_t>(n));
  std::uniform_int_distribution<std::size_t> pick_row(0, kDivisors.size() - 1);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<Shape> shapes;
  shapes.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t row = kDivisors[pick_row(rng)];
    const std::int64_t rows_per_chunk = kChunk / row;
    std::int64_t rows = 0;
    if (unit(rng) < 0.55) {
      // fragment: 0 .. rows_per_chunk - 1 rows (numel < chunk)
      rows = std::uniform_int_distribution<std::int64_t>(0, rows_per_chunk - 1)(rng);
    } else {
      // regular: 1-4 whole chunks plus a remainder of 0 .. rows_per_chunk - 1 rows
      const std::int64_t chunks = std::uniform_int_distribution<std::int64_t>(1, 4)(rng);
      rows = chunks * rows_per_chunk +
             std::uniform_int_distribution<std::int64_t>(0, rows_per_chunk - 1)(rng);
    }
    shapes.push_back(row == 1 ? Shape::make({rows}).value() : Shape::make({rows, row}).value());
  }
  return shapes;
}

const std::vector<Shape>& mix(std::int64_t n) {
  static std::map<std::int64_t, std::vector<Shape>> cache;
  auto it = cache.find(n);
  if (it == cache.end()) {
    it = cache.emplace(n, make_mix(n)).first;
  }
  return it->second;
}

// The caller hands over a vector it built (as the CLI and build_param_groups do), so the layout
// takes it without a copy; making that vector is the caller's work and is not timed.
void BM_BuildForRowAtomicPadded(benchmark::State& state) {
  const std::vector<Shape>& shapes = mix(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<Shape> handed = shapes;
    state.ResumeTiming();
    auto layout = build_for_row_atomic(std::move(handed), /*dp_size=*/1024, /*block_size=*/1);
    if (!layout.has_value()) {
      state.SkipWithError(layout.error().message().c_str());
      break;
    }
    benchmark::DoNotOptimize(layout);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BuildForRowAtomicPadded)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond);

// The same from a span: the layout copies the shapes.
void BM_BuildForRowAtomicPaddedFromSpan(benchmark::State& state) {
  const std::vector<Shape>& shapes = mix(state.range(0));
  for (auto _ : state) {
    auto layout = build_for_row_atomic(shapes, /*dp_size=*/1024, /*block_size=*/1);
    if (!layout.has_value()) {
      state.SkipWithError(layout.error().message().c_str());
      break;
    }
    benchmark::DoNotOptimize(layout);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BuildForRowAtomicPaddedFromSpan)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond);

void BM_BuildUnpadded(benchmark::State& state) {
  const std::vector<Shape>& shapes = mix(state.range(0));
  for (auto _ : state) {
    auto layout = build_for_row_atomic_unpadding(shapes, /*dp_size=*/16384, /*block_size=*/1);
    if (!layout.has_value()) {
      state.SkipWithError(layout.error().message().c_str());
      break;
    }
    benchmark::DoNotOptimize(layout);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BuildUnpadded)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_BuildTensorAtomic(benchmark::State& state) {
  const std::vector<Shape>& shapes = mix(state.range(0));
  constexpr std::int64_t kDp = 16384;
  std::mt19937_64 rng(kSeed);
  std::uniform_int_distribution<std::int64_t> pick(0, kDp - 1);
  std::vector<std::int64_t> owners(shapes.size());
  for (auto& o : owners) {
    o = pick(rng);
  }
  for (auto _ : state) {
    auto layout = build_for_tensor_atomic(shapes, kDp, owners);
    if (!layout.has_value()) {
      state.SkipWithError(layout.error().message().c_str());
      break;
    }
    benchmark::DoNotOptimize(layout);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BuildTensorAtomic)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_PlanTensorOwners(benchmark::State& state) {
  const std::vector<Shape>& shapes = mix(state.range(0));
  for (auto _ : state) {
    auto owners = plan_tensor_owners(shapes, /*dp_size=*/16384);
    benchmark::DoNotOptimize(owners);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_PlanTensorOwners)->Arg(1000000)->Unit(benchmark::kMillisecond);

void BM_ReferencePadded(benchmark::State& state) {
  const std::vector<Shape>& shapes = mix(state.range(0));
  for (auto _ : state) {
    std::int64_t size = 0;
    auto offsets = testing::reference_row_atomic_offsets(shapes, /*dp=*/1024, /*block=*/1, &size);
    if (!offsets.has_value()) {
      state.SkipWithError("reference rejected the input");
      break;
    }
    benchmark::DoNotOptimize(offsets);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ReferencePadded)->Arg(1000)->Arg(5000)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fsdp

BENCHMARK_MAIN();

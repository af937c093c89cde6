// SPDX-License-Identifier: Apache-2.0
// Properties of build_schedule over random small models, meshes and policies: every schedule
// passes the verifier (acyclic; weights gathered before and freed after each compute; every
// buffer freed; the same collective order on every rank class), the per-step collective counts
// follow §4.7 for each strategy, builds are deterministic, invalid requests give an Error, and
// the checks themselves never crash on a corrupted schedule.
#include "core/schedule/schedule_builder.h"
#include "core/schedule/schedule_verifier.h"
#include "properties/gen/gen_fsdp_config.h"
#include "properties/gen/gen_model.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fsdp {
namespace {

struct Built {
  Model model;
  FsdpConfig config;
  Expected<Schedule> schedule;
};

Built build_random() {
  const gen::ModelSpec mspec = *gen::model_spec();
  const gen::ConfigSpec cspec = *gen::config_spec();
  RC_LOG() << mspec << "\n" << cspec << "\n";
  Model model = gen::make_model(mspec);
  auto config = gen::make_config(cspec);
  if (!config) {
    RC_FAIL(config.error().message());
  }
  auto schedule = build_schedule(model, *config, Workload{/*seq_len=*/16, /*micro_batch_size=*/2});
  return Built{std::move(model), std::move(*config), std::move(schedule)};
}

std::int64_t count(const CollectiveSummary& s, const std::string& kind, const std::string& axis) {
  const auto k = s.find(kind);
  if (k == s.end()) {
    return 0;
  }
  const auto a = k->second.find(axis);
  return a == k->second.end() ? 0 : a->second;
}

std::int64_t total(const CollectiveSummary& s, const std::string& kind) {
  const auto k = s.find(kind);
  std::int64_t n = 0;
  if (k != s.end()) {
    for (const auto& [axis, c] : k->second) {
      n += c;
    }
  }
  return n;
}

RC_GTEST_PROP(ScheduleProps, BuiltSchedulesPassEveryCheck, ()) {
  const Built b = build_random();
  if (!b.schedule) {
    RC_FAIL("build_schedule failed: " + b.schedule.error().message());
  }
  const Schedule& s = *b.schedule;
  const Status st = verify_schedule(s.parts());
  if (!st) {
    RC_FAIL(st.error().message());
  }
  std::int64_t ranks = 0;
  for (const RankProgram& p : s.programs()) {
    ranks += p.num_ranks;
    const MemoryTally t = tally_memory(p).value();
    RC_ASSERT(t.end_transient_bytes == 0);
  }
  RC_ASSERT(ranks == s.mesh().size());
  const bool even =
      b.config.shard_layout() == ShardLayout::kPadded && !b.config.placements().is_tensor_atomic();
  if (even) {
    RC_ASSERT(s.programs().size() == 1u);
  }
  RC_TAG(b.config.mesh().ndim() > 1 ? "2-axis" : "1-axis",
         s.programs().size() > 1 ? "several classes" : "one class");
}

// §4.7: per optimizer step, with M microbatches, G parameter groups of which T are trainable.
RC_GTEST_PROP(ScheduleProps, CollectiveCountsFollowTheStrategy, ()) {
  const gen::ModelSpec mspec = *gen::model_spec();
  const gen::ConfigSpec cspec = *gen::config_spec();
  RC_LOG() << mspec << "\n" << cspec << "\n";
  const Model model = gen::make_model(mspec);
  const FsdpConfig config = gen::make_config(cspec).value();
  const auto built = build_schedule(model, config, Workload{});
  RC_ASSERT(built.has_value());
  const Schedule& s = *built;
  const CollectiveSummary sum = s.collective_summary();
  const gen::GroupCounts groups = gen::count_groups(model);
  const std::int64_t m = config.num_microbatches();
  const std::int64_t g = groups.groups;
  const std::int64_t t = groups.trainable;
  std::map<std::string, std::int64_t> sync_by_axis;
  std::int64_t unshard = 0;
  for (const Op& op : s.programs()[0].ops) {
    if (!is_collective(op.kind)) {
      continue;
    }
    const CollectiveInfo& info = s.collectives()[static_cast<std::size_t>(op.collective)];
    if (info.leg == CollectiveLeg::kModelWeightSync) {
      RC_ASSERT(op.microbatch == 0);
      ++sync_by_axis[s.mesh().axis_name(op.axis)];
    } else if (info.leg == CollectiveLeg::kUnshard) {
      ++unshard;
    } else if (info.leg == CollectiveLeg::kGradFinalize) {
      RC_ASSERT(op.microbatch == m - 1);  // is_last only
    }
  }
  using Sync = std::map<std::string, std::int64_t>;
  switch (cspec.strategy) {
    case Strategy::kZero3:
      RC_ASSERT(count(sum, "reduce-scatter", "dp") == m * t);
      RC_ASSERT(total(sum, "all-reduce") == 0);
      RC_ASSERT(unshard == 2 * m * g);
      RC_ASSERT(sync_by_axis.empty());
      break;
    case Strategy::kZero2:
      RC_ASSERT(count(sum, "reduce-scatter", "dp") == m * t);
      RC_ASSERT(total(sum, "all-reduce") == 0);
      RC_ASSERT(unshard == 0);
      RC_ASSERT(sync_by_axis == (g > 0 ? Sync{{"dp", g}} : Sync{}));
      break;
    case Strategy::kZero1:
      RC_ASSERT(count(sum, "reduce-scatter", "dp") == t);
      RC_ASSERT(total(sum, "all-reduce") == 0);
      RC_ASSERT(unshard == 0);
      RC_ASSERT(sync_by_axis == (g > 0 ? Sync{{"dp", g}} : Sync{}));
      break;
    case Strategy::kNoShard:
      RC_ASSERT(total(sum, "reduce-scatter") == 0);
      RC_ASSERT(count(sum, "all-reduce", "dp") == t);
      RC_ASSERT(total(sum, "all-gather") == 0);
      break;
    case Strategy::kHsdp:
      RC_ASSERT(count(sum, "reduce-scatter", "dp_inner") == m * t);
      RC_ASSERT(count(sum, "reduce-scatter", "dp_outer") == 0);
      RC_ASSERT(count(sum, "all-reduce", "dp_outer") == t);
      RC_ASSERT(count(sum, "all-gather", "dp_inner") == 2 * m * g);
      RC_ASSERT(sync_by_axis.empty());
      break;
    case Strategy::kHfsdp:
      RC_ASSERT(count(sum, "reduce-scatter", "dp_inner") == m * t);
      RC_ASSERT(count(sum, "reduce-scatter", "dp_outer") == t);
      RC_ASSERT(total(sum, "all-reduce") == 0);
      RC_ASSERT(unshard == 2 * m * g);
      RC_ASSERT(sync_by_axis == (g > 0 ? Sync{{"dp_outer", g}} : Sync{}));
      break;
  }
}

RC_GTEST_PROP(ScheduleProps, BuildsAreDeterministic, ()) {
  const Built b = build_random();
  RC_ASSERT(b.schedule.has_value());
  const auto again = build_schedule(b.model, b.config, Workload{16, 2});
  RC_ASSERT(again.has_value());
  RC_ASSERT(*again == *b.schedule);
}

// Dropping any alloc, free or record of a valid schedule is caught by the verifier, and
// Schedule::make refuses the result.
RC_GTEST_PROP(ScheduleProps, DroppingAnAllocFreeOrRecordIsCaught, ()) {
  const Built b = build_random();
  RC_ASSERT(b.schedule.has_value());
  const Schedule& s = *b.schedule;
  const auto cls = *rc::gen::inRange<std::size_t>(0, s.programs().size());
  std::vector<RankProgram> programs = s.programs();
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < programs[cls].ops.size(); ++i) {
    const OpKind k = programs[cls].ops[i].kind;
    if (k == OpKind::kAlloc || k == OpKind::kFree || k == OpKind::kRecord) {
      candidates.push_back(i);
    }
  }
  RC_PRE(!candidates.empty());
  const std::size_t drop = *rc::gen::elementOf(candidates);
  programs[cls].ops.erase(programs[cls].ops.begin() + static_cast<std::ptrdiff_t>(drop));
  ScheduleParts broken = s.parts();
  broken.programs = std::move(programs);
  const Status st = verify_schedule(broken);
  RC_ASSERT(!st.has_value());
  RC_ASSERT(!st.error().message().empty());
  RC_ASSERT(!Schedule::make(std::move(broken)).has_value());
}

// The checks read untrusted schedules: arbitrary corruption gives ok or an Error, never a crash
// or an exception.
RC_GTEST_PROP(ScheduleProps, ChecksNeverCrashOnCorruptedSchedules, ()) {
  const Built b = build_random();
  RC_ASSERT(b.schedule.has_value());
  const Schedule& s = *b.schedule;
  std::vector<RankProgram> programs = s.programs();
  const auto edits = *rc::gen::inRange(1, 4);
  for (int e = 0; e < edits; ++e) {
    RankProgram& p = programs[*rc::gen::inRange<std::size_t>(0, programs.size())];
    if (p.ops.empty()) {
      continue;
    }
    const auto i = *rc::gen::inRange<std::size_t>(0, p.ops.size());
    const auto j = *rc::gen::inRange<std::size_t>(0, p.ops.size());
    const auto v = *rc::gen::inRange<std::int32_t>(-3, 40);
    Op& op = p.ops[i];
    switch (*rc::gen::inRange(0, 14)) {
      case 0:
        p.ops.erase(p.ops.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      case 1:
        p.ops.push_back(op);
        break;
      case 2:
        std::swap(op, p.ops[j]);
        break;
      case 3:
        op.event = v;
        break;
      case 4:
        op.buffer = v;
        break;
      case 5:
        op.collective = v;
        break;
      case 6:
        op.unit = v;
        break;
      case 7:
        op.axis = v;
        break;
      case 8:
        op.kind = static_cast<OpKind>(static_cast<std::uint8_t>(v & 15));
        break;
      case 9:
        op.first_operand = v;
        break;
      case 10:
        op.num_operands = v & 7;
        break;
      case 11:
      case 12:
        if (!p.operands.empty()) {
          Operand& o = p.operands[*rc::gen::inRange<std::size_t>(0, p.operands.size())];
          if (e % 2 == 0) {
            o.buffer = v;
            o.group = *rc::gen::inRange<std::int32_t>(-2, 8);
          } else {
            o.space = static_cast<BufferSpace>(static_cast<std::uint8_t>(v & 3));
            o.access = static_cast<Access>(static_cast<std::uint8_t>((v >> 2) & 3));
            o.extent = static_cast<Extent>(static_cast<std::uint8_t>(v & 7));
          }
        }
        break;
      default:
        op.stream = static_cast<StreamKind>(static_cast<std::uint8_t>(v & 3));
        break;
    }
  }
  ScheduleParts broken = s.parts();
  broken.programs = programs;
  const Status st = verify_schedule(broken);
  if (!st) {
    RC_ASSERT(!st.error().message().empty());
  }
  for (const RankProgram& p : programs) {
    (void)tally_memory(p);
    (void)HappensBefore::make(p);
  }
}

// Twin of the valid-input properties: a bad workload or an fp8 (MXFP8) parameter whose rows do
// not fill 32-row blocks gives an Error, never a crash.
RC_GTEST_PROP(ScheduleProps, InvalidRequestsGiveErrors, ()) {
  gen::ModelSpec mspec = *gen::model_spec();
  const gen::ConfigSpec cspec = *gen::config_spec();
  const FsdpConfig config = gen::make_config(cspec).value();
  Workload w{16, 1};
  const bool bad_workload = *rc::gen::arbitrary<bool>();
  if (bad_workload) {
    const auto bad = *rc::gen::inRange<std::int64_t>(-3, 1);
    const auto good = *rc::gen::inRange<std::int64_t>(1, 64);
    w = *rc::gen::arbitrary<bool>() ? Workload{bad, good} : Workload{good, bad};
  } else {
    // Not a 2-D shape with both dims multiples of 32.
    const auto off = *rc::gen::inRange<std::int64_t>(1, 32);
    const auto blocks = *rc::gen::inRange<std::int64_t>(0, 3);
    gen::ParamSpec fp8;
    fp8.dtype = DType::kFp8;
    fp8.dims = *rc::gen::element(std::vector<std::int64_t>{32 * blocks + off, 32},
                                 std::vector<std::int64_t>{32, 32 * blocks + off},
                                 std::vector<std::int64_t>{32 * (blocks + 1)});
    mspec.units[*rc::gen::inRange<std::size_t>(0, mspec.units.size())].params.push_back(fp8);
  }
  RC_LOG() << mspec << "\n" << cspec << "\n";
  const auto s = build_schedule(gen::make_model(mspec), config, w);
  RC_ASSERT(!s.has_value());
  RC_ASSERT(!s.error().message().empty());
  if (bad_workload) {
    RC_ASSERT(s.error().code() == ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// Row boundaries on real data (a simulator/backend cross-check): over the generated tiny trainings of gen_train_spec.h,
// every collective the CPU backend completes is observed (ExecutorOptions::on_collective) and
// checked against values computed here, independently of the executor: after each all-gather the
// buffer holds every tensor bit for bit (step 0: the initial values; later: the parameters the
// executor gathers after the previous step) and zeros in padding; each member's input is whole
// rows (blocks, tensors) of the layout, exactly the layout's segment on 1-axis meshes; each
// reduce-scatter output is the sum over the axis members of their inputs on this rank's rows
// (bitwise: the in-process communicator adds in member order starting at 0, as this check does)
// and the main-grad accumulator is grad_scale / |dp| times the sum over microbatches.
// See docs/design/backends.md, "Cross-checks".
#include "backends/cpu/cpu_device.h"
#include "backends/cpu/in_process_comm.h"
#include "backends/exec/executor.h"
#include "backends/exec/trainer.h"
#include "core/base/strings.h"
#include "core/schedule/group_geometry.h"
#include "properties/cross/gen_train_spec.h"
#include "properties/cross/rank_harness.h"
#include "tests/backends/exec/train_test_util.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fsdp {
namespace {

// A CollectiveObservation with its data copied out (the executor's buffers are reused).
struct Seen {
  exec::CollectiveObservation meta;
  std::vector<float> input;
  std::vector<float> output;
  std::vector<float> accumulator;
};

struct RankLog {
  std::vector<Seen> seen;                          // in completion order
  backend::ParamValues initial;                    // what the executor started from (tp slice)
  std::vector<backend::ParamValues> params_after;  // gather_parameters() after each step
};

Expected<RankLog> run_rank(const exec::TrainSetup& setup, const exec::TrainSpec& spec,
                           std::int64_t rank, cpu::InProcessWorld& world) {
  std::unique_ptr<exec::CommunicatorSet> comms = world.communicators(rank);
  cpu::CpuDevice device(str_cat("rank ", rank));
  FSDP_TRY(std::unique_ptr<backend::HostDecoder> decoder,
           cross::make_rank_decoder(setup, spec, rank));
  FSDP_TRY(const backend::ParamValues initial, cross::rank_initial(setup, spec, rank));
  RankLog log;
  log.initial = initial;
  std::mutex mu;  // the observer runs on every stream's worker
  exec::ExecutorOptions options;
  options.optimizer = spec.optimizer;
  options.hyper = spec.hyper;
  options.on_collective = [&](const exec::CollectiveObservation& o) {
    Seen s{o,
           {o.input.begin(), o.input.end()},
           {o.output.begin(), o.output.end()},
           {o.accumulator.begin(), o.accumulator.end()}};
    s.meta.input = s.meta.output = s.meta.accumulator = {};
    const std::lock_guard<std::mutex> lock(mu);
    log.seen.push_back(std::move(s));
  };
  FSDP_TRY(std::unique_ptr<exec::Executor> executor,
           exec::Executor::make(setup.schedule, rank, initial, decoder.get(), &device, comms.get(),
                                options));
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    FSDP_RETURN_IF_ERROR(executor->run_step(step));
    FSDP_TRY(backend::ParamValues params, executor->gather_parameters());
    log.params_after.push_back(std::move(params));
  }
  return log;
}

struct Observed {
  exec::TrainSpec spec;
  exec::TrainSetup setup;
  std::vector<RankLog> ranks;
};

Observed observe(const exec::TrainSpec& spec,
                 std::optional<exec::TrainSetup> given = std::nullopt) {
  auto setup = given ? Expected<exec::TrainSetup>(std::move(*given)) : exec::prepare_training(spec);
  if (!setup) {
    RC_FAIL(str_cat("prepare_training: ", setup.error().message()));
  }
  auto world = cpu::InProcessWorld::make(
      setup->config.mesh(),
      std::chrono::milliseconds(static_cast<std::int64_t>(spec.timeout_s * 1000.0)));
  RC_ASSERT(world.has_value());
  auto results = cross::run_rank_threads<RankLog>(
      setup->config.mesh().size(),
      [&](std::int64_t r) { return run_rank(*setup, spec, r, **world); });
  Observed out{spec, std::move(*setup), {}};
  for (std::size_t r = 0; r < results.size(); ++r) {
    if (!results[r]) {
      RC_FAIL(str_cat("rank ", r, ": ", results[r].error().message()));
    }
    out.ranks.push_back(std::move(*results[r]));
  }
  return out;
}

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

// "" when every boundary of `r` falls on whole rows (BlockAtomic: whole blocks of `block` rows;
// TensorAtomic: whole tensors) of every tensor of `layout` it cuts; else what it cuts.
std::string cut(const GlobalLayout& layout, Range r, std::int64_t block, bool tensor_atomic) {
  for (std::size_t t = 0; t < layout.tensor_shapes().size(); ++t) {
    const Shape& shape = layout.tensor_shapes()[t];
    const std::int64_t start = layout.tensor_to_offset()[t];
    const std::int64_t numel = shape.numel();
    if (numel == 0) {
      continue;
    }
    const std::int64_t align = tensor_atomic ? numel : block * (numel / shape.dim(0));
    for (const std::int64_t b : {r.start, r.end()}) {
      if (b > start && b < start + numel && (b - start) % align != 0) {
        return str_cat("boundary ", b, " cuts tensor ", t, " [", start, ", ", start + numel,
                       ") off its ", align, "-element ", tensor_atomic ? "tensor" : "row block");
      }
    }
  }
  return "";
}

// Tensor index of layout element x, or -1 for padding.
std::int64_t tensor_at(const GlobalLayout& layout, std::int64_t x) {
  for (std::size_t t = 0; t < layout.tensor_shapes().size(); ++t) {
    const std::int64_t start = layout.tensor_to_offset()[t];
    if (x >= start && x < start + layout.tensor_shapes()[t].numel()) {
      return static_cast<std::int64_t>(t);
    }
  }
  return -1;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// The observations of one collective occurrence on one axis group, by member index.
struct Occurrence {
  std::string where;
  const CollectiveInfo* info = nullptr;
  const GroupGeometry* group = nullptr;
  std::vector<const Seen*> members;
};

// Groups every rank's observations: key (step, collective, occurrence on the rank, axis group).
std::vector<Occurrence> occurrences(const Observed& o) {
  const DeviceMesh& mesh = o.setup.config.mesh();
  std::map<std::tuple<std::int64_t, std::int32_t, std::int64_t, std::vector<std::int64_t>>,
           Occurrence>
      by_key;
  for (std::size_t r = 0; r < o.ranks.size(); ++r) {
    std::map<std::pair<std::int64_t, std::int32_t>, std::int64_t> count;
    for (const Seen& s : o.ranks[r].seen) {
      const auto c = at(s.meta.collective);
      RC_ASSERT(c < o.setup.schedule.collectives().size());
      const CollectiveInfo& info = o.setup.schedule.collectives()[c];
      RC_ASSERT(info.kind == s.meta.kind);
      MeshCoordinate coord = mesh.coordinate(static_cast<std::int64_t>(r)).value();
      RC_ASSERT(coord.local_ranks[at(info.axis)] == s.meta.axis_rank);
      coord.local_ranks[at(info.axis)] = -1;  // the axis group: every other coordinate
      const std::int64_t k = count[{s.meta.step, s.meta.collective}]++;
      Occurrence& occ = by_key[{s.meta.step, s.meta.collective, k, coord.local_ranks}];
      if (occ.members.empty()) {
        occ.where = str_cat("step ", s.meta.step, " collective ", c, " (", to_string(info.leg), " ",
                            to_string(info.kind), " of unit ", info.unit, " group ", info.group,
                            ", occurrence ", k, ")");
        occ.info = &info;
        occ.group = &o.setup.schedule.geometry().groups[at(info.geometry_group)];
        occ.members.assign(at(mesh.axis_size(info.axis)), nullptr);
      }
      RC_ASSERT(occ.members[at(s.meta.axis_rank)] == nullptr);
      occ.members[at(s.meta.axis_rank)] = &s;
    }
  }
  std::vector<Occurrence> out;
  for (auto& [key, occ] : by_key) {
    for (std::size_t m = 0; m < occ.members.size(); ++m) {
      if (occ.members[m] == nullptr) {
        RC_FAIL(str_cat(occ.where, ": member ", m, " of the axis never completed it"));
      }
    }
    out.push_back(std::move(occ));
  }
  return out;
}

// The parameters every tensor must hold when step `step` gathers it.
const backend::ParamValues& params_at(const Observed& o, std::int64_t step, std::int64_t rank) {
  return step == 0 ? o.ranks[at(rank)].initial : o.ranks[at(rank)].params_after[at(step - 1)];
}

// Ranges r_0, r_1, ... (member order) tile `whole`.
void assert_tiles(const std::vector<Range>& parts, Range whole, const std::string& where) {
  std::int64_t next = whole.start;
  for (std::size_t m = 0; m < parts.size(); ++m) {
    if (parts[m].start != next) {
      RC_FAIL(str_cat(where, ": member ", m, "'s range starts at ", parts[m].start,
                      "; expected ", next));
    }
    next = parts[m].end();
  }
  RC_ASSERT(next == whole.end());
}

// Each member's shard (the gather's input or the reduce-scatter's output) is whole rows; on a
// 1-axis mesh whose layout has one segment per member, exactly member m's segment.
void assert_whole_rows(const Observed& o, const Occurrence& occ, const std::vector<Range>& shards) {
  const GlobalLayout& layout = occ.group->layout;
  for (std::size_t m = 0; m < shards.size(); ++m) {
    const std::string bad = cut(layout, shards[m], o.spec.block_size, o.spec.tensor_atomic);
    if (!bad.empty()) {
      RC_FAIL(str_cat(occ.where, ": member ", m, "'s shard: ", bad));
    }
  }
  const std::vector<std::int64_t>& ro = layout.rank_to_offset();
  if (o.setup.config.mesh().ndim() == 1 && ro.size() == shards.size()) {
    for (std::size_t m = 0; m < shards.size(); ++m) {
      const std::int64_t end = m + 1 < ro.size() ? ro[m + 1] : layout.size();
      if (shards[m].start != ro[m] || shards[m].end() != end) {
        RC_FAIL(str_cat(occ.where, ": member ", m, " holds [", shards[m].start, ", ",
                        shards[m].end(), "); the layout assigns it [", ro[m], ", ", end, ")"));
      }
    }
  }
}

void check_all_gather(const Observed& o, const Occurrence& occ) {
  const Range out = occ.members[0]->meta.out;
  std::vector<Range> shards;
  for (const Seen* s : occ.members) {
    RC_ASSERT(s->meta.out == out);
    RC_ASSERT(s->input.size() == at(s->meta.in.numel));
    shards.push_back(s->meta.in);
  }
  assert_tiles(shards, out, occ.where);
  assert_whole_rows(o, occ, shards);
  const GlobalLayout& layout = occ.group->layout;
  for (std::size_t m = 0; m < occ.members.size(); ++m) {
    const Seen& s = *occ.members[m];
    const auto rank = static_cast<std::int64_t>(s.meta.rank);
    const backend::ParamValues& params = params_at(o, s.meta.step, rank);
    for (std::int64_t x = out.start; x < out.end(); ++x) {
      const float got = s.output[at(x - out.start)];
      // The concatenation of every member's shard.
      const Seen& owner = *occ.members[at(std::upper_bound(shards.begin(), shards.end(), x,
                                                           [](std::int64_t v, const Range& r) {
                                                             return v < r.start;
                                                           }) -
                                          shards.begin() - 1)];
      const float sent = owner.input[at(x - owner.meta.in.start)];
      // The tensor's current value, or zero in padding.
      const std::int64_t t = tensor_at(layout, x);
      const float want =
          t < 0 ? 0.0F
                : params[at(occ.group->unit)][at(occ.group->param_indices[at(t)])]
                        [at(x - layout.tensor_to_offset()[at(t)])];
      if (!same_bits(got, sent) || !same_bits(got, want)) {
        RC_FAIL(str_cat(occ.where, ": rank ", rank, " element ", x,
                        t < 0 ? " (padding)" : str_cat(" (tensor ", t, ")"), " holds ", got,
                        "; the sender's shard has ", sent, ", the parameter ", want));
      }
    }
  }
}

// Sum over members in member order from 0 (the in-process communicator's order).
float member_sum(const Occurrence& occ, std::int64_t x) {
  float sum = 0.0F;
  for (const Seen* s : occ.members) {
    sum += s->input[at(x - s->meta.in.start)];
  }
  return sum;
}

// Main-grad accumulators as the averaging rule builds them (from zero every step), per (rank,
// step, collective).
using Accumulators =
    std::map<std::tuple<std::int64_t, std::int64_t, std::int32_t>, std::vector<float>>;

void check_reduce_scatter(const Observed& o, const Occurrence& occ, Accumulators& acc) {
  const Range in = occ.members[0]->meta.in;
  std::vector<Range> shards;
  for (const Seen* s : occ.members) {
    RC_ASSERT(s->meta.in == in);
    RC_ASSERT(s->input.size() == at(in.numel));
    shards.push_back(s->meta.out);
  }
  assert_tiles(shards, in, occ.where);
  assert_whole_rows(o, occ, shards);
  const GlobalLayout& layout = occ.group->layout;
  // The last step of grad_reduce adds into the accumulator; the steps before it (two sharded DP
  // axes) reduce in place in the partial buffer, and their `input` is the executor's copy of it
  // from before the collective.
  const bool reduce_leg = occ.info->leg == CollectiveLeg::kGradReduce &&
                          static_cast<std::size_t>(occ.info->leg_step) + 1 ==
                              occ.group->leg(CollectiveLeg::kGradReduce).steps.size();
  // grad_scale / |dp|: every mesh axis but tp is a data-parallel axis here.
  const DeviceMesh& mesh = o.setup.config.mesh();
  const auto scale = static_cast<float>(
      o.spec.grad_scale / static_cast<double>(mesh.size() / exec::tensor_parallel_size(mesh)));
  for (const Seen* s : occ.members) {
    const Range out = s->meta.out;
    std::vector<float>& model = acc[{s->meta.rank, s->meta.step, s->meta.collective}];
    if (reduce_leg) {
      if (model.empty() || s->meta.overwrote) {
        model.assign(at(out.numel), 0.0F);
      }
      RC_ASSERT(s->accumulator.size() == at(out.numel));
    }
    for (std::int64_t x = out.start; x < out.end(); ++x) {
      const std::size_t k = at(x - out.start);
      const float want = member_sum(occ, x);
      if (tensor_at(layout, x) < 0 && want != 0.0F) {
        RC_FAIL(str_cat(occ.where, ": padding element ", x, " of the inputs sums to ", want));
      }
      // With overwrote the output is the accumulator itself (already scaled).
      if (!(reduce_leg && s->meta.overwrote) && !same_bits(s->output[k], want)) {
        RC_FAIL(str_cat(occ.where, ": rank ", s->meta.rank, " element ", x, " holds ",
                        s->output[k], "; the members' inputs sum to ", want));
      }
      if (reduce_leg) {
        model[k] += scale * want;
        // A multiply-add may be contracted into an FMA on one side only: a few ulps.
        const float got = s->accumulator[k];
        if (std::abs(got - model[k]) > 1e-6F * std::max(1.0F, std::abs(model[k]))) {
          RC_FAIL(str_cat(occ.where, ": rank ", s->meta.rank, " main grad element ", x, " is ",
                          got, "; grad_scale/|dp| x the sum over microbatches gives ",
                          model[k]));
        }
      }
    }
  }
}

void check_all_reduce(const Occurrence& occ) {
  const Seen& first = *occ.members[0];
  for (const Seen* s : occ.members) {
    RC_ASSERT(s->meta.out == first.meta.out);
    for (std::size_t k = 0; k < s->output.size(); ++k) {
      if (!same_bits(s->output[k], first.output[k])) {
        RC_FAIL(str_cat(occ.where, ": rank ", s->meta.rank, " element ",
                        first.meta.out.start + static_cast<std::int64_t>(k), " is ",
                        s->output[k], "; rank ", first.meta.rank, " has ", first.output[k]));
      }
    }
  }
}

void check(const Observed& o) {
  // Every parameter collective the schedule issues was observed on every rank of every step
  // (a tensor-parallel split's activation collectives move no parameter rows: the decoder issues
  // them inside its compute, and the cross-checks of agreement_props.cc count their bytes).
  std::size_t issued = 0;
  for (std::int64_t r = 0; r < o.setup.config.mesh().size(); ++r) {
    for (const Op& op : o.setup.schedule.program_of_rank(r).ops) {
      issued +=
          is_collective(op.kind) && o.setup.schedule.collectives()[at(op.collective)].activation < 0
              ? 1
              : 0;
    }
  }
  std::size_t seen = 0;
  for (const RankLog& rank : o.ranks) {
    seen += rank.seen.size();
  }
  RC_ASSERT(seen == issued * static_cast<std::size_t>(o.spec.steps));
  Accumulators acc;
  // Map order is (step, collective, occurrence): a group's microbatches reach the model in order.
  for (const Occurrence& occ : occurrences(o)) {
    switch (occ.info->kind) {
      case OpKind::kAllGather:
        check_all_gather(o, occ);
        break;
      case OpKind::kReduceScatter:
        check_reduce_scatter(o, occ, acc);
        break;
      default:
        check_all_reduce(occ);
        break;
    }
  }
}

RC_GTEST_PROP(RowBoundaryProps, EveryCollectiveMovesWholeRowsAndExactValues, ()) {
  const exec::TrainSpec spec = *gen::train_spec();
  RC_TAG(to_string(spec.strategy));
  check(observe(spec));
}

// The same checks on fixed configurations the issue names (no counter-example has been found;
// these keep the corners covered whatever the generator draws).
void check_fixed(const exec::TrainSpec& spec,
                 std::optional<exec::TrainSetup> setup = std::nullopt) {
  try {
    check(observe(spec, std::move(setup)));
  } catch (const rc::detail::CaseResult& failure) {
    FAIL() << failure.description;
  }
}

// The executor tests' tiny decoder (every dimension a multiple of 4, so blocks of 1, 2 and 4
// rows divide every tensor), 2 steps.
exec::TrainSpec fixed_spec(Strategy strategy, const std::string& mesh, std::int64_t block,
                           std::int64_t microbatches) {
  exec::TrainSpec s = exec::testing::tiny_train_spec();
  s.strategy = strategy;
  s.mesh = parse_device_mesh(mesh).value();
  s.block_size = block;
  s.microbatches = microbatches;
  s.steps = 2;
  return s;
}

TEST(RowBoundaryTest, HfsdpTwoByFourWithFourMicrobatchesAndBlocks) {
  exec::TrainSpec s = fixed_spec(Strategy::kHfsdp, "outer=2,inner=4", 4, 4);
  s.schedule = SchedulePolicy::make(gen::prefetch_of(2), gen::prefetch_of(2),
                                    /*max_inflight=*/0, /*unified_streams=*/false).value();
  s.recompute = RecomputePolicy::full_all_units();
  s.grad_scale = 2.0;
  check_fixed(s);
}

TEST(RowBoundaryTest, TensorAtomicZero3OnThreeRanksUnifiedStreams) {
  exec::TrainSpec s = fixed_spec(Strategy::kZero3, "dp=3", 1, 3);
  s.tensor_atomic = true;
  s.schedule = SchedulePolicy::make(gen::prefetch_of(0), gen::prefetch_of(1),
                                    /*max_inflight=*/0, /*unified_streams=*/true).value();
  s.optimizer = OptimizerKind::kSgdMomentum;
  s.grad_scale = 0.5;
  check_fixed(s);
}

TEST(RowBoundaryTest, UnpaddedZero2OnFiveRanksWithBlocksOfTwo) {
  exec::TrainSpec s = fixed_spec(Strategy::kZero2, "dp=5", 2, 2);
  s.shard_layout = ShardLayout::kUnpadded;
  check_fixed(s);
}

// ZeRO-3 on both DP axes ([S, S]): the gradients reduce in two reduce-scatters, the first in
// place in the partial buffer, so its observed input is the copy from before it.
TEST(RowBoundaryTest, ShardedOnTwoAxesReducesInTwoStepsInPlace) {
  for (const std::int64_t microbatches : {1, 2}) {
    exec::TrainSpec s = fixed_spec(Strategy::kHsdp, "outer=2,inner=2", 1, microbatches);
    check_fixed(s,
                exec::testing::setup_with_placements(s, exec::testing::shard_on_two_axes(s.mesh)));
  }
}

TEST(RowBoundaryTest, HsdpTwoByTwoZero1StylePartialGrads) {
  check_fixed(fixed_spec(Strategy::kHsdp, "outer=2,inner=2", 1, 2));
  check_fixed(fixed_spec(Strategy::kZero1, "dp=8", 2, 2));
}

}  // namespace
}  // namespace fsdp

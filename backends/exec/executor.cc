// SPDX-License-Identifier: Apache-2.0
// The executor binds the IR's transient buffer ids to their roles the way the schedule checks do
// (the latest unsharded-weights allocation of a group is the one its next gather fills, and so
// on), at issue time on the host; the tasks resolve ids to pointers when they run, after the
// events the IR placed between the allocation and the use. Every buffer is the device's memory
// (Arena blocks, ResidentBuffers): the executor only computes pointers into it and moves data
// through the Device's data ops, so the same code drives host memory and GPUs.
// docs/design/backends.md describes the data each op moves.
#include "backends/exec/executor.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "backends/exec/resident_buffer.h"
#include "core/base/strings.h"
#include "core/schedule/shard_plan.h"

namespace fsdp::exec {
namespace {

enum class LegKind : std::uint8_t { kUnshard, kSync, kReduce, kFinalize };

constexpr const char* kLegNames[] = {"unshard", "model_weight_sync", "grad_reduce",
                                     "grad_finalize"};

std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

// This rank's geometry of one entry of the collectives table.
struct CollectivePlan {
  std::int32_t group = -1;
  LegKind leg = LegKind::kUnshard;
  std::size_t step = 0;
  OpKind kind = OpKind::kAllGather;
  std::int32_t mesh_axis = 0;
  std::vector<std::int64_t> counts;  // AG: members' inputs; RS: members' outputs; AR: {numel}
  Range in;                          // this rank's input range in the group's layout
  Range out;                         // this rank's output range
};

// Where parameter p of a unit sits: its group, its tensor index in the group's layout and its
// offset in the group's concatenated autograd-gradient buffer.
struct ParamLoc {
  std::int32_t group = 0;
  std::int64_t tensor = 0;
  std::int64_t concat_offset = 0;
  std::int64_t numel = 0;
};

// A buffer as a task finds it: a transient id (resolved at run time) or a resident buffer, and
// the global layout element its first value holds.
struct Ref {
  std::int32_t buffer = -1;
  float* resident = nullptr;
  std::int64_t start = 0;
};

// What a collective reads and writes, for ExecutorOptions::on_collective.
struct Seen {
  Ref in;
  Ref out;
  Ref acc;
  bool has_input = true;
  bool has_acc = false;
  bool overwrote = false;
};

struct GroupState {
  const GroupShardPlan* plan = nullptr;
  Range opt_range;
  Range grad_range;
  Range param_range;
  ResidentBuffer main_weight;
  ResidentBuffer main_grad;  // resident main grad (empty when per step)
  ResidentBuffer opt_state;  // num_states x opt_range.numel
  // Issue-time bindings of transient ids; -1 when none.
  std::int32_t last_weight_alloc = -1;
  std::int32_t unshard_buf = -1;
  std::int32_t sync_buf = -1;
  std::int32_t unit_grad_buf = -1;
  std::int32_t partial_buf = -1;
  std::int32_t temp_buf = -1;
  std::int32_t accum_buf = -1;
  std::int32_t final_buf = -1;
};

class ExecutorImpl final : public Executor {
 public:
  ExecutorImpl(const Model& model, const FsdpConfig& config, const Schedule& schedule,
               std::int64_t rank, backend::HostDecoder* decoder, Device* device,
               CommunicatorSet* comms, ExecutorOptions options)
      : model_(model),
        config_(config),
        schedule_(schedule),
        program_(schedule.program_of_rank(rank)),
        rank_(rank),
        decoder_(decoder),
        device_(device),
        comms_(comms),
        options_(options) {}

  Status init(const backend::ParamValues& initial) {
    FSDP_TRY(plan_, make_shard_plan(model_, config_));
    FSDP_RETURN_IF_ERROR(check_dtypes());
    FSDP_RETURN_IF_ERROR(check_legs());
    FSDP_RETURN_IF_ERROR(plan_collectives());
    FSDP_RETURN_IF_ERROR(check_comms());
    FSDP_RETURN_IF_ERROR(locate_params(initial));
    scale_ = static_cast<float>(config_.grad_scale() /
                                static_cast<double>(config_.placements().dp_size()));
    // Resident buffers: main weights from the initial values, main grads, optimizer state.
    const std::int64_t states = config_.optimizer().num_states();
    groups_.resize(plan_.groups.size());
    MemoryResource& memory = device_->memory();
    std::vector<float> host;
    for (std::size_t gi = 0; gi < plan_.groups.size(); ++gi) {
      const GroupShardPlan& g = plan_.groups[gi];
      GroupState& st = groups_[gi];
      st.plan = &g;
      FSDP_TRY(st.opt_range, group_local_range(g, g.placements.optimizer(), rank_));
      FSDP_TRY(st.grad_range, group_local_range(g, g.placements.gradient(), rank_));
      FSDP_TRY(st.param_range, group_local_range(g, g.placements.parameter(), rank_));
      host.assign(idx(st.opt_range.numel), 0.0F);
      for (std::size_t t = 0; t < g.param_indices.size(); ++t) {
        const Range tr = g.layout.get_tensor_range(static_cast<std::int64_t>(t));
        const std::vector<float>& values =
            initial[idx(g.unit)][idx(g.param_indices[t])];
        const std::int64_t lo = std::max(tr.start, st.opt_range.start);
        const std::int64_t hi = std::min(tr.end(), st.opt_range.end());
        for (std::int64_t x = lo; x < hi; ++x) {
          host[idx(x - st.opt_range.start)] = values[idx(x - tr.start)];
        }
      }
      FSDP_TRY(st.main_weight, ResidentBuffer::make(memory, st.opt_range.numel));
      FSDP_RETURN_IF_ERROR(device_->upload(StreamKind::kCompute, st.main_weight.data(),
                                           host.data(), st.opt_range.numel));
      if (g.trainable && g.main_grad_resident) {
        FSDP_TRY(st.main_grad, ResidentBuffer::make(memory, st.grad_range.numel));
      }
      if (g.trainable) {
        FSDP_TRY(st.opt_state, ResidentBuffer::make(memory, states * st.opt_range.numel));
      }
    }
    FSDP_TRY(loss_buf_, ResidentBuffer::make(memory, 1));
    // Backward writes the gradients of frozen parameters somewhere: one scratch slot per
    // parameter of the unit with the most frozen elements.
    std::int64_t frozen = 0;
    for (std::size_t u = 0; u < params_.size(); ++u) {
      std::int64_t unit_frozen = 0;
      for (const ParamLoc& loc : params_[u]) {
        unit_frozen += plan_.groups[idx(loc.group)].trainable ? 0 : loc.numel;
      }
      frozen = std::max(frozen, unit_frozen);
    }
    FSDP_TRY(frozen_grads_, ResidentBuffer::make(memory, frozen));
    return ok_status();
  }

  Status run_step(std::int64_t step) override {
    if (failed_) {
      return Error(ErrorCode::kFailedPrecondition,
                   str_cat("rank ", rank_, ": executor already failed"));
    }
    step_ = step;
    device_->reset_events(program_.num_events);
    buffers_.assign(idx(program_.num_buffers), nullptr);
    for (GroupState& st : groups_) {
      st.last_weight_alloc = st.unshard_buf = st.sync_buf = st.unit_grad_buf = -1;
      st.partial_buf = st.temp_buf = st.accum_buf = st.final_buf = -1;
    }
    device_->submit(StreamKind::kCompute, TaskTag{step, -1}, [this, step]() -> Status {
      decoder_->begin_step(step);
      return ok_status();
    });
    for (std::size_t i = 0; i < program_.ops.size(); ++i) {
      Status s = issue(static_cast<std::int32_t>(i));
      if (!s.ok()) {
        device_->abort(s.error());
        break;
      }
    }
    device_->submit(StreamKind::kCompute, TaskTag{step, -1}, [this]() -> Status {
      constexpr StreamKind kStream = StreamKind::kCompute;
      float loss = static_cast<float>(decoder_->step_loss());
      FSDP_RETURN_IF_ERROR(device_->upload(kStream, loss_buf_.data(), &loss, 1));
      for (std::int64_t a = 0; a < comms_->num_axes(); ++a) {
        FSDP_RETURN_IF_ERROR(
            comms_->axis(a).all_reduce(kStream, DType::kFp32, loss_buf_.data(), 1));
      }
      FSDP_RETURN_IF_ERROR(device_->download(kStream, &loss, loss_buf_.data(), 1));
      loss_ = static_cast<double>(loss) / static_cast<double>(config_.mesh().size());
      return ok_status();
    });
    return finish(str_cat("step ", step));  // "rank 0 step 3: <first error>"
  }

  double last_loss() const override { return loss_; }

  Expected<backend::ParamValues> gather_parameters() override {
    backend::ParamValues out(model_.units().size());
    for (std::size_t u = 0; u < model_.units().size(); ++u) {
      out[u].resize(model_.units()[u].params().size());
    }
    std::vector<ResidentBuffer> full(groups_.size());
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      const GroupShardPlan& g = plan_.groups[gi];
      GroupState& st = groups_[gi];
      FSDP_TRY(full[gi], ResidentBuffer::make(device_->memory(), g.layout.size()));
      float* base = full[gi].data();
      device_->submit(StreamKind::kCompute, TaskTag{}, [this, base, &st]() -> Status {
        return device_->copy(StreamKind::kCompute, base + st.opt_range.start,
                             st.main_weight.data(), st.opt_range.numel);
      });
      const std::vector<Placement> replicated = all_replicate(g.placements.num_dp_axes());
      RedistributeLeg leg;
      FSDP_TRY(std::vector<RedistributeStep> steps,
               plan_redistribute(g.placements.optimizer(), replicated));
      for (const RedistributeStep& s : steps) {
        if (s.kind == RedistributeKind::kAllGather) {
          leg.steps.push_back(s);
        }
      }
      std::vector<Placement> cur = g.placements.optimizer();
      for (const RedistributeStep& s : leg.steps) {
        std::vector<Placement> after = cur;
        after[idx(s.axis)] = replicated[idx(s.axis)];
        const auto mesh_axis =
            static_cast<std::int32_t>(g.placements.dp_axes()[idx(s.axis)]);
        FSDP_TRY(CollectivePlan cp, plan_gather(g, cur, after, mesh_axis));
        device_->submit(StreamKind::kCompute, TaskTag{}, [this, cp, base]() -> Status {
          return comms_->axis(cp.mesh_axis)
              .all_gather_v(StreamKind::kCompute, DType::kFp32, base + cp.in.start, cp.counts,
                            base + cp.out.start);
        });
        cur = after;
      }
    }
    FSDP_RETURN_IF_ERROR(finish("gathering the parameters"));
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      const GroupShardPlan& g = plan_.groups[gi];
      for (std::size_t t = 0; t < g.param_indices.size(); ++t) {
        const Range tr = g.layout.get_tensor_range(static_cast<std::int64_t>(t));
        std::vector<float>& values = out[idx(g.unit)][idx(g.param_indices[t])];
        values.resize(idx(tr.numel));
        FSDP_RETURN_IF_ERROR(device_->download(StreamKind::kCompute, values.data(),
                                               full[gi].data() + tr.start, tr.numel));
      }
    }
    return out;
  }

  std::vector<OpTiming> op_timeline() const override {
    std::vector<OpTiming> out;
    for (const TaskTiming& t : device_->timeline()) {
      if (t.tag.op < 0) {
        continue;
      }
      const Op& op = program_.ops[idx(t.tag.op)];
      out.push_back(OpTiming{t.tag.step, t.tag.op, t.stream, op.kind,
                             is_collective(op.kind) ? op.bytes : 0, t.start_ns, t.end_ns});
    }
    return out;
  }

 private:
  // --- validation and geometry (make) -----------------------------------------------------------
  Status check_dtypes() const {
    for (const GroupShardPlan& g : plan_.groups) {
      const DType dtypes[] = {g.param_dtype, g.compute_dtype, g.grad_dtype, g.main_grad_dtype,
                              g.main_dtype};
      const char* names[] = {"parameters", "compute", "grads", "main grads", "main params"};
      for (std::size_t i = 0; i < 5; ++i) {
        if (dtypes[i] != DType::kFp32) {
          return Error(ErrorCode::kFailedPrecondition,
                       str_cat("real training needs fp32 parameters, compute, grads, main grads "
                               "and main params; unit '",
                               model_.units()[idx(g.unit)].name(), "' group ", g.group, " has ",
                               names[i], " in ", to_string(dtypes[i])));
        }
      }
    }
    return ok_status();
  }

  Status check_legs() const {
    for (const GroupShardPlan& g : plan_.groups) {
      const std::string where =
          str_cat("unit '", model_.units()[idx(g.unit)].name(), "' group ", g.group);
      for (const RedistributeLeg* leg : {&g.unshard, &g.sync}) {
        for (const RedistributeStep& s : leg->steps) {
          if (s.kind != RedistributeKind::kAllGather) {
            return Error(ErrorCode::kFailedPrecondition,
                         str_cat(where, ": the executor gathers weights with all-gathers only; "
                                        "got a ", to_string(s.kind)));
          }
        }
      }
      if (g.reduce.steps.size() > 1 ||
          (g.reduce.steps.size() == 1 &&
           g.reduce.steps[0].kind != RedistributeKind::kReduceScatter)) {
        return Error(ErrorCode::kFailedPrecondition,
                     str_cat(where, ": the executor reduces gradients with at most one "
                                    "reduce-scatter; got ",
                             g.reduce.steps.size(), " steps"));
      }
      if (g.finalize.steps.size() > 1) {
        return Error(ErrorCode::kFailedPrecondition,
                     str_cat(where, ": the executor finalises gradients in at most one step; got ",
                             g.finalize.steps.size()));
      }
    }
    return ok_status();
  }

  Expected<std::vector<std::int64_t>> member_ranks(std::int32_t mesh_axis) const {
    FSDP_TRY(MeshCoordinate coord, config_.mesh().coordinate(rank_));
    std::vector<std::int64_t> ranks;
    for (std::int64_t k = 0; k < config_.mesh().axis_size(mesh_axis); ++k) {
      coord.local_ranks[idx(mesh_axis)] = k;
      FSDP_TRY(std::int64_t r, config_.mesh().rank_of(coord.local_ranks));
      ranks.push_back(r);
    }
    return ranks;
  }

  // An all-gather from `before` to `after` on `mesh_axis`: the members' input ranges must tile
  // this rank's output range in member order.
  Expected<CollectivePlan> plan_gather(const GroupShardPlan& g,
                                       const std::vector<Placement>& before,
                                       const std::vector<Placement>& after,
                                       std::int32_t mesh_axis) const {
    CollectivePlan cp;
    cp.kind = OpKind::kAllGather;
    cp.mesh_axis = mesh_axis;
    FSDP_TRY(cp.in, group_local_range(g, before, rank_));
    FSDP_TRY(cp.out, group_local_range(g, after, rank_));
    FSDP_TRY(std::vector<std::int64_t> members, member_ranks(mesh_axis));
    FSDP_RETURN_IF_ERROR(tile(g, before, members, cp.out, &cp.counts));
    return cp;
  }

  // counts[k] = numel of member k's range under `ps`; the ranges must tile `whole` in order.
  Status tile(const GroupShardPlan& g, const std::vector<Placement>& ps,
              const std::vector<std::int64_t>& members, Range whole,
              std::vector<std::int64_t>* counts) const {
    std::int64_t next = whole.start;
    for (std::int64_t m : members) {
      FSDP_TRY(Range r, group_local_range(g, ps, m));
      if (r.start != next) {
        return Error(ErrorCode::kFailedPrecondition,
                     str_cat("unit '", model_.units()[idx(g.unit)].name(), "' group ", g.group,
                             ": rank ", m, "'s range starts at ", r.start, "; expected ", next,
                             " (ranges must tile the collective's buffer in axis order)"));
      }
      counts->push_back(r.numel);
      next = r.end();
    }
    if (next != whole.end()) {
      return Error(ErrorCode::kFailedPrecondition,
                   str_cat("unit '", model_.units()[idx(g.unit)].name(), "' group ", g.group,
                           ": members' ranges end at ", next, "; expected ", whole.end()));
    }
    return ok_status();
  }

  // Rebuilds the collectives table in the builder's order (groups, then the legs unshard, sync,
  // reduce, finalise, then steps) and checks it against the schedule's.
  Status plan_collectives() {
    const std::vector<CollectiveInfo>& table = schedule_.collectives();
    for (std::size_t gi = 0; gi < plan_.groups.size(); ++gi) {
      const GroupShardPlan& g = plan_.groups[gi];
      const std::vector<Placement> full = all_replicate(g.placements.num_dp_axes());
      const std::vector<Placement> partial =
          all_partial(g.placements.num_dp_axes(), ReduceOp::kAvg);
      const std::pair<const RedistributeLeg*, const std::vector<Placement>*> legs[] = {
          {&g.unshard, &full},
          {&g.sync, &g.placements.parameter()},
          {&g.reduce, &g.placements.gradient()},
          {&g.finalize, &g.placements.optimizer()}};
      for (std::size_t l = 0; l < 4; ++l) {
        const RedistributeLeg& leg = *legs[l].first;
        for (std::size_t s = 0; s < leg.steps.size(); ++s) {
          const std::vector<Placement> after = state_after_step(leg, s, *legs[l].second);
          const auto mesh_axis =
              static_cast<std::int32_t>(g.placements.dp_axes()[idx(leg.steps[s].axis)]);
          CollectivePlan cp;
          if (leg.steps[s].kind == RedistributeKind::kAllGather) {
            FSDP_TRY(cp, plan_gather(g, leg.states[s], after, mesh_axis));
          } else {
            cp.mesh_axis = mesh_axis;
            FSDP_TRY(cp.in, group_local_range(g, leg.states[s], rank_));
            FSDP_TRY(cp.out, group_local_range(g, after, rank_));
            if (leg.steps[s].kind == RedistributeKind::kReduceScatter) {
              cp.kind = OpKind::kReduceScatter;
              FSDP_TRY(std::vector<std::int64_t> members, member_ranks(mesh_axis));
              FSDP_RETURN_IF_ERROR(tile(g, after, members, cp.in, &cp.counts));
            } else {
              cp.kind = OpKind::kAllReduce;
              cp.counts = {cp.in.numel};
            }
          }
          cp.group = static_cast<std::int32_t>(gi);
          cp.leg = static_cast<LegKind>(l);
          cp.step = s;
          const std::size_t n = collectives_.size();
          if (n >= table.size() || table[n].kind != cp.kind || table[n].axis != mesh_axis ||
              table[n].unit != g.unit || table[n].group != g.group ||
              table[n].what != kLegNames[l]) {
            return Error(ErrorCode::kInternal,
                         str_cat("collective ", n, " of the schedule does not match the shard "
                                 "plan (expected ", kLegNames[l], " of unit '",
                                 model_.units()[idx(g.unit)].name(), "' group ", g.group, ")"));
          }
          collectives_.push_back(std::move(cp));
        }
      }
    }
    if (collectives_.size() != table.size()) {
      return Error(ErrorCode::kInternal,
                   str_cat("the schedule has ", table.size(),
                           " collectives; the shard plan gives ", collectives_.size()));
    }
    return ok_status();
  }

  Status check_comms() const {
    const DeviceMesh& mesh = config_.mesh();
    if (comms_->num_axes() != mesh.ndim()) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("communicators cover ", comms_->num_axes(), " mesh axes; the mesh ",
                           to_string(mesh), " has ", mesh.ndim()));
    }
    FSDP_TRY(MeshCoordinate coord, mesh.coordinate(rank_));
    for (std::int64_t a = 0; a < mesh.ndim(); ++a) {
      Communicator& c = comms_->axis(a);
      if (c.size() != mesh.axis_size(a) || c.rank() != coord.local_ranks[idx(a)]) {
        return Error(ErrorCode::kInvalidArgument,
                     str_cat("communicator of mesh axis '", mesh.axis_name(a), "' is rank ",
                             c.rank(), " of ", c.size(), "; expected rank ",
                             coord.local_ranks[idx(a)], " of ", mesh.axis_size(a)));
      }
    }
    return ok_status();
  }

  Status locate_params(const backend::ParamValues& initial) {
    if (initial.size() != model_.units().size()) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("initial values cover ", initial.size(), " units; expected ",
                           model_.units().size()));
    }
    params_.resize(model_.units().size());
    for (std::size_t u = 0; u < model_.units().size(); ++u) {
      const Unit& unit = model_.units()[u];
      if (initial[u].size() != unit.params().size()) {
        return Error(ErrorCode::kInvalidArgument,
                     str_cat("initial values of unit '", unit.name(), "' cover ",
                             initial[u].size(), " parameters; expected ", unit.params().size()));
      }
      params_[u].resize(unit.params().size());
      for (std::int32_t gi : plan_.unit_groups[u]) {
        const GroupShardPlan& g = plan_.groups[idx(gi)];
        std::int64_t offset = 0;
        for (std::size_t t = 0; t < g.param_indices.size(); ++t) {
          const std::size_t p = idx(g.param_indices[t]);
          const std::int64_t numel = unit.params()[p].shape().numel();
          if (static_cast<std::int64_t>(initial[u][p].size()) != numel) {
            return Error(ErrorCode::kInvalidArgument,
                         str_cat("initial value of parameter '", unit.params()[p].name(),
                                 "' has ", initial[u][p].size(), " elements; expected ", numel));
          }
          params_[u][p] = ParamLoc{gi, static_cast<std::int64_t>(t), offset, numel};
          offset += numel;
        }
      }
    }
    return ok_status();
  }

  // --- issue ----------------------------------------------------------------------------------
  float* resolve(const Ref& r) const {
    return r.buffer >= 0 ? static_cast<float*>(buffers_[idx(r.buffer)]) : r.resident;
  }

  // The weights compute reads for a group: the unsharded buffer, else the synced model weight
  // (ZeRO-1/2), else the main weight (no-shard).
  Expected<Ref> weight_ref(std::size_t gi) {
    GroupState& st = groups_[gi];
    const GroupShardPlan& g = *st.plan;
    if (!g.param_replicated) {
      if (st.unshard_buf < 0) {
        return Error(ErrorCode::kFailedPrecondition, "compute before its unshard all-gather");
      }
      return Ref{st.unshard_buf, nullptr, 0};
    }
    if (g.needs_weight_sync) {
      if (st.sync_buf < 0) {
        return Error(ErrorCode::kFailedPrecondition, "compute before its model-weight sync");
      }
      return Ref{st.sync_buf, nullptr, st.param_range.start};
    }
    return Ref{-1, st.main_weight.data(), st.opt_range.start};
  }

  Ref accumulator_ref(std::size_t gi) {
    GroupState& st = groups_[gi];
    if (st.plan->main_grad_resident) {
      return Ref{-1, st.main_grad.data(), st.grad_range.start};
    }
    return Ref{st.accum_buf, nullptr, st.grad_range.start};
  }

  void submit(const Op& op, std::int32_t i, Task task) {
    device_->submit(op.stream, TaskTag{step_, i}, std::move(task));
  }

  Status issue(std::int32_t i) {
    const Op& op = program_.ops[idx(i)];
    const std::string where = str_cat("op ", i, " (", to_string(op.kind), ")");
    Status s = issue_op(op, i);
    if (!s.ok()) {
      return s.error().with_context(str_cat("rank ", rank_, " step ", step_, " ", where));
    }
    return s;
  }

  Status issue_op(const Op& op, std::int32_t i) {
    switch (op.kind) {
      case OpKind::kRecord:
        device_->record(op.stream, op.event, TaskTag{step_, i});
        return ok_status();
      case OpKind::kWait:
        device_->wait(op.stream, op.event, TaskTag{step_, i});
        return ok_status();
      case OpKind::kAlloc:
        return issue_alloc(op, i);
      case OpKind::kFree:
        return issue_free(op, i);
      case OpKind::kAllGather:
      case OpKind::kReduceScatter:
      case OpKind::kAllReduce:
        return issue_collective(op, i);
      case OpKind::kForward:
      case OpKind::kRecompute:
      case OpKind::kBackward:
        return issue_unit_compute(op, i);
      case OpKind::kGradCopy:
        return issue_grad_copy(op, i);
      case OpKind::kOptimizerStep:
        return issue_optimizer_step(op, i);
      case OpKind::kCast:
        // fp32 model weights alias the main weights: make() rejects anything that casts.
        return Error(ErrorCode::kFailedPrecondition, "casts need non-fp32 model weights");
    }
    return Error(ErrorCode::kInternal, "unknown op kind");
  }

  Expected<std::size_t> group_index(const Op& op) const {
    if (op.unit < 0 || idx(op.unit) >= plan_.unit_groups.size() || op.group < 0 ||
        idx(op.group) >= plan_.unit_groups[idx(op.unit)].size()) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("names unit ", op.unit, " group ", op.group, ", not in the plan"));
    }
    return idx(plan_.unit_groups[idx(op.unit)][idx(op.group)]);
  }

  Status issue_alloc(const Op& op, std::int32_t i) {
    if (op.group >= 0) {
      FSDP_TRY(std::size_t gi, group_index(op));
      GroupState& st = groups_[gi];
      switch (op.buffer_class) {
        case BufferClass::kUnshardedWeights:
          st.last_weight_alloc = op.buffer;
          break;
        case BufferClass::kUnitGrads:
          st.unit_grad_buf = op.buffer;
          break;
        case BufferClass::kPartialGrads:
          (st.partial_buf < 0 ? st.partial_buf : st.temp_buf) = op.buffer;
          break;
        case BufferClass::kMainGrads:
          if (op.phase == Phase::kStep) {
            return Error(ErrorCode::kFailedPrecondition,
                         "an optimizer cast copy needs a main-grad dtype other than fp32");
          }
          if (!st.plan->main_grad_resident) {
            (st.accum_buf < 0 ? st.accum_buf : st.final_buf) = op.buffer;
          }
          // Resident main grads: the all-reduce copy; the executor reduces in place.
          break;
        default:
          break;
      }
    }
    const std::int32_t buffer = op.buffer;
    const std::int64_t bytes = op.bytes;
    const BufferClass cls = op.buffer_class;
    const std::int64_t step = step_;
    submit(op, i, [this, buffer, bytes, cls, step, i]() -> Status {
      FSDP_TRY(void* p, device_->arena().allocate(bytes, cls, step, i, buffer));
      buffers_[idx(buffer)] = p;
      return ok_status();
    });
    return ok_status();
  }

  Status issue_free(const Op& op, std::int32_t i) {
    const std::int32_t buffer = op.buffer;
    Task before;  // work that must happen on the stream before the release
    if (op.group >= 0) {
      FSDP_TRY(std::size_t gi, group_index(op));
      GroupState& st = groups_[gi];
      for (std::int32_t* b : {&st.unshard_buf, &st.sync_buf, &st.unit_grad_buf, &st.temp_buf,
                              &st.accum_buf, &st.final_buf, &st.last_weight_alloc}) {
        if (*b == buffer) {
          *b = -1;
        }
      }
      if (st.partial_buf == buffer) {
        st.partial_buf = -1;
        if (st.plan->reduce.steps.empty()) {
          // ZeRO-1 / no-shard: the reduction "stays Partial" (§4.6c): the partial buffer is
          // this microbatch's contribution, accumulated here before it is released.
          FSDP_RETURN_IF_ERROR(check_accumulator(gi));
          const Ref acc = accumulator_ref(gi);
          const bool overwrite = op.microbatch == 0;
          const Range gr = st.grad_range;
          const StreamKind stream = op.stream;
          before = [this, buffer, acc, overwrite, gr, stream]() -> Status {
            const float* src = static_cast<const float*>(buffers_[idx(buffer)]) + gr.start;
            return device_->accumulate(stream, resolve(acc), src, gr.numel, scale_, overwrite);
          };
        }
      }
    }
    const std::int64_t step = step_;
    const StreamKind stream = op.stream;
    submit(op, i, [this, buffer, before = std::move(before), step, i, stream]() -> Status {
      if (before) {
        FSDP_RETURN_IF_ERROR(before());
      }
      device_->arena().release(buffers_[idx(buffer)], device_->fence(stream), step, i, buffer);
      buffers_[idx(buffer)] = nullptr;
      return ok_status();
    });
    return ok_status();
  }

  Status check_accumulator(std::size_t gi) const {
    const GroupState& st = groups_[gi];
    if (!st.plan->main_grad_resident && st.accum_buf < 0) {
      return Error(ErrorCode::kFailedPrecondition,
                   "reduces before its per-step main grad is allocated");
    }
    return ok_status();
  }

  Status issue_collective(const Op& op, std::int32_t i) {
    if (op.collective < 0 || idx(op.collective) >= collectives_.size()) {
      return Error(ErrorCode::kOutOfRange, str_cat("names collective ", op.collective));
    }
    const CollectivePlan& cp = collectives_[idx(op.collective)];
    const std::int64_t mine =
        cp.kind == OpKind::kAllReduce ? cp.counts[0] : cp.counts[idx(comms_->axis(cp.mesh_axis).rank())];
    if (cp.kind != op.kind || mine != op.elements) {
      return Error(ErrorCode::kFailedPrecondition,
                   str_cat("moves ", op.elements, " elements; the shard plan gives ", mine));
    }
    const std::size_t gi = idx(cp.group);
    GroupState& st = groups_[gi];
    const StreamKind stream = op.stream;
    Communicator* comm = &comms_->axis(cp.mesh_axis);
    Task task;
    Seen seen;
    switch (cp.leg) {
      case LegKind::kUnshard:
      case LegKind::kSync: {
        Ref src;
        Ref dst;
        if (cp.leg == LegKind::kUnshard) {
          if (cp.step == 0) {
            st.unshard_buf = st.last_weight_alloc;
          }
          dst = Ref{st.unshard_buf, nullptr, 0};
          if (cp.step > 0) {
            src = dst;
          } else if (st.plan->needs_weight_sync) {
            src = Ref{st.sync_buf, nullptr, st.param_range.start};
          } else {
            src = Ref{-1, st.main_weight.data(), st.opt_range.start};
          }
        } else {
          if (cp.step == 0) {
            st.sync_buf = st.last_weight_alloc;
          }
          dst = Ref{st.sync_buf, nullptr, st.param_range.start};
          src = cp.step > 0 ? dst : Ref{-1, st.main_weight.data(), st.opt_range.start};
        }
        // (A resident source may be empty: a TensorAtomic rank can own no tensor of a group.)
        if (dst.buffer < 0 || (cp.step == 0 && cp.leg == LegKind::kUnshard &&
                               st.plan->needs_weight_sync && src.buffer < 0)) {
          return Error(ErrorCode::kFailedPrecondition, "gathers into no allocated buffer");
        }
        seen = Seen{src, dst, {}, true, false, false};
        task = [this, comm, stream, src, dst, &cp]() -> Status {
          return comm->all_gather_v(stream, DType::kFp32,
                                    resolve(src) + (cp.in.start - src.start), cp.counts,
                                    resolve(dst) + (cp.out.start - dst.start));
        };
        break;
      }
      case LegKind::kReduce: {
        if (st.partial_buf < 0) {
          return Error(ErrorCode::kFailedPrecondition, "reduces no partial-grad buffer");
        }
        FSDP_RETURN_IF_ERROR(check_accumulator(gi));
        const Ref src{st.partial_buf, nullptr, 0};
        const Ref acc = accumulator_ref(gi);
        const bool via_temp = st.temp_buf >= 0;
        if (!via_temp && op.microbatch > 0) {
          return Error(ErrorCode::kFailedPrecondition,
                       "reduces microbatch > 0 with no temporary: it would overwrite main_grad");
        }
        const Ref dst = via_temp ? Ref{st.temp_buf, nullptr, cp.out.start} : acc;
        seen = Seen{src, dst, acc, true, true, !via_temp};
        task = [this, comm, stream, src, dst, acc, via_temp, &cp]() -> Status {
          float* out = resolve(dst) + (cp.out.start - dst.start);
          FSDP_RETURN_IF_ERROR(comm->reduce_scatter_v(stream, DType::kFp32,
                                                      resolve(src) + cp.in.start, cp.counts, out));
          float* a = resolve(acc) + (cp.out.start - acc.start);
          return device_->accumulate(stream, a, out, cp.out.numel, scale_,
                                     /*overwrite=*/!via_temp);
        };
        break;
      }
      case LegKind::kFinalize: {
        FSDP_RETURN_IF_ERROR(check_accumulator(gi));
        const Ref acc = accumulator_ref(gi);
        seen = Seen{acc, acc, {}, cp.kind != OpKind::kAllReduce, false, false};
        if (cp.kind == OpKind::kAllReduce) {
          task = [comm, stream, acc, this, &cp]() -> Status {
            return comm->all_reduce(stream, DType::kFp32,
                                    resolve(acc) + (cp.in.start - acc.start), cp.in.numel);
          };
        } else {
          if (st.final_buf < 0) {
            return Error(ErrorCode::kFailedPrecondition,
                         "finalises into no allocated main-grad buffer");
          }
          const Ref dst{st.final_buf, nullptr, st.opt_range.start};
          seen.out = dst;
          task = [this, comm, stream, acc, dst, &cp]() -> Status {
            return comm->reduce_scatter_v(stream, DType::kFp32,
                                          resolve(acc) + (cp.in.start - acc.start), cp.counts,
                                          resolve(dst) + (cp.out.start - dst.start));
          };
        }
        break;
      }
    }
    submit(op, i, [this, task = std::move(task), i, seen, &cp, op_collective = op.collective,
                   axis_rank = comm->rank()]() -> Status {
      Status s = task();
      if (!s.ok()) {
        Error e = s.error().with_context(
            str_cat("rank ", rank_, " step ", step_, " op ", i, " (",
                    to_string(program_.ops[idx(i)].kind), ")"));
        comms_->abort(e);
        return e;
      }
      if (options_.on_collective) {
        options_.on_collective(observation(cp, seen, i, op_collective, axis_rank));
      }
      return s;
    });
    return ok_status();
  }

  // Views of a completed collective's buffers (Ref semantics: global element x of ref r is at
  // resolve(r) + (x - r.start)).
  CollectiveObservation observation(const CollectivePlan& cp, const Seen& seen, std::int32_t i,
                                    std::int32_t collective, std::int64_t axis_rank) const {
    const auto view = [this](const Ref& r, Range range) {
      return std::span<const float>(resolve(r) + (range.start - r.start), idx(range.numel));
    };
    // An all-reduce works in place on its input range.
    const Range out = cp.kind == OpKind::kAllReduce ? cp.in : cp.out;
    CollectiveObservation o{rank_, step_, i, collective, cp.kind, axis_rank, cp.in, out,
                            {}, view(seen.out, out), {}, seen.overwrote};
    if (seen.has_input) {
      o.input = view(seen.in, cp.in);
    }
    if (seen.has_acc) {
      o.accumulator = view(seen.acc, cp.out);
    }
    return o;
  }

  Status issue_unit_compute(const Op& op, std::int32_t i) {
    const auto u = idx(op.unit);
    if (op.unit < 0 || u >= params_.size()) {
      return Error(ErrorCode::kOutOfRange, str_cat("names unit ", op.unit));
    }
    // Per parameter: the weight ref and its offset in it; for backward, the gradient buffer.
    struct Slot {
      Ref weight;
      std::int64_t weight_offset = 0;
      std::int32_t grad_buffer = -1;
      std::int64_t grad_offset = 0;
    };
    std::vector<Slot> slots;
    for (const ParamLoc& loc : params_[u]) {
      FSDP_TRY(Ref w, weight_ref(idx(loc.group)));
      const GroupShardPlan& g = *groups_[idx(loc.group)].plan;
      Slot s{w, g.layout.tensor_to_offset()[idx(loc.tensor)] - w.start, -1, loc.concat_offset};
      if (op.kind == OpKind::kBackward && g.trainable) {
        s.grad_buffer = groups_[idx(loc.group)].unit_grad_buf;
        if (s.grad_buffer < 0) {
          return Error(ErrorCode::kFailedPrecondition, "backward with no autograd-grads buffer");
        }
      }
      slots.push_back(s);
    }
    const OpKind kind = op.kind;
    const auto unit = static_cast<std::int32_t>(op.unit);
    const std::int32_t mb = op.microbatch;
    submit(op, i, [this, slots = std::move(slots), kind, unit, mb]() -> Status {
      std::vector<const float*> w;
      std::vector<float*> grads;
      for (const Slot& s : slots) {
        w.push_back(resolve(s.weight) + s.weight_offset);
      }
      if (kind == OpKind::kForward) {
        decoder_->forward(unit, mb, w);
      } else if (kind == OpKind::kRecompute) {
        decoder_->recompute(unit, mb, w);
      } else {
        float* frozen = frozen_grads_.data();  // gradients nobody reads
        for (std::size_t p = 0; p < slots.size(); ++p) {
          if (slots[p].grad_buffer >= 0) {
            grads.push_back(static_cast<float*>(buffers_[idx(slots[p].grad_buffer)]) +
                            slots[p].grad_offset);
          } else {
            grads.push_back(frozen);
            frozen += params_[idx(unit)][p].numel;
          }
        }
        decoder_->backward(unit, mb, w, grads);
      }
      return decoder_->status();
    });
    return ok_status();
  }

  Status issue_grad_copy(const Op& op, std::int32_t i) {
    FSDP_TRY(std::size_t gi, group_index(op));
    const GroupState& st = groups_[gi];
    if (st.unit_grad_buf < 0 || st.partial_buf < 0) {
      return Error(ErrorCode::kFailedPrecondition,
                   "copies gradients with no autograd-grads or partial-grads buffer");
    }
    const std::int32_t from = st.unit_grad_buf;
    const std::int32_t to = st.partial_buf;
    const GroupShardPlan* g = st.plan;
    const StreamKind stream = op.stream;
    submit(op, i, [this, from, to, g, stream]() -> Status {
      const auto* src = static_cast<const float*>(buffers_[idx(from)]);
      auto* dst = static_cast<float*>(buffers_[idx(to)]);
      std::int64_t offset = 0;
      for (std::size_t t = 0; t < g->param_indices.size(); ++t) {
        const Range tr = g->layout.get_tensor_range(static_cast<std::int64_t>(t));
        FSDP_RETURN_IF_ERROR(device_->copy(stream, dst + tr.start, src + offset, tr.numel));
        offset += tr.numel;
      }
      return ok_status();
    });
    return ok_status();
  }

  Status issue_optimizer_step(const Op& op, std::int32_t i) {
    FSDP_TRY(std::size_t gi, group_index(op));
    GroupState& st = groups_[gi];
    Ref grad;
    if (st.plan->main_grad_resident) {
      grad = Ref{-1, st.main_grad.data(), st.grad_range.start};
    } else {
      if (st.final_buf < 0) {
        return Error(ErrorCode::kFailedPrecondition, "steps with no finalised main grad");
      }
      grad = Ref{st.final_buf, nullptr, st.opt_range.start};
    }
    if (st.grad_range.numel != st.opt_range.numel && st.plan->main_grad_resident) {
      return Error(ErrorCode::kFailedPrecondition,
                   str_cat("main grad holds ", st.grad_range.numel,
                           " elements; the optimizer shard ", st.opt_range.numel));
    }
    const std::int64_t step = step_ + 1;
    GroupState* s = &st;
    const StreamKind stream = op.stream;
    submit(op, i, [this, s, grad, step, stream]() -> Status {
      return device_->optimizer_update(stream, options_.optimizer, options_.hyper, step,
                                       s->main_weight.data(), resolve(grad), s->opt_state.data(),
                                       s->opt_range.numel);
    });
    return ok_status();
  }

  Status finish(const std::string& what) {
    Status s = device_->synchronize();
    if (!s.ok()) {
      failed_ = true;
      comms_->abort(s.error());
      return s.error().with_context(str_cat("rank ", rank_, " ", what));
    }
    return s;
  }

  const Model& model_;
  const FsdpConfig& config_;
  const Schedule& schedule_;
  const RankProgram& program_;
  std::int64_t rank_;
  backend::HostDecoder* decoder_;
  Device* device_;
  CommunicatorSet* comms_;
  ExecutorOptions options_;
  ShardPlan plan_;
  std::vector<GroupState> groups_;
  std::vector<CollectivePlan> collectives_;
  std::vector<std::vector<ParamLoc>> params_;  // [unit][param]
  std::vector<void*> buffers_;
  ResidentBuffer loss_buf_;      // the loss all-reduce's device slot
  ResidentBuffer frozen_grads_;  // backward's output for parameters that are not trained
  float scale_ = 1.0F;
  std::int64_t step_ = 0;
  double loss_ = 0.0;
  bool failed_ = false;
};

}  // namespace

Expected<std::unique_ptr<Executor>> Executor::make(const Model& model, const FsdpConfig& config,
                                                   const Schedule& schedule, std::int64_t rank,
                                                   const backend::ParamValues& initial,
                                                   backend::HostDecoder* decoder, Device* device,
                                                   CommunicatorSet* comms,
                                                   ExecutorOptions options) {
  if (decoder == nullptr || device == nullptr || comms == nullptr) {
    return Error(ErrorCode::kInvalidArgument, "executor needs a decoder, a device and communicators");
  }
  if (rank < 0 || rank >= config.mesh().size()) {
    return Error(ErrorCode::kOutOfRange, str_cat("rank ", rank, " is outside the mesh ",
                                                 to_string(config.mesh()), " of ",
                                                 config.mesh().size(), " ranks"));
  }
  if (!(schedule.mesh() == config.mesh())) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("schedule mesh ", to_string(schedule.mesh()), " differs from the config's ",
                         to_string(config.mesh())));
  }
  auto impl = std::make_unique<ExecutorImpl>(model, config, schedule, rank, decoder, device, comms,
                                             options);
  FSDP_RETURN_IF_ERROR(impl->init(initial));
  return std::unique_ptr<Executor>(std::move(impl));
}

}  // namespace fsdp::exec

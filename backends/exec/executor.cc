// SPDX-License-Identifier: Apache-2.0
// The executor binds nothing by itself: every buffer an op reads or writes is one of the op's
// operands, and every range it moves comes from the schedule's geometry. At issue time on the
// host it turns operands into Refs (a transient id or a resident buffer, plus the layout element
// the buffer's first value holds on this rank); the tasks resolve transient ids to pointers when
// they run, after the events the IR placed between the allocation and the use. Every buffer is
// the device's memory (Arena blocks, ResidentBuffers): the executor only computes pointers into
// it and moves data through the Device's data ops, so the same code drives host memory and GPUs.
// docs/design/backends.md describes the data each op moves.
#include "backends/exec/executor.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include "backends/exec/resident_buffer.h"
#include "backends/model/split_comm.h"
#include "core/base/check.h"
#include "core/base/strings.h"
#include "core/mesh/placements.h"
#include "core/schedule/group_geometry.h"

namespace fsdp::exec {
namespace {

std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

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

// What a collective reads and writes, for ExecutorOptions::on_collective. An in-place
// reduce-scatter overwrites part of its input: `input_copy` then holds the input range as it was
// before the collective (taken only when an observer is set).
struct Seen {
  Ref in;
  Ref out;
  Ref acc;
  bool has_input = true;
  bool has_acc = false;
  bool overwrote = false;
  std::shared_ptr<std::vector<float>> input_copy;
};

// This rank's ranges of one group under each Extent (kNone unused).
using ExtentRanges = std::array<Range, 5>;

// One collective the decoder issued inside a unit's compute (backend::SplitComm).
struct IssuedCollective {
  OpKind kind = OpKind::kAllReduce;
  std::string site;
  std::int64_t elements = 0;
  // The device clock around the call: its time where calls complete before returning (the CPU
  // device; a CUDA communicator only enqueues).
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

// The decoder's tensor-parallel collectives over the tp axis's communicator on the compute
// stream (the decoder calls them from inside a compute-stream task). Each call is logged; the
// executor matches the log against the schedule's activation collective ops (check_issued).
class AxisSplitComm final : public backend::SplitComm {
 public:
  AxisSplitComm(Communicator* comm, const Device* device) : comm_(comm), device_(device) {}
  std::int64_t rank() const override { return comm_->rank(); }
  std::int64_t size() const override { return comm_->size(); }
  Status all_reduce(std::string_view site, float* buf, std::int64_t n) override {
    const std::int64_t start = device_->now_ns();
    Status s = comm_->all_reduce(StreamKind::kCompute, DType::kFp32, buf, n);
    issued_.push_back({OpKind::kAllReduce, std::string(site), n, start, device_->now_ns()});
    return s;
  }
  Status all_gather(std::string_view site, const float* send, std::int64_t n,
                    float* recv) override {
    const std::int64_t start = device_->now_ns();
    const std::vector<std::int64_t> counts(idx(comm_->size()), n);
    Status s = comm_->all_gather_v(StreamKind::kCompute, DType::kFp32, send, counts, recv);
    issued_.push_back({OpKind::kAllGather, std::string(site), n, start, device_->now_ns()});
    return s;
  }
  Status all_to_all(std::string_view site, const float* send, std::int64_t n,
                    float* recv) override {
    const std::int64_t start = device_->now_ns();
    Status s = comm_->all_to_all(StreamKind::kCompute, DType::kFp32, send, n, recv);
    issued_.push_back(
        {OpKind::kAllToAll, std::string(site), n * comm_->size(), start, device_->now_ns()});
    return s;
  }
  // The oldest issued collective not yet matched, removed; false when there is none.
  bool take(IssuedCollective* out) {
    if (issued_.empty()) {
      return false;
    }
    *out = std::move(issued_.front());
    issued_.pop_front();
    return true;
  }
  std::size_t pending() const { return issued_.size(); }
  void clear() { issued_.clear(); }

 private:
  Communicator* comm_;
  const Device* device_;
  std::deque<IssuedCollective> issued_;  // touched by the compute stream's tasks only
};

class ExecutorImpl final : public Executor {
 public:
  ExecutorImpl(const Schedule& schedule, std::int64_t rank, backend::HostDecoder* decoder,
               Device* device, CommunicatorSet* comms, ExecutorOptions options)
      : schedule_(schedule),
        geometry_(schedule.geometry()),
        program_(schedule.program_of_rank(rank)),
        rank_(rank),
        decoder_(decoder),
        device_(device),
        comms_(comms),
        options_(std::move(options)) {}

  Status init(const backend::ParamValues& initial) {
    FSDP_RETURN_IF_ERROR(check_dtypes());
    FSDP_RETURN_IF_ERROR(check_legs());
    FSDP_RETURN_IF_ERROR(check_comms());
    FSDP_RETURN_IF_ERROR(plan_geometry());
    FSDP_RETURN_IF_ERROR(locate_params(initial));
    // The decoder's split group: tp or ep (check_legs: not both).
    for (const std::string_view name : {kTensorParallelAxis, kExpertParallelAxis}) {
      if (const auto a = schedule_.mesh().axis_index(name);
          a && schedule_.mesh().axis_size(*a) > 1) {
        split_comm_ = std::make_unique<AxisSplitComm>(&comms_->axis(*a), device_);
        decoder_->set_split_comm(split_comm_.get());
      }
    }
    scale_ = static_cast<float>(schedule_.gradient_scale());
    num_states_ = backend::optimizer_num_states(options_.optimizer);
    // Resident buffers as the program lists them; main weights from the initial values.
    MemoryResource& memory = device_->memory();
    resident_.resize(program_.resident.size());
    std::vector<float> host;
    for (std::size_t k = 0; k < program_.resident.size(); ++k) {
      const fsdp::ResidentBuffer& b = program_.resident[k];
      FSDP_TRY(resident_[k], ResidentBuffer::make(memory, b.elements));
      if (b.kind == ResidentKind::kOptimizerState) {
        opt_state_[idx(b.geometry_group)] = static_cast<std::int32_t>(k);
      }
      if (b.kind != ResidentKind::kMainWeight) {
        continue;
      }
      const GroupGeometry& g = geometry_.groups[idx(b.geometry_group)];
      const Range opt = ranges_[idx(b.geometry_group)][idx(static_cast<int>(Extent::kOptimizer))];
      host.assign(idx(opt.numel), 0.0F);
      for (std::size_t t = 0; t < g.param_indices.size(); ++t) {
        const Range tr = g.layout.get_tensor_range(static_cast<std::int64_t>(t));
        const std::vector<float>& values = initial[idx(g.unit)][idx(g.param_indices[t])];
        const std::int64_t lo = std::max(tr.start, opt.start);
        const std::int64_t hi = std::min(tr.end(), opt.end());
        for (std::int64_t x = lo; x < hi; ++x) {
          host[idx(x - opt.start)] = values[idx(x - tr.start)];
        }
      }
      FSDP_RETURN_IF_ERROR(device_->upload(StreamKind::kCompute, resident_[k].data(),
                                           host.data(), opt.numel));
      main_weight_[idx(b.geometry_group)] = static_cast<std::int32_t>(k);
    }
    FSDP_TRY(loss_buf_, ResidentBuffer::make(memory, 1));
    // Backward writes the gradients of frozen parameters somewhere: one scratch slot per
    // parameter of the unit with the most frozen elements.
    std::int64_t frozen = 0;
    for (const std::vector<ParamLoc>& unit : params_) {
      std::int64_t unit_frozen = 0;
      for (const ParamLoc& loc : unit) {
        unit_frozen += geometry_.groups[idx(loc.group)].trainable ? 0 : loc.numel;
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
    device_->submit(StreamKind::kCompute, TaskTag{step, -1}, [this, step]() -> Status {
      if (split_comm_ != nullptr) {
        split_comm_->clear();
      }
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
      if (split_comm_ != nullptr && split_comm_->pending() > 0) {
        IssuedCollective extra;
        split_comm_->take(&extra);
        return Error(
            ErrorCode::kInternal,
            str_cat("rank ", rank_, ": the decoder issued ", to_string(extra.kind), " ", extra.site,
                    " (", extra.elements, " elements), which the schedule does not list"));
      }
      float loss = static_cast<float>(decoder_->step_loss());
      FSDP_RETURN_IF_ERROR(device_->upload(kStream, loss_buf_.data(), &loss, 1));
      for (std::int64_t a = 0; a < comms_->num_axes(); ++a) {
        FSDP_RETURN_IF_ERROR(
            comms_->axis(a).all_reduce(kStream, DType::kFp32, loss_buf_.data(), 1));
      }
      FSDP_RETURN_IF_ERROR(device_->download(kStream, &loss, loss_buf_.data(), 1));
      loss_ = static_cast<double>(loss) / static_cast<double>(schedule_.mesh().size());
      return ok_status();
    });
    FSDP_RETURN_IF_ERROR(finish(str_cat("step ", step)));  // "rank 0 step 3: <first error>"
    steps_done_ = step + 1;
    return ok_status();
  }

  double last_loss() const override { return loss_; }

  Expected<backend::ParamValues> gather_parameters() override {
    backend::ParamValues out(params_.size());
    for (std::size_t u = 0; u < params_.size(); ++u) {
      out[u].resize(params_[u].size());
    }
    std::vector<ResidentBuffer> full(geometry_.groups.size());
    for (std::size_t gi = 0; gi < geometry_.groups.size(); ++gi) {
      const GroupGeometry& g = geometry_.groups[gi];
      FSDP_TRY(full[gi], ResidentBuffer::make(device_->memory(), g.layout.size()));
      float* base = full[gi].data();
      const Range opt = ranges_[gi][idx(static_cast<int>(Extent::kOptimizer))];
      const float* shard = resident_[idx(main_weight_[gi])].data();
      device_->submit(StreamKind::kCompute, TaskTag{}, [this, base, opt, shard]() -> Status {
        return device_->copy(StreamKind::kCompute, base + opt.start, shard, opt.numel);
      });
      FSDP_TRY(std::vector<CollectiveGeometry> steps,
               parameter_gather_geometry(g, schedule_.mesh(), rank_));
      for (CollectiveGeometry& cg : steps) {
        device_->submit(StreamKind::kCompute, TaskTag{},
                        [this, cg = std::move(cg), base]() -> Status {
                          return comms_->axis(cg.mesh_axis)
                              .all_gather_v(StreamKind::kCompute, DType::kFp32,
                                            base + cg.in.start, cg.counts, base + cg.out.start);
                        });
      }
    }
    FSDP_RETURN_IF_ERROR(finish("gathering the parameters"));
    for (std::size_t gi = 0; gi < geometry_.groups.size(); ++gi) {
      const GroupGeometry& g = geometry_.groups[gi];
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

  std::int64_t steps_done() const override { return steps_done_; }
  std::int64_t num_states() const override { return num_states_; }

  std::vector<TensorSlice> local_slices() const override {
    std::vector<TensorSlice> out;
    for (std::size_t gi = 0; gi < geometry_.groups.size(); ++gi) {
      const Range opt = ranges_[gi][idx(static_cast<int>(Extent::kOptimizer))];
      append_slices(gi, opt, out);
    }
    return out;
  }

  Expected<ExecutorState> export_state() override {
    ExecutorState state;
    state.steps_done = steps_done_;
    state.num_states = num_states_;
    std::vector<float> weights;
    std::vector<float> states;
    for (std::size_t gi = 0; gi < geometry_.groups.size(); ++gi) {
      const GroupGeometry& g = geometry_.groups[gi];
      const Range opt = ranges_[gi][idx(static_cast<int>(Extent::kOptimizer))];
      FSDP_TRY(std::vector<Range> owned, owned_ranges(g, opt));
      if (owned.empty()) {
        continue;
      }
      FSDP_RETURN_IF_ERROR(download_group(gi, opt, weights, states));
      const std::int64_t group_states = opt_state_[gi] >= 0 ? num_states_ : 0;
      std::vector<TensorSlice> slices;
      for (const Range& r : owned) {
        append_slices(gi, r, slices);
      }
      for (const TensorSlice& sl : slices) {
        // The slice's first element in layout coordinates, and so in the shard buffers.
        const GroupGeometry& sg = geometry_.groups[idx(params_[idx(sl.unit)][idx(sl.param)].group)];
        const std::int64_t tensor = params_[idx(sl.unit)][idx(sl.param)].tensor;
        const std::int64_t at =
            sg.layout.get_tensor_range(tensor).start + sl.range.start - opt.start;
        TensorShard shard{sl, {}, {}};
        shard.weights.assign(weights.begin() + at, weights.begin() + at + sl.range.numel);
        for (std::int64_t k = 0; k < group_states; ++k) {
          const auto from = states.begin() + k * opt.numel + at;
          shard.states.insert(shard.states.end(), from, from + sl.range.numel);
        }
        state.shards.push_back(std::move(shard));
      }
    }
    return state;
  }

  Status import_state(const ExecutorState& state) override {
    if (state.num_states != num_states_) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("rank ", rank_, ": the state holds ", state.num_states,
                           " optimizer values per weight; the optimizer ",
                           to_string(options_.optimizer), " keeps ", num_states_));
    }
    // Host images of every group's shard buffers, filled from the shards, with a coverage mark
    // per layout element.
    const std::size_t n = geometry_.groups.size();
    std::vector<std::vector<float>> weights(n);
    std::vector<std::vector<float>> states(n);
    std::vector<std::vector<char>> covered(n);
    for (std::size_t gi = 0; gi < n; ++gi) {
      const Range opt = ranges_[gi][idx(static_cast<int>(Extent::kOptimizer))];
      weights[gi].assign(idx(opt.numel), 0.0F);
      states[gi].assign(idx(opt_state_[gi] >= 0 ? num_states_ * opt.numel : 0), 0.0F);
      covered[gi].assign(idx(opt.numel), 0);
    }
    for (const TensorShard& shard : state.shards) {
      const TensorSlice& sl = shard.slice;
      if (sl.unit < 0 || idx(sl.unit) >= params_.size() || sl.param < 0 ||
          idx(sl.param) >= params_[idx(sl.unit)].size()) {
        return Error(ErrorCode::kInvalidArgument,
                     str_cat("rank ", rank_, ": a shard names parameter ", sl.param, " of unit ",
                             sl.unit, "; the model has no such tensor"));
      }
      const ParamLoc& loc = params_[idx(sl.unit)][idx(sl.param)];
      const std::string name = tensor_name(sl.unit, sl.param);
      if (sl.range.start < 0 || sl.range.numel < 0 || sl.range.end() > loc.numel) {
        return Error(
            ErrorCode::kInvalidArgument,
            str_cat("rank ", rank_, ": a shard of ", name, " holds elements [", sl.range.start,
                    ", ", sl.range.end(), "); the tensor has ", loc.numel));
      }
      const GroupGeometry& g = geometry_.groups[idx(loc.group)];
      const std::int64_t group_states = opt_state_[idx(loc.group)] >= 0 ? num_states_ : 0;
      if (static_cast<std::int64_t>(shard.weights.size()) != sl.range.numel ||
          static_cast<std::int64_t>(shard.states.size()) != group_states * sl.range.numel) {
        return Error(ErrorCode::kInvalidArgument,
                     str_cat("rank ", rank_, ": a shard of ", name, " over ", sl.range.numel,
                             " elements holds ", shard.weights.size(), " weights and ",
                             shard.states.size(), " state values; expected ", sl.range.numel,
                             " and ", group_states * sl.range.numel));
      }
      const Range opt = ranges_[idx(loc.group)][idx(static_cast<int>(Extent::kOptimizer))];
      const Range tr = g.layout.get_tensor_range(loc.tensor);
      // The shard's elements in layout coordinates, clipped to this rank's range.
      const std::int64_t lo = std::max(tr.start + sl.range.start, opt.start);
      const std::int64_t hi = std::min(tr.start + sl.range.end(), opt.end());
      for (std::int64_t x = lo; x < hi; ++x) {
        const std::int64_t from = x - tr.start - sl.range.start;  // index into the shard
        const std::int64_t to = x - opt.start;                    // index into the rank's buffer
        weights[idx(loc.group)][idx(to)] = shard.weights[idx(from)];
        for (std::int64_t k = 0; k < group_states; ++k) {
          states[idx(loc.group)][idx(k * opt.numel + to)] =
              shard.states[idx(k * sl.range.numel + from)];
        }
        covered[idx(loc.group)][idx(to)] = 1;
      }
    }
    for (const TensorSlice& sl : local_slices()) {
      const ParamLoc& loc = params_[idx(sl.unit)][idx(sl.param)];
      const GroupGeometry& g = geometry_.groups[idx(loc.group)];
      const Range opt = ranges_[idx(loc.group)][idx(static_cast<int>(Extent::kOptimizer))];
      const std::int64_t base = g.layout.get_tensor_range(loc.tensor).start - opt.start;
      for (std::int64_t e = sl.range.start; e < sl.range.end(); ++e) {
        if (covered[idx(loc.group)][idx(base + e)] == 0) {
          std::int64_t end = e;
          while (end < sl.range.end() && covered[idx(loc.group)][idx(base + end)] == 0) {
            ++end;
          }
          return Error(ErrorCode::kInvalidArgument,
                       str_cat("rank ", rank_, ": no shard holds elements [", e, ", ", end, ") of ",
                               tensor_name(sl.unit, sl.param)));
        }
      }
    }
    for (std::size_t gi = 0; gi < n; ++gi) {
      const Range opt = ranges_[gi][idx(static_cast<int>(Extent::kOptimizer))];
      FSDP_RETURN_IF_ERROR(device_->upload(StreamKind::kCompute,
                                           resident_[idx(main_weight_[gi])].data(),
                                           weights[gi].data(), opt.numel));
      if (opt_state_[gi] >= 0) {
        FSDP_RETURN_IF_ERROR(
            device_->upload(StreamKind::kCompute, resident_[idx(opt_state_[gi])].data(),
                            states[gi].data(), static_cast<std::int64_t>(states[gi].size())));
      }
    }
    steps_done_ = state.steps_done;
    return ok_status();
  }

  Expected<double> sum_over_ranks(double value) override {
    auto v = static_cast<float>(value);
    device_->submit(StreamKind::kCompute, TaskTag{}, [this, &v]() -> Status {
      constexpr StreamKind kStream = StreamKind::kCompute;
      FSDP_RETURN_IF_ERROR(device_->upload(kStream, loss_buf_.data(), &v, 1));
      for (std::int64_t a = 0; a < comms_->num_axes(); ++a) {
        FSDP_RETURN_IF_ERROR(
            comms_->axis(a).all_reduce(kStream, DType::kFp32, loss_buf_.data(), 1));
      }
      return device_->download(kStream, &v, loss_buf_.data(), 1);
    });
    FSDP_RETURN_IF_ERROR(finish("summing over ranks"));
    return static_cast<double>(v);
  }

  Expected<std::vector<float>> gather_over_axis(std::int64_t mesh_axis,
                                                std::span<const float> values) override {
    if (mesh_axis < 0 || mesh_axis >= comms_->num_axes()) {
      return Error(ErrorCode::kOutOfRange, str_cat("gather over mesh axis ", mesh_axis,
                                                   ": the mesh has ", comms_->num_axes(), " axes"));
    }
    Communicator& comm = comms_->axis(mesh_axis);
    const auto n = static_cast<std::int64_t>(values.size());
    std::vector<float> out(idx(n * comm.size()));
    FSDP_TRY(ResidentBuffer buf, ResidentBuffer::make(device_->memory(), n * comm.size()));
    float* base = buf.data();
    float* own = base + n * comm.rank();
    const std::vector<std::int64_t> counts(idx(comm.size()), n);
    device_->submit(StreamKind::kCompute, TaskTag{}, [&]() -> Status {
      constexpr StreamKind kStream = StreamKind::kCompute;
      FSDP_RETURN_IF_ERROR(device_->upload(kStream, own, values.data(), n));
      FSDP_RETURN_IF_ERROR(comm.all_gather_v(kStream, DType::kFp32, own, counts, base));
      return device_->download(kStream, out.data(), base, n * comm.size());
    });
    FSDP_RETURN_IF_ERROR(finish(str_cat("gathering over mesh axis '", comm.axis_name(), "'")));
    return out;
  }

  std::vector<OpTiming> op_timeline() const override {
    std::vector<OpTiming> out;
    // A tensor-parallel collective runs inside its unit's compute op: on a host device its op
    // reports the call's own interval, and the compute op before it on the compute stream loses
    // that much time (its end moves earlier), so the durations add up as in the simulator.
    const std::lock_guard<std::mutex> lock(activation_times_mu_);
    std::ptrdiff_t last_compute = -1;
    for (const TaskTiming& t : device_->timeline()) {
      if (t.tag.op < 0) {
        continue;
      }
      const Op& op = program_.ops[idx(t.tag.op)];
      OpTiming timing{
          t.tag.step, t.tag.op, t.stream, op.kind, is_collective(op.kind) ? op.bytes : 0,
          t.start_ns, t.end_ns};
      if (op.kind == OpKind::kForward || op.kind == OpKind::kRecompute ||
          op.kind == OpKind::kBackward) {
        last_compute = static_cast<std::ptrdiff_t>(out.size());
      }
      if (const auto it = activation_times_.find({t.tag.step, t.tag.op});
          it != activation_times_.end()) {
        timing.start_ns = it->second.first;
        timing.end_ns = it->second.second;
        if (last_compute >= 0) {
          OpTiming& compute = out[static_cast<std::size_t>(last_compute)];
          compute.end_ns =
              std::max(compute.start_ns, compute.end_ns - (timing.end_ns - timing.start_ns));
        }
      }
      out.push_back(timing);
    }
    return out;
  }

 private:
  // --- checkpoints ------------------------------------------------------------------------------
  std::string tensor_name(std::int32_t unit, std::int32_t param) const {
    return str_cat("parameter ", param, " of unit '", schedule_.unit_names()[idx(unit)], "'");
  }

  // The tensor slices of group gi that layout range `r` holds (padding skipped).
  void append_slices(std::size_t gi, Range r, std::vector<TensorSlice>& out) const {
    const GroupGeometry& g = geometry_.groups[gi];
    for (std::size_t t = 0; t < g.param_indices.size(); ++t) {
      const Range tr = g.layout.get_tensor_range(static_cast<std::int64_t>(t));
      const std::int64_t lo = std::max(tr.start, r.start);
      const std::int64_t hi = std::min(tr.end(), r.end());
      if (lo < hi) {
        out.push_back(TensorSlice{g.unit, static_cast<std::int32_t>(g.param_indices[t]),
                                  Range{lo - tr.start, hi - lo}});
      }
    }
  }

  // `opt` (this rank's optimizer range of g) less the optimizer ranges of every lower rank.
  Expected<std::vector<Range>> owned_ranges(const GroupGeometry& g, Range opt) const {
    std::vector<Range> left;
    if (opt.numel > 0) {
      left.push_back(opt);
    }
    for (std::int64_t r = 0; r < rank_ && !left.empty(); ++r) {
      FSDP_TRY(const Range other, extent_range(g, Extent::kOptimizer, r));
      std::vector<Range> next;
      for (const Range& piece : left) {
        if (other.numel <= 0 || other.end() <= piece.start || other.start >= piece.end()) {
          next.push_back(piece);
          continue;
        }
        if (other.start > piece.start) {
          next.push_back(Range{piece.start, other.start - piece.start});
        }
        if (other.end() < piece.end()) {
          next.push_back(Range{other.end(), piece.end() - other.end()});
        }
      }
      left = std::move(next);
    }
    return left;
  }

  // Host copies of group gi's main weights and optimizer states (empty without state).
  Status download_group(std::size_t gi, Range opt, std::vector<float>& weights,
                        std::vector<float>& states) {
    weights.assign(idx(opt.numel), 0.0F);
    FSDP_RETURN_IF_ERROR(device_->download(StreamKind::kCompute, weights.data(),
                                           resident_[idx(main_weight_[gi])].data(), opt.numel));
    states.clear();
    if (opt_state_[gi] >= 0) {
      const ResidentBuffer& buf = resident_[idx(opt_state_[gi])];
      FSDP_CHECK(buf.size() == num_states_ * opt.numel)
          << "optimizer state of group " << gi << " has " << buf.size() << " values; expected "
          << num_states_ * opt.numel;
      states.assign(idx(buf.size()), 0.0F);
      FSDP_RETURN_IF_ERROR(
          device_->download(StreamKind::kCompute, states.data(), buf.data(), buf.size()));
    }
    return ok_status();
  }

  // --- what this executor implements (make) -----------------------------------------------------
  std::string where(const GroupGeometry& g) const {
    return str_cat("unit '", schedule_.unit_names()[idx(g.unit)], "' group ", g.group);
  }

  Status check_dtypes() const {
    for (const GroupGeometry& g : geometry_.groups) {
      const DType dtypes[] = {g.param_dtype, g.compute_dtype, g.grad_dtype, g.main_grad_dtype,
                              g.main_dtype};
      const char* names[] = {"parameters", "compute", "grads", "main grads", "main params"};
      for (std::size_t i = 0; i < 5; ++i) {
        if (dtypes[i] != DType::kFp32) {
          return Error(ErrorCode::kFailedPrecondition,
                       str_cat("real training needs fp32 parameters, compute, grads, main grads "
                               "and main params; ",
                               where(g), " has ", names[i], " in ", to_string(dtypes[i])));
        }
      }
    }
    return ok_status();
  }

  Status check_legs() const {
    for (const CollectiveInfo& info : schedule_.collectives()) {
      if (info.activation < 0) {
        continue;
      }
      // The decoder runs tensor parallelism without sequence parallelism (all-reduces and the
      // cross entropy's all-gather on the tp axis) or expert parallelism (all-to-alls on the ep
      // axis), not both (docs/design/parallelism.md).
      const std::string& axis = schedule_.mesh().axis_name(info.axis);
      const bool tp_call = axis == kTensorParallelAxis &&
                           (info.kind == OpKind::kAllReduce || info.kind == OpKind::kAllGather);
      const bool ep_call = axis == kExpertParallelAxis && info.kind == OpKind::kAllToAll;
      if (!tp_call && !ep_call) {
        return Error(
            ErrorCode::kFailedPrecondition,
            str_cat("the schedule's ", to_string(info.kind), " ",
                    schedule_.activation_of(info)->site, " on mesh axis '", axis,
                    "' is not one the executor runs: expected all-reduces and "
                    "all-gathers of a tensor-parallel split on '",
                    kTensorParallelAxis, "' or all-to-alls on '", kExpertParallelAxis, "'"));
      }
    }
    for (const GroupGeometry& g : geometry_.groups) {
      for (const CollectiveLeg leg : {CollectiveLeg::kUnshard, CollectiveLeg::kModelWeightSync}) {
        for (const RedistributeStep& s : g.leg(leg).steps) {
          if (s.kind != RedistributeKind::kAllGather) {
            return Error(ErrorCode::kFailedPrecondition,
                         str_cat(where(g), ": the executor gathers weights with all-gathers only; "
                                           "got a ",
                                 to_string(s.kind)));
          }
        }
      }
      // A chain of reduce-scatters (one per sharded DP axis, inner first): the steps before
      // the last work in place in the partial buffer (the schedule's operands say so).
      for (const RedistributeStep& s : g.leg(CollectiveLeg::kGradReduce).steps) {
        if (s.kind != RedistributeKind::kReduceScatter) {
          return Error(ErrorCode::kFailedPrecondition,
                       str_cat(where(g),
                               ": the executor reduces gradients with reduce-scatters "
                               "only; got a ",
                               to_string(s.kind)));
        }
      }
      // Finalising: one step, or a chain of reduce-scatters (ZeRO-1 over two sharded axes; the
      // steps before the last work in place in the main grad).
      const RedistributeLeg& finalize = g.leg(CollectiveLeg::kGradFinalize);
      const bool chain = std::all_of(
          finalize.steps.begin(), finalize.steps.end(),
          [](const RedistributeStep& s) { return s.kind == RedistributeKind::kReduceScatter; });
      if (finalize.steps.size() > 1 && !chain) {
        return Error(ErrorCode::kFailedPrecondition,
                     str_cat(where(g),
                             ": the executor finalises gradients in one step or a "
                             "chain of reduce-scatters; got ",
                             finalize.steps.size(), " steps"));
      }
    }
    return ok_status();
  }

  Status check_comms() const {
    const DeviceMesh& mesh = schedule_.mesh();
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

  // This rank's ranges of every group and the geometry of every collective of the table.
  Status plan_geometry() {
    ranges_.resize(geometry_.groups.size());
    main_weight_.assign(geometry_.groups.size(), -1);
    opt_state_.assign(geometry_.groups.size(), -1);
    for (std::size_t gi = 0; gi < geometry_.groups.size(); ++gi) {
      for (const Extent e : {Extent::kFull, Extent::kParameter, Extent::kGradient,
                             Extent::kOptimizer}) {
        FSDP_TRY(ranges_[gi][idx(static_cast<int>(e))],
                 extent_range(geometry_.groups[gi], e, rank_));
      }
      const GroupGeometry& g = geometry_.groups[gi];
      const Range grad = ranges_[gi][idx(static_cast<int>(Extent::kGradient))];
      const Range opt = ranges_[gi][idx(static_cast<int>(Extent::kOptimizer))];
      if (g.trainable && g.main_grad_resident &&
          (opt.start < grad.start || opt.end() > grad.end())) {
        return Error(ErrorCode::kFailedPrecondition,
                     str_cat(where(g), ": the optimizer shard [", opt.start, ", ", opt.end(),
                             ") is not within the main grad [", grad.start, ", ", grad.end(),
                             ") it reads"));
      }
    }
    const std::vector<CollectiveInfo>& table = schedule_.collectives();
    collectives_.reserve(table.size());
    for (std::size_t k = 0; k < table.size(); ++k) {
      const CollectiveInfo& info = table[k];
      if (info.activation >= 0) {
        collectives_.emplace_back();  // the decoder issues it (AxisSplitComm)
        continue;
      }
      if (info.geometry_group < 0) {
        return Error(ErrorCode::kFailedPrecondition,
                     str_cat("collective ", k, " (", to_string(info.kind),
                             ") moves no parameter group: the executor needs its geometry"));
      }
      FSDP_TRY(CollectiveGeometry cg,
               collective_geometry(geometry_.groups[idx(info.geometry_group)], info.leg,
                                   idx(info.leg_step), schedule_.mesh(), rank_));
      collectives_.push_back(std::move(cg));
    }
    return ok_status();
  }

  Status locate_params(const backend::ParamValues& initial) {
    params_.resize(geometry_.unit_groups.size());
    for (std::size_t u = 0; u < geometry_.unit_groups.size(); ++u) {
      std::size_t n_params = 0;
      for (std::int32_t gi : geometry_.unit_groups[u]) {
        n_params += geometry_.groups[idx(gi)].param_indices.size();
      }
      params_[u].resize(n_params);
      for (std::int32_t gi : geometry_.unit_groups[u]) {
        const GroupGeometry& g = geometry_.groups[idx(gi)];
        std::int64_t offset = 0;
        for (std::size_t t = 0; t < g.param_indices.size(); ++t) {
          const std::int64_t numel =
              g.layout.get_tensor_range(static_cast<std::int64_t>(t)).numel;
          params_[u][idx(g.param_indices[t])] =
              ParamLoc{gi, static_cast<std::int64_t>(t), offset, numel};
          offset += numel;
        }
      }
    }
    if (initial.size() != params_.size()) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("initial values cover ", initial.size(), " units; expected ",
                           params_.size()));
    }
    for (std::size_t u = 0; u < params_.size(); ++u) {
      const std::string& unit = schedule_.unit_names()[u];
      if (initial[u].size() != params_[u].size()) {
        return Error(ErrorCode::kInvalidArgument,
                     str_cat("initial values of unit '", unit, "' cover ", initial[u].size(),
                             " parameters; expected ", params_[u].size()));
      }
      for (std::size_t p = 0; p < params_[u].size(); ++p) {
        if (static_cast<std::int64_t>(initial[u][p].size()) != params_[u][p].numel) {
          return Error(ErrorCode::kInvalidArgument,
                       str_cat("initial value of parameter ", p, " of unit '", unit, "' has ",
                               initial[u][p].size(), " elements; expected ",
                               params_[u][p].numel));
        }
      }
    }
    return ok_status();
  }

  // --- issue ----------------------------------------------------------------------------------
  float* resolve(const Ref& r) const {
    return r.buffer >= 0 ? static_cast<float*>(buffers_[idx(r.buffer)]) : r.resident;
  }

  Range range_of(const Operand& o) const {
    return ranges_[idx(o.group)][idx(static_cast<int>(o.extent))];
  }

  // The operand as a task finds it.
  Ref ref(const Operand& o) const {
    const std::int64_t start = o.group >= 0 && o.extent != Extent::kNone ? range_of(o).start : 0;
    if (o.space == BufferSpace::kTransient) {
      return Ref{o.buffer, nullptr, start};
    }
    return Ref{-1, resident_[idx(o.buffer)].data(), start};
  }

  void submit(const Op& op, std::int32_t i, Task task) {
    device_->submit(op.stream, TaskTag{step_, i}, std::move(task));
  }

  Status issue(std::int32_t i) {
    const Op& op = program_.ops[idx(i)];
    Status s = issue_op(op, i);
    if (!s.ok()) {
      return s.error().with_context(
          str_cat("rank ", rank_, " step ", step_, " op ", i, " (", to_string(op.kind), ")"));
    }
    return s;
  }

  Status issue_op(const Op& op, std::int32_t i) {
    const std::span<const Operand> operands = program_.operands_of(op);
    switch (op.kind) {
      case OpKind::kRecord:
        device_->record(op.stream, op.event, TaskTag{step_, i});
        return ok_status();
      case OpKind::kWait:
        device_->wait(op.stream, op.event, TaskTag{step_, i});
        return ok_status();
      case OpKind::kAlloc:
        issue_alloc(op, i);
        return ok_status();
      case OpKind::kFree:
        issue_free(op, i);
        return ok_status();
      case OpKind::kAllGather:
      case OpKind::kReduceScatter:
      case OpKind::kAllReduce:
        if (schedule_.collectives()[idx(op.collective)].activation >= 0) {
          issue_activation(op, i);
        } else {
          issue_collective(op, i, operands);
        }
        return ok_status();
      case OpKind::kAllToAll:  // check_legs: activation collectives only
        issue_activation(op, i);
        return ok_status();
      case OpKind::kForward:
      case OpKind::kRecompute:
      case OpKind::kBackward:
        return issue_unit_compute(op, i, operands);
      case OpKind::kGradCopy:
        issue_grad_copy(op, i, operands);
        return ok_status();
      case OpKind::kGradAccumulate:
        issue_grad_accumulate(op, i, operands);
        return ok_status();
      case OpKind::kOptimizerStep:
        issue_optimizer_step(op, i, operands);
        return ok_status();
      case OpKind::kCast:
        // fp32 model weights alias the main weights: make() rejects anything that casts.
        return Error(ErrorCode::kFailedPrecondition, "casts need non-fp32 model weights");
    }
    return Error(ErrorCode::kInternal, "unknown op kind");
  }

  void issue_alloc(const Op& op, std::int32_t i) {
    const std::int32_t buffer = op.buffer;
    const std::int64_t bytes = op.bytes;
    const BufferClass cls = op.buffer_class;
    const std::int64_t step = step_;
    const StreamKind stream = op.stream;
    submit(op, i, [this, buffer, bytes, cls, stream, step, i]() -> Status {
      FSDP_TRY(void* p, device_->arena().allocate(bytes, cls, stream, step, i, buffer));
      buffers_[idx(buffer)] = p;
      return ok_status();
    });
  }

  void issue_free(const Op& op, std::int32_t i) {
    const std::int32_t buffer = op.buffer;
    const std::int64_t step = step_;
    const StreamKind stream = op.stream;
    submit(op, i, [this, buffer, step, i, stream]() -> Status {
      device_->arena().release(buffers_[idx(buffer)], device_->fence(stream), stream, step, i,
                               buffer);
      buffers_[idx(buffer)] = nullptr;
      return ok_status();
    });
  }

  // All-gather [send, receive]; reduce-scatter [send, receive] or [send, receive, accumulator]
  // (the output then added into the accumulator with the gradient scale, set when the
  // accumulator is written without being read); all-reduce [buffer] in place.
  void issue_collective(const Op& op, std::int32_t i, std::span<const Operand> operands) {
    const CollectiveGeometry& cg = collectives_[idx(op.collective)];
    const StreamKind stream = op.stream;
    Communicator* comm = &comms_->axis(cg.mesh_axis);
    Task task;
    Seen seen;
    if (op.kind == OpKind::kAllReduce) {
      const Ref buf = ref(operands[0]);
      seen = Seen{buf, buf, {}, false, false, false, nullptr};
      task = [this, comm, stream, buf, &cg]() -> Status {
        return comm->all_reduce(stream, DType::kFp32, resolve(buf) + (cg.in.start - buf.start),
                                cg.in.numel);
      };
    } else if (op.kind == OpKind::kAllGather) {
      const Ref src = ref(operands[0]);
      const Ref dst = ref(operands[1]);
      seen = Seen{src, dst, {}, true, false, false, nullptr};
      task = [this, comm, stream, src, dst, &cg]() -> Status {
        return comm->all_gather_v(stream, DType::kFp32, resolve(src) + (cg.in.start - src.start),
                                  cg.counts, resolve(dst) + (cg.out.start - dst.start));
      };
    } else {
      const Ref src = ref(operands[0]);
      const Ref dst = ref(operands[1]);
      const bool accumulates = operands.size() == 3;
      const Ref acc = accumulates ? ref(operands[2]) : Ref{};
      const bool overwrite = accumulates && operands[2].access == Access::kWrite;
      // A step before the last of a multi-axis reduction writes into the buffer it reads (the
      // output range is this rank's chunk of the input range: Communicator's in place).
      const bool in_place =
          operands[0].space == operands[1].space && operands[0].buffer == operands[1].buffer;
      std::shared_ptr<std::vector<float>> input_copy;
      if (in_place && options_.on_collective) {
        input_copy = std::make_shared<std::vector<float>>();
      }
      seen = Seen{src, dst, acc, true, accumulates, overwrite, input_copy};
      task = [this, comm, stream, src, dst, acc, accumulates, overwrite, input_copy,
              &cg]() -> Status {
        const float* in = resolve(src) + (cg.in.start - src.start);
        if (input_copy != nullptr) {  // host-addressable memory (Executor::make checks)
          input_copy->assign(in, in + cg.in.numel);
        }
        float* out = resolve(dst) + (cg.out.start - dst.start);
        FSDP_RETURN_IF_ERROR(comm->reduce_scatter_v(stream, DType::kFp32, in, cg.counts, out));
        if (!accumulates) {
          return ok_status();
        }
        return device_->accumulate(stream, resolve(acc) + (cg.out.start - acc.start), out,
                                   cg.out.numel, scale_, overwrite);
      };
    }
    submit(op, i, [this, task = std::move(task), i, seen, &cg, op_collective = op.collective,
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
        options_.on_collective(observation(cg, seen, i, op_collective, axis_rank));
      }
      return s;
    });
  }

  // An activation collective: the decoder performed it inside the unit's compute op, which the
  // IR places right before it on the compute stream; this checks that it did so as listed.
  void issue_activation(const Op& op, std::int32_t i) {
    const CollectiveInfo& info = schedule_.collectives()[idx(op.collective)];
    const ActivationCollective* entry = schedule_.activation_of(info);
    const OpKind kind = op.kind;
    const std::int64_t elements = op.elements;
    const std::string site = entry->site;
    const std::string unit = schedule_.unit_names()[idx(info.unit)];
    submit(op, i, [this, kind, elements, site, unit, i]() -> Status {
      IssuedCollective got;
      if (split_comm_ == nullptr || !split_comm_->take(&got)) {
        return Error(ErrorCode::kInternal,
                     str_cat("the schedule lists ", to_string(kind), " ", site, " of unit '", unit,
                             "' (", elements, " elements); the decoder issued none"));
      }
      if (got.kind != kind || got.site != site || got.elements != elements) {
        return Error(ErrorCode::kInternal,
                     str_cat("the schedule lists ", to_string(kind), " ", site, " of unit '", unit,
                             "' (", elements, " elements); the decoder issued ",
                             to_string(got.kind), " ", got.site, " (", got.elements, " elements)"));
      }
      if (device_->host_addressable()) {  // the call's own interval (see op_timeline)
        const std::lock_guard<std::mutex> lock(activation_times_mu_);
        activation_times_[{step_, i}] = {got.start_ns, got.end_ns};
      }
      return ok_status();
    });
  }

  // Views of a completed collective's buffers (Ref semantics: global element x of ref r is at
  // resolve(r) + (x - r.start)).
  CollectiveObservation observation(const CollectiveGeometry& cg, const Seen& seen,
                                    std::int32_t i, std::int32_t collective,
                                    std::int64_t axis_rank) const {
    const auto view = [this](const Ref& r, Range range) {
      return std::span<const float>(resolve(r) + (range.start - r.start), idx(range.numel));
    };
    // An all-reduce works in place on its input range.
    const Range out = cg.kind == OpKind::kAllReduce ? cg.in : cg.out;
    CollectiveObservation o{rank_, step_, i, collective, cg.kind, axis_rank, cg.in, out,
                            {}, view(seen.out, out), {}, seen.overwrote};
    if (seen.input_copy != nullptr) {
      o.input = *seen.input_copy;
    } else if (seen.has_input) {
      o.input = view(seen.in, cg.in);
    }
    if (seen.has_acc) {
      o.accumulator = view(seen.acc, cg.out);
    }
    return o;
  }

  // Forward and recompute read one weight operand per group of the unit; backward also writes
  // one autograd-gradient buffer per trainable group (a write of extent kNone).
  Status issue_unit_compute(const Op& op, std::int32_t i, std::span<const Operand> operands) {
    if (op.unit < 0 || idx(op.unit) >= params_.size()) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("names unit ", op.unit, ", which has no parameter geometry"));
    }
    std::vector<Ref> weights(geometry_.groups.size());
    std::vector<std::int32_t> grad_buffers(geometry_.groups.size(), -1);
    for (const Operand& o : operands) {
      if (is_weight_read(o)) {
        weights[idx(o.group)] = ref(o);
      } else if (o.access == Access::kWrite && o.group >= 0 && o.extent == Extent::kNone &&
                 o.space == BufferSpace::kTransient) {
        grad_buffers[idx(o.group)] = o.buffer;
      }
    }
    // Per parameter: the weight ref and its offset in it; for backward, the gradient buffer.
    struct Slot {
      Ref weight;
      std::int64_t weight_offset = 0;
      std::int32_t grad_buffer = -1;
      std::int64_t grad_offset = 0;
    };
    std::vector<Slot> slots;
    for (const ParamLoc& loc : params_[idx(op.unit)]) {
      const Ref& w = weights[idx(loc.group)];
      const GroupGeometry& g = geometry_.groups[idx(loc.group)];
      Slot s{w, g.layout.tensor_to_offset()[idx(loc.tensor)] - w.start, -1, loc.concat_offset};
      if (op.kind == OpKind::kBackward && g.trainable) {
        s.grad_buffer = grad_buffers[idx(loc.group)];
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

  // [autograd grads, partial grads]: each tensor's gradient to its layout offset.
  void issue_grad_copy(const Op& op, std::int32_t i, std::span<const Operand> operands) {
    const Ref from = ref(operands[0]);
    const Ref to = ref(operands[1]);
    const GroupGeometry* g = &geometry_.groups[idx(operands[1].group)];
    const StreamKind stream = op.stream;
    submit(op, i, [this, from, to, g, stream]() -> Status {
      const float* src = resolve(from);
      float* dst = resolve(to);
      std::int64_t offset = 0;
      for (std::size_t t = 0; t < g->param_indices.size(); ++t) {
        const Range tr = g->layout.get_tensor_range(static_cast<std::int64_t>(t));
        FSDP_RETURN_IF_ERROR(
            device_->copy(stream, dst + (tr.start - to.start), src + offset, tr.numel));
        offset += tr.numel;
      }
      return ok_status();
    });
  }

  // [local gradient, accumulator]: the accumulator's range of the gradient, scaled, added in (set
  // when the accumulator is only written).
  void issue_grad_accumulate(const Op& op, std::int32_t i, std::span<const Operand> operands) {
    const Ref src = ref(operands[0]);
    const Ref acc = ref(operands[1]);
    const Range r = range_of(operands[1]);
    const bool overwrite = operands[1].access == Access::kWrite;
    const StreamKind stream = op.stream;
    submit(op, i, [this, src, acc, r, overwrite, stream]() -> Status {
      return device_->accumulate(stream, resolve(acc) + (r.start - acc.start),
                                 resolve(src) + (r.start - src.start), r.numel, scale_,
                                 overwrite);
    });
  }

  // [main weight, gradient, optimizer state?]: the update over the main weight's range.
  void issue_optimizer_step(const Op& op, std::int32_t i, std::span<const Operand> operands) {
    const Ref weight = ref(operands[0]);
    const Ref grad = ref(operands[1]);
    const Range r = range_of(operands[0]);
    float* state = operands.size() > 2 && operands[2].space == BufferSpace::kResident
                       ? resident_[idx(operands[2].buffer)].data()
                       : nullptr;
    const std::int64_t step = step_ + 1;
    const StreamKind stream = op.stream;
    submit(op, i, [this, weight, grad, r, state, step, stream]() -> Status {
      return device_->optimizer_update(stream, options_.optimizer, options_.hyper, step,
                                       resolve(weight) + (r.start - weight.start),
                                       resolve(grad) + (r.start - grad.start), state, r.numel);
    });
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

  const Schedule& schedule_;
  const ShardGeometry& geometry_;
  const RankProgram& program_;
  std::int64_t rank_;
  backend::HostDecoder* decoder_;
  Device* device_;
  CommunicatorSet* comms_;
  ExecutorOptions options_;
  std::vector<ExtentRanges> ranges_;               // [group][extent] on this rank
  std::vector<CollectiveGeometry> collectives_;    // per entry of the collectives table
  std::vector<std::vector<ParamLoc>> params_;      // [unit][param]
  std::vector<ResidentBuffer> resident_;           // per RankProgram::resident entry
  std::vector<std::int32_t> main_weight_;          // group -> index into resident_
  std::vector<std::int32_t> opt_state_;            // group -> index into resident_, or -1
  std::vector<void*> buffers_;
  ResidentBuffer loss_buf_;      // the loss all-reduce's device slot
  ResidentBuffer frozen_grads_;  // backward's output for parameters that are not trained
  std::unique_ptr<AxisSplitComm> split_comm_;  // under tp > 1: the decoder's collectives
  // (step, op) of an activation collective -> its call's device-clock interval (host devices).
  mutable std::mutex activation_times_mu_;
  std::map<std::pair<std::int64_t, std::int32_t>, std::pair<std::int64_t, std::int64_t>>
      activation_times_;
  float scale_ = 1.0F;
  std::int64_t step_ = 0;
  std::int64_t steps_done_ = 0;
  std::int64_t num_states_ = 0;
  double loss_ = 0.0;
  bool failed_ = false;
};

}  // namespace

Expected<std::unique_ptr<Executor>> Executor::make(const Schedule& schedule, std::int64_t rank,
                                                   const backend::ParamValues& initial,
                                                   backend::HostDecoder* decoder, Device* device,
                                                   CommunicatorSet* comms,
                                                   ExecutorOptions options) {
  if (decoder == nullptr || device == nullptr || comms == nullptr) {
    return Error(ErrorCode::kInvalidArgument,
                 "executor needs a decoder, a device and communicators");
  }
  if (options.on_collective && !device->host_addressable()) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("executor: an on_collective observer reads buffer memory from the host; ",
                         device->name(), " keeps it on the device (expected a host-addressable "
                         "device, e.g. the cpu backend)"));
  }
  if (rank < 0 || rank >= schedule.mesh().size()) {
    return Error(ErrorCode::kOutOfRange, str_cat("rank ", rank, " is outside the mesh ",
                                                 to_string(schedule.mesh()), " of ",
                                                 schedule.mesh().size(), " ranks"));
  }
  auto impl =
      std::make_unique<ExecutorImpl>(schedule, rank, decoder, device, comms, std::move(options));
  FSDP_RETURN_IF_ERROR(impl->init(initial));
  return std::unique_ptr<Executor>(std::move(impl));
}

}  // namespace fsdp::exec

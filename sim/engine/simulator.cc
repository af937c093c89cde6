// SPDX-License-Identifier: Apache-2.0
// The DES loop of docs/design/simulator.md: state is structure-of-arrays indexed by dense stream
// ids (class * kNumStreams + stream), flat op ids (per program) and flow ids; events carry indices
// only; dispatch is one switch. Base durations are precomputed per program op before the loop;
// stragglers, contention and SM slowdown rescale them with integer or exactly rounded arithmetic.
#include "sim/engine/simulator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "core/base/check.h"
#include "core/base/strings.h"
#include "sim/engine/event_queue.h"
#include "sim/engine/rank_classes.h"
#include "sim/model/caching_allocator.h"

namespace fsdp::sim {
namespace {

static_assert(kNumStreams <= 7, "event_state_ keeps a waiting bit per stream in a byte");

enum class StreamState : std::uint8_t { kReady, kBusy, kBlockedEvent, kBlockedCollective, kDone };

// One collective of a class as it ran, for the statistics in finish().
struct CommInterval {
  SimTime start;
  SimTime end;
  SimDuration exposed;    // the part of [start, end) during which the class computed nothing
  std::int32_t coll = 0;  // index into Simulator::colls_
  StreamKind stream = StreamKind::kAllGather;
  OpKind kind = OpKind::kAllGather;
};

// Time accounting of one class, kept as the run goes so that the exposure of communication needs
// no pass over interval lists afterwards. compute_before(t), the time before t during which at
// least one compute op of the class ran, is compute_union plus the open stretch since
// compute_since; the compute overlap of any [s, e) is compute_before(e) - compute_before(s), so a
// collective (or a stretch of communication) records compute_before at its start and subtracts
// at its end.
struct ClassClock {
  std::int32_t computing = 0;           // compute ops running
  SimTime compute_since;                // when `computing` last became positive
  std::int64_t compute_union = 0;       // ps with computing > 0 before compute_since
  SimDuration compute;                  // sum of compute op durations
  SimTime comm_since;                   // when the class's collectives in flight last became > 0
  std::int64_t comm_compute_start = 0;  // compute_before(comm_since)
  SimDuration communication;            // union of collective intervals so far
  SimDuration exposed;                  // that union minus compute
};

// One collective in flight: every class of group type `type` runs it on stream `stream`. Its
// transfer (the bandwidth term, `remaining` ps at the full link rate) progresses at 1/share of
// the rate, where share is the largest count of transferring flows on `link` of any member
// class; then its latency term passes unshared.
struct Flow {
  std::int32_t type = 0;
  std::int32_t stream = 0;
  std::int32_t link = 0;  // 0 intra-node, 1 inter-node
  std::int64_t remaining = 0;
  std::int64_t share = 0;  // 0: not transferring
  SimTime last;
  SimDuration latency;
  std::uint32_t generation = 0;
};

// What the loop needs of one op, stored at the op's position in its program's stream lists (so a
// stream walks a contiguous array instead of the 72-byte Ops of its program): 16 bytes, as the
// loop is bound by the loads of its per-op data. The op's index in its program, needed only for
// traces and messages, sits in a parallel array.
struct Step {
  OpKind kind = OpKind::kRecord;
  StreamKind stream = StreamKind::kCompute;  // the op's own stream (also without overlap)
  std::uint8_t buffer_class = 0;             // alloc/free, clamped to [0, kNumBufferClasses)
  std::int32_t arg = 0;    // alloc/free: buffer; record/wait: event; collectives: index into colls_
  std::int64_t value = 0;  // alloc: size in bytes; compute: base duration in ps
};
static_assert(sizeof(Step) == 16);

// The costs of one collective op (at its position in the stream lists).
struct CollStep {
  SimDuration latency;   // unshared
  SimDuration transfer;  // bandwidth term at the full link rate
  double bus_bytes = 0;
  std::int32_t axis = 0;
  std::uint8_t link = 0;  // 1 inter-node, 0 intra-node
};

// d * factor rounded up; d itself for factor 1.
SimDuration scaled(SimDuration d, double factor) {
  if (factor == 1.0) {
    return d;
  }
  return SimDuration::ps(static_cast<std::int64_t>(std::ceil(static_cast<double>(d.ps()) * factor)));
}

class Simulator {
 public:
  Simulator(const Schedule& schedule, const Hardware& hardware, const SimOptions& options,
            const SimClasses& classes)
      : schedule_(schedule), hardware_(hardware), options_(options), classes_(classes) {}

  // Validates the schedule and computes everything that does not change between runs.
  Status prepare();
  // One step from the prepared state; prepare() must have succeeded. Repeatable.
  Expected<SimResult> run();

 private:
  void reset();
  void advance(std::uint32_t g);
  void arrive(std::uint32_t g, std::int32_t axis);
  void start_collective(std::int32_t type, std::int32_t stream);
  void start_compute(std::uint32_t g, const Step& step);
  void rescale_compute(std::uint32_t g, bool slow);
  void comm_begin(std::int32_t cls);
  void comm_end(std::int32_t cls);
  void reshare(std::int32_t link);
  void on_flow_done(std::int32_t f);
  void finish_collective(std::int32_t f);
  void on_op_done(std::uint32_t g);
  // The error for the alloc/free at `pos` that finds its buffer in the wrong state (cold path).
  [[gnu::noinline, gnu::cold]] Error memory_error(std::int32_t cls, std::size_t pos) const;
  void fail(Error error) {
    if (!error_) {
      error_ = std::move(error);
    }
  }
  std::string describe_op(std::int32_t cls, std::int32_t op_index) const;
  Error deadlock_error() const;
  SimResult finish();

  std::int32_t program_of(std::int32_t cls) const {
    return classes_.program[static_cast<std::size_t>(cls)];
  }
  const Op& op_at(std::int32_t cls, std::int32_t i) const {
    return schedule_.programs()[static_cast<std::size_t>(program_of(cls))]
        .ops[static_cast<std::size_t>(i)];
  }
  // The stream list (per program) that stream g of its class walks.
  std::size_t list_of(std::uint32_t g) const {
    return static_cast<std::size_t>(program_of(static_cast<std::int32_t>(g / kNumStreams))) *
               kNumStreams +
           g % kNumStreams;
  }
  const Step& current(std::uint32_t g) const { return steps_[static_cast<std::size_t>(cursor_[g])]; }
  std::int32_t current_op(std::uint32_t g) const {
    return step_op_[static_cast<std::size_t>(cursor_[g])];
  }
  // Compute time of class c before now_ (see ClassClock).
  std::int64_t compute_before(std::size_t c) const {
    const ClassClock& k = clock_[c];
    return k.compute_union + (k.computing > 0 ? (now_ - k.compute_since).ps() : 0);
  }
  double compute_factor(std::int32_t cls) const {
    return classes_.straggler[static_cast<std::size_t>(cls)] != 0
               ? options_.straggler.compute_factor
               : 1.0;
  }
  double link_factor(std::int32_t cls) const {
    return classes_.straggler[static_cast<std::size_t>(cls)] != 0 ? options_.straggler.link_factor
                                                                  : 1.0;
  }

  const Schedule& schedule_;
  const Hardware& hardware_;
  const SimOptions& options_;
  const SimClasses& classes_;
  std::int32_t num_classes_ = 0;
  std::vector<AxisLink> links_;
  // Options read in the loop, copied here so that they load without the indirection.
  bool sm_slowdown_ = false;
  bool contention_ = true;
  bool record_trace_ = false;
  bool record_ops_ = false;

  // Per program.
  std::vector<std::int64_t> op_base_;
  // Per position in the stream lists (program by program, stream by stream; cursor_ walks them).
  std::vector<Step> steps_;
  std::vector<std::int32_t> step_op_;  // index into the program's ops
  std::vector<CollStep> colls_;        // the collectives' costs, in position order
  // Per program stream list p * kNumStreams + s: its positions [list_begin_, list_end_).
  std::vector<std::int64_t> list_begin_, list_end_;
  // Per class.
  std::vector<std::int64_t> event_base_, buffer_base_;
  std::vector<std::int32_t> comm_active_;  // collectives in flight
  std::vector<ClassClock> clock_;
  std::vector<std::int32_t> link_load_;  // [class * 2 + link]: transferring flows
  // Per stream g = c * kNumStreams + s.
  std::vector<std::int64_t> cursor_;
  std::vector<std::int64_t> cursor_end_;  // the end of the stream's list (list_end_ of list_of)
  std::vector<StreamState> state_;
  std::vector<std::int64_t> coll_pos_;
  std::vector<SimTime> op_start_, stream_end_time_;
  std::vector<std::int64_t> coll_compute_start_;  // compute_before(op start) of a collective
  std::vector<std::uint32_t> generation_;
  std::vector<std::int64_t> work_left_;  // running compute op: ps of work at full speed
  std::vector<SimTime> work_since_;
  std::vector<char> work_slow_;
  // Per group type and stream (type * kNumStreams + s): arrivals at the pending collective.
  std::vector<std::int32_t> pending_count_;
  std::vector<std::int64_t> pending_k_;
  // Flows.
  std::vector<Flow> flows_;
  std::vector<std::int32_t> free_flows_;
  std::vector<std::int32_t> transferring_;  // flows with share > 0, in start order
  // Per event (class base + event id): bit 0 once recorded; bit 1 + s while stream s of the class
  // waits for it (kNumStreams <= 7).
  std::vector<std::uint8_t> event_state_;
  // Per buffer (class base + buffer id): its size (-1 when not allocated) and allocator block.
  struct LiveBuffer {
    std::int64_t bytes = -1;
    CachingAllocator::Handle block;
  };
  std::vector<LiveBuffer> buffers_;

  // Per class: the state at the start of a run (resident buffers allocated), and the capacities
  // to reserve for its interval lists.
  std::vector<MemoryResult> init_memory_;
  std::vector<CachingAllocator> init_allocator_;
  std::vector<std::size_t> comm_reserve_;
  std::size_t trace_reserve_ = 0;

  // Memory per class.
  std::vector<std::array<std::int64_t, kNumBufferClasses>> mem_by_class_;
  std::vector<std::int64_t> mem_total_;
  std::vector<MemoryResult> memory_;
  std::vector<CachingAllocator> allocator_;

  std::vector<std::vector<CommInterval>> comm_intervals_;

  EventQueue queue_;
  SimTime now_;
  std::int64_t events_ = 0;
  std::optional<Error> error_;
  std::vector<TraceRecord> trace_;
  std::vector<MemorySample> memory_trace_;
  std::vector<OpRecord> op_log_;
};

Status Simulator::prepare() {
  const auto& programs = schedule_.programs();
  num_classes_ = classes_.num_classes();
  if (programs.empty() || num_classes_ == 0) {
    return Error(ErrorCode::kFailedPrecondition, "schedule has no rank programs");
  }
  links_ = axis_links(schedule_.mesh(), hardware_);
  sm_slowdown_ = options_.cost.sm_slowdown != 1.0;
  contention_ = options_.contention;
  record_trace_ = options_.record_trace;
  record_ops_ = options_.record_ops;
  const std::size_t np = programs.size();
  const std::size_t nc = static_cast<std::size_t>(num_classes_);
  op_base_.resize(np + 1);
  for (std::size_t p = 0; p < np; ++p) {
    op_base_[p + 1] = op_base_[p] + static_cast<std::int64_t>(programs[p].ops.size());
  }
  steps_.assign(static_cast<std::size_t>(op_base_[np]), Step());
  step_op_.assign(static_cast<std::size_t>(op_base_[np]), 0);
  colls_.clear();
  std::int64_t filled = 0;
  list_begin_.resize(np * kNumStreams);
  list_end_.resize(np * kNumStreams);
  // Collectives per program, to reserve the collective lists.
  std::vector<std::size_t> collectives(np, 0);
  // Collective sequence (kind, axis) per stream of program 0, to check the others against.
  std::array<std::vector<std::pair<OpKind, std::int32_t>>, kNumStreams> reference;
  const auto& infos = schedule_.collectives();
  struct CachedCost {
    bool valid = false;
    OpKind kind = OpKind::kAllGather;
    DType dtype = DType::kBf16;
    std::int32_t axis = 0;
    std::int64_t elements = 0;
    CollectiveCost cost;
  };
  std::vector<CachedCost> cost_cache(infos.size());
  const std::int64_t ndim = schedule_.mesh().ndim();
  for (std::size_t p = 0; p < np; ++p) {
    const RankProgram& prog = programs[p];
    const std::int32_t cls = static_cast<std::int32_t>(p);  // for messages: the program's id
    std::array<std::vector<std::pair<OpKind, std::int32_t>>, kNumStreams> seq;
    std::array<std::int64_t, kNumStreams> count{};
    for (const Op& op : prog.ops) {
      if (static_cast<int>(op.stream) >= kNumStreams) {
        return Error(ErrorCode::kOutOfRange, str_cat("an op of program ", cls, " names stream ",
                                                     static_cast<int>(op.stream), " outside [0, ",
                                                     kNumStreams, ")"));
      }
      ++count[options_.overlap ? static_cast<std::size_t>(op.stream) : 0];
      collectives[p] += is_collective(op.kind) ? 1u : 0u;
    }
    std::array<std::int64_t, kNumStreams> fill{};
    for (std::size_t s = 0; s < kNumStreams; ++s) {
      const std::size_t list = p * kNumStreams + s;
      list_begin_[list] = s == 0 ? filled : list_end_[list - 1];
      list_end_[list] = list_begin_[list] + count[s];
      fill[s] = list_begin_[list];
    }
    filled = list_end_[p * kNumStreams + kNumStreams - 1];
    for (std::size_t i = 0; i < prog.ops.size(); ++i) {
      const Op& op = prog.ops[i];
      // Without overlap every op runs on one serial list (stream 0) in issue order.
      const std::size_t stream = options_.overlap ? static_cast<std::size_t>(op.stream) : 0;
      const std::int32_t idx = static_cast<std::int32_t>(i);
      const std::size_t f = static_cast<std::size_t>(fill[stream]++);
      Step& step = steps_[f];
      step.kind = op.kind;
      step.stream = op.stream;
      step_op_[f] = idx;
      if (is_collective(op.kind)) {
        if (op.axis < 0 || op.axis >= ndim) {
          return Error(ErrorCode::kOutOfRange,
                       str_cat("op ", idx, " (", to_string(op.kind), ") of program ", cls,
                               " names mesh axis ", op.axis, " outside [0, ", ndim, ")"));
        }
        CollectiveCost cost;
        if (op.collective >= 0 && static_cast<std::size_t>(op.collective) < infos.size()) {
          // Every program (class) issues the same collective: its cost, linear in the group
          // size for uneven members, is computed once per distinct (collective, kind, size).
          CachedCost& cached = cost_cache[static_cast<std::size_t>(op.collective)];
          if (!cached.valid || cached.kind != op.kind || cached.elements != op.elements ||
              cached.dtype != op.dtype || cached.axis != op.axis) {
            cached = CachedCost{true, op.kind, op.dtype, op.axis, op.elements,
                                uneven_collective_cost(
                                    op.kind, op.elements,
                                    infos[static_cast<std::size_t>(op.collective)].member_elements,
                                    op.dtype, links_[static_cast<std::size_t>(op.axis)],
                                    options_.cost)};
          }
          cost = cached.cost;
        } else {
          cost = collective_cost(op.kind, op.elements, op.dtype,
                                 links_[static_cast<std::size_t>(op.axis)], options_.cost);
        }
        step.arg = static_cast<std::int32_t>(colls_.size());
        colls_.push_back(CollStep{
            cost.latency, cost.transfer, cost.bus_bytes, op.axis,
            static_cast<std::uint8_t>(links_[static_cast<std::size_t>(op.axis)].inter_node ? 1 : 0)});
        seq[stream].emplace_back(op.kind, op.axis);
      } else if (is_compute(op.kind)) {
        step.value = compute_cost(op, hardware_, options_.cost).ps();
      } else if (op.kind == OpKind::kRecord || op.kind == OpKind::kWait) {
        if (op.event < 0 || op.event >= prog.num_events) {
          return Error(ErrorCode::kOutOfRange,
                       str_cat("op ", idx, " (", to_string(op.kind), ") of program ", cls,
                               " names event ", op.event, " outside [0, ", prog.num_events, ")"));
        }
        step.arg = op.event;
      } else if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) {
        if (op.buffer < 0 || op.buffer >= prog.num_buffers) {
          return Error(ErrorCode::kOutOfRange,
                       str_cat("op ", idx, " (", to_string(op.kind), ") of program ", cls,
                               " names buffer ", op.buffer, " outside [0, ", prog.num_buffers,
                               ")"));
        }
        step.arg = op.buffer;
        step.value = op.bytes;
        const auto bc = static_cast<std::size_t>(op.buffer_class);
        step.buffer_class = static_cast<std::uint8_t>(bc < kNumBufferClasses ? bc : 0);
      }
    }
    if (p == 0) {
      reference = seq;
    } else {
      for (std::size_t s = 0; s < kNumStreams; ++s) {
        if (seq[s] != reference[s]) {
          return Error(ErrorCode::kFailedPrecondition,
                       str_cat("class ", p, " (rank ", prog.representative_rank, ") issues ",
                               seq[s].size(), " collectives on stream ",
                               to_string(static_cast<StreamKind>(s)),
                               " that differ from class 0's ", reference[s].size(),
                               " in kind or axis"));
        }
      }
    }
  }
  event_base_.resize(nc + 1);
  buffer_base_.resize(nc + 1);
  for (std::size_t c = 0; c < nc; ++c) {
    const RankProgram& prog = programs[static_cast<std::size_t>(classes_.program[c])];
    event_base_[c + 1] = event_base_[c] + std::max(prog.num_events, 0);
    buffer_base_[c + 1] = buffer_base_[c] + std::max(prog.num_buffers, 0);
  }
  // The state every run starts from: resident buffers allocated, per class.
  init_memory_.assign(nc, MemoryResult());
  init_allocator_.assign(nc, CachingAllocator());
  comm_reserve_.assign(nc, 0);
  trace_reserve_ = 0;
  for (std::size_t c = 0; c < nc; ++c) {
    const std::size_t p = static_cast<std::size_t>(classes_.program[c]);
    MemoryResult& m = init_memory_[c];
    m.capacity_bytes = hardware_.memory_bytes();
    for (const ResidentBuffer& b : programs[p].resident) {
      m.resident_by_class[static_cast<std::size_t>(b.buffer_class)] += b.bytes;
      m.resident_bytes += b.bytes;
      init_allocator_[c].allocate(static_cast<int>(StreamKind::kCompute), b.bytes);
    }
    m.high_water_by_class = m.resident_by_class;
    m.peak_bytes = m.resident_bytes;
    m.peak_by_class = m.resident_by_class;
    m.peak_reserved_bytes = init_allocator_[c].reserved_bytes();
    m.fits = m.resident_bytes <= m.capacity_bytes;
    m.reserved_fits = m.peak_reserved_bytes <= m.capacity_bytes;
    comm_reserve_[c] = collectives[p];
    trace_reserve_ += programs[p].ops.size();
  }
  return ok_status();
}

void Simulator::reset() {
  const std::size_t nc = static_cast<std::size_t>(num_classes_);
  const std::size_t ns = nc * kNumStreams;
  cursor_.resize(ns);
  cursor_end_.resize(ns);
  for (std::uint32_t g = 0; g < ns; ++g) {
    cursor_[g] = list_begin_[list_of(g)];
    cursor_end_[g] = list_end_[list_of(g)];
  }
  state_.assign(ns, StreamState::kReady);
  coll_pos_.assign(ns, 0);
  op_start_.assign(ns, SimTime());
  coll_compute_start_.assign(ns, 0);
  stream_end_time_.assign(ns, SimTime());
  generation_.assign(ns, 0);
  work_left_.assign(ns, 0);
  work_since_.assign(ns, SimTime());
  work_slow_.assign(ns, 0);
  comm_active_.assign(nc, 0);
  clock_.assign(nc, ClassClock());
  link_load_.assign(nc * 2, 0);
  pending_count_.assign(classes_.types.size() * kNumStreams, 0);
  pending_k_.assign(classes_.types.size() * kNumStreams, -1);
  flows_.clear();
  free_flows_.clear();
  transferring_.clear();
  event_state_.assign(static_cast<std::size_t>(event_base_[nc]), 0);
  buffers_.assign(static_cast<std::size_t>(buffer_base_[nc]), LiveBuffer());
  // Copy-assignment keeps the capacity of the previous run's vectors.
  memory_ = init_memory_;
  allocator_ = init_allocator_;
  mem_by_class_.resize(nc);
  mem_total_.resize(nc);
  comm_intervals_.resize(nc);
  for (std::size_t c = 0; c < nc; ++c) {
    mem_by_class_[c] = init_memory_[c].resident_by_class;
    mem_total_[c] = init_memory_[c].resident_bytes;
    comm_intervals_[c].clear();
    comm_intervals_[c].reserve(comm_reserve_[c]);
  }
  trace_.clear();
  memory_trace_.clear();
  op_log_.clear();
  if (options_.record_trace) {
    trace_.reserve(trace_reserve_);
    memory_trace_.reserve(trace_reserve_);
  }
  queue_.clear();
  queue_.reserve(2 * ns + 64);
  now_ = SimTime();
  events_ = 0;
  error_.reset();
}

std::string Simulator::describe_op(std::int32_t cls, std::int32_t op_index) const {
  const Op& op = op_at(cls, op_index);
  std::string text = str_cat(op_index, " (", to_string(op.kind));
  if (op.unit >= 0 && static_cast<std::size_t>(op.unit) < schedule_.unit_names().size()) {
    text += str_cat(", unit '", schedule_.unit_names()[static_cast<std::size_t>(op.unit)], "'");
  } else if (op.unit >= 0) {
    text += str_cat(", unit ", op.unit);
  }
  if (op.microbatch >= 0) {
    text += str_cat(", microbatch ", op.microbatch);
  }
  return text + ")";
}

Error Simulator::memory_error(std::int32_t cls, std::size_t pos) const {
  const Step& step = steps_[pos];
  if (step.kind == OpKind::kAlloc) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("class ", cls, " allocates buffer ", step.arg, " twice, at op ",
                         describe_op(cls, step_op_[pos])));
  }
  return Error(ErrorCode::kFailedPrecondition,
               str_cat("class ", cls, " frees buffer ", step.arg, " that is not allocated, at op ",
                       describe_op(cls, step_op_[pos])));
}

[[gnu::always_inline]] inline void Simulator::advance(std::uint32_t g) {
  if (error_) [[unlikely]] {
    return;
  }
  const std::int32_t cls = static_cast<std::int32_t>(g / kNumStreams);
  const std::size_t c = static_cast<std::size_t>(cls);
  const std::size_t end = static_cast<std::size_t>(cursor_end_[g]);
  // Everything the loop touches is loaded once here: none of these vectors is resized while a
  // stream advances, but the allocator calls would otherwise force a reload on every op.
  const Step* const steps = steps_.data();
  std::uint8_t* const event_state = event_state_.data() + event_base_[c];
  LiveBuffer* const buffers = buffers_.data() + buffer_base_[c];
  std::array<std::int64_t, kNumBufferClasses>& by_class = mem_by_class_[c];
  std::int64_t& total = mem_total_[c];
  MemoryResult& m = memory_[c];
  CachingAllocator& allocator = allocator_[c];
  const bool record_ops = record_ops_;
  const bool record_trace = record_trace_;
  // The cursor lives in a local while instant ops run, and is stored before anything that reads
  // it (collectives read every member's cursor).
  std::size_t pos = static_cast<std::size_t>(cursor_[g]);
  // A stream walks its list forward but sparsely in time, so its next lines are usually out of
  // cache by the time it returns: fetch them now, while this call's ops run.
  __builtin_prefetch(steps + pos + 4);
  __builtin_prefetch(steps + pos + 8);
  for (; pos < end; ++pos) {
    const Step& step = steps[pos];
    switch (step.kind) {
      case OpKind::kAlloc: {
        LiveBuffer& buffer = buffers[step.arg];
        if (buffer.bytes >= 0) [[unlikely]] {
          fail(memory_error(cls, pos));
          cursor_[g] = static_cast<std::int64_t>(pos);
          return;
        }
        // The free op names the buffer class too, so only the size is remembered.
        const std::int64_t delta = step.value;
        buffer.bytes = delta;
        buffer.block = allocator.allocate(static_cast<int>(step.stream), delta);
        const std::size_t bc = step.buffer_class;
        by_class[bc] += delta;
        total += delta;
        m.high_water_by_class[bc] = std::max(m.high_water_by_class[bc], by_class[bc]);
        if (record_ops) {
          op_log_.push_back(OpRecord{cls, step.stream, step_op_[pos], now_, now_, delta});
        }
        if (total > m.peak_bytes) {
          m.peak_bytes = total;
          m.peak_by_class = by_class;
          m.peak_time = now_;
          m.peak_op = step_op_[pos];
          // The first overflow is a new peak: an earlier peak above the capacity already cleared
          // fits. When the resident buffers alone overflow, fits is false and no op is blamed.
          if (total > m.capacity_bytes && m.fits) {
            m.fits = false;
            m.first_overflow_op = step_op_[pos];
            m.first_overflow_time = now_;
          }
        }
        const std::int64_t reserved = allocator.reserved_bytes();
        if (reserved > m.peak_reserved_bytes) {
          m.peak_reserved_bytes = reserved;
          if (reserved > m.capacity_bytes && m.reserved_fits) {
            m.reserved_fits = false;
            m.first_reserved_overflow_op = step_op_[pos];
          }
        }
        if (record_trace) {
          memory_trace_.push_back(MemorySample{cls, now_, total});
        }
        break;
      }
      case OpKind::kFree: {
        // A free lowers the totals and reserves nothing, so it moves no high-water mark, peak or
        // overflow: those only change at an alloc.
        LiveBuffer& buffer = buffers[step.arg];
        if (buffer.bytes < 0) [[unlikely]] {
          fail(memory_error(cls, pos));
          cursor_[g] = static_cast<std::int64_t>(pos);
          return;
        }
        const std::int64_t delta = -buffer.bytes;
        buffer.bytes = -1;
        allocator.release(buffer.block);
        by_class[step.buffer_class] += delta;
        total += delta;
        if (record_ops) {
          op_log_.push_back(OpRecord{cls, step.stream, step_op_[pos], now_, now_, delta});
        }
        if (record_trace) {
          memory_trace_.push_back(MemorySample{cls, now_, total});
        }
        break;
      }
      case OpKind::kRecord: {
        const unsigned waiting = event_state[step.arg] >> 1;
        event_state[step.arg] = 1;
        if (record_ops) {
          op_log_.push_back(OpRecord{cls, step.stream, step_op_[pos], now_, now_, 0});
        }
        // Most records find no stream of their class waiting; the others wake them in stream
        // order.
        for (unsigned w = waiting; w != 0; w &= w - 1) {
          const std::uint32_t other = static_cast<std::uint32_t>(c * kNumStreams) +
                                      static_cast<std::uint32_t>(std::countr_zero(w));
          state_[other] = StreamState::kReady;
          queue_.push(now_, EventKind::kStreamReady, other, generation_[other]);
        }
        break;
      }
      case OpKind::kWait:
        if ((event_state[step.arg] & 1) == 0) {
          cursor_[g] = static_cast<std::int64_t>(pos);
          state_[g] = StreamState::kBlockedEvent;
          event_state[step.arg] |= static_cast<std::uint8_t>(2u << (g % kNumStreams));
          return;
        }
        if (record_ops) {
          op_log_.push_back(OpRecord{cls, step.stream, step_op_[pos], now_, now_, 0});
        }
        break;
      case OpKind::kAllGather:
      case OpKind::kReduceScatter:
      case OpKind::kAllReduce:
        cursor_[g] = static_cast<std::int64_t>(pos);
        arrive(g, colls_[static_cast<std::size_t>(step.arg)].axis);
        return;
      default:
        cursor_[g] = static_cast<std::int64_t>(pos);
        start_compute(g, step);
        return;
    }
  }
  cursor_[g] = static_cast<std::int64_t>(pos);
  state_[g] = StreamState::kDone;
  stream_end_time_[g] = now_;
}

void Simulator::start_compute(std::uint32_t g, const Step& step) {
  const std::int32_t cls = static_cast<std::int32_t>(g / kNumStreams);
  const SimDuration d = scaled(SimDuration::ps(step.value), compute_factor(cls));
  state_[g] = StreamState::kBusy;
  op_start_[g] = now_;
  if (ClassClock& k = clock_[static_cast<std::size_t>(cls)]; k.computing++ == 0) {
    k.compute_since = now_;
  }
  work_left_[g] = d.ps();
  work_since_[g] = now_;
  const bool slow = sm_slowdown_ && comm_active_[static_cast<std::size_t>(cls)] > 0;
  work_slow_[g] = slow ? 1 : 0;
  queue_.push(now_ + (slow ? scaled(d, options_.cost.sm_slowdown) : d), EventKind::kOpDone, g,
              generation_[g]);
}

void Simulator::rescale_compute(std::uint32_t g, bool slow) {
  const double factor = options_.cost.sm_slowdown;
  const std::int64_t elapsed = (now_ - work_since_[g]).ps();
  const std::int64_t done =
      work_slow_[g] != 0
          ? static_cast<std::int64_t>(std::floor(static_cast<double>(elapsed) / factor))
          : elapsed;
  work_left_[g] = std::max<std::int64_t>(0, work_left_[g] - done);
  work_since_[g] = now_;
  work_slow_[g] = slow ? 1 : 0;
  const SimDuration left = SimDuration::ps(work_left_[g]);
  queue_.push(now_ + (slow ? scaled(left, factor) : left), EventKind::kOpDone, g, ++generation_[g]);
}

void Simulator::comm_begin(std::int32_t cls) {
  const std::size_t c = static_cast<std::size_t>(cls);
  if (comm_active_[c]++ != 0) {
    return;
  }
  ClassClock& k = clock_[c];
  k.comm_since = now_;
  k.comm_compute_start = compute_before(c);
  if (!sm_slowdown_) {
    return;
  }
  for (std::uint32_t s = 0; s < kNumStreams; ++s) {
    const std::uint32_t g = static_cast<std::uint32_t>(c * kNumStreams) + s;
    if (state_[g] == StreamState::kBusy && !is_collective(current(g).kind)) {
      rescale_compute(g, /*slow=*/true);
    }
  }
}

void Simulator::comm_end(std::int32_t cls) {
  const std::size_t c = static_cast<std::size_t>(cls);
  if (--comm_active_[c] != 0) {
    return;
  }
  ClassClock& k = clock_[c];
  const SimDuration stretch = now_ - k.comm_since;
  k.communication += stretch;
  k.exposed += stretch - SimDuration::ps(compute_before(c) - k.comm_compute_start);
  if (!sm_slowdown_) {
    return;
  }
  for (std::uint32_t s = 0; s < kNumStreams; ++s) {
    const std::uint32_t g = static_cast<std::uint32_t>(c * kNumStreams) + s;
    if (state_[g] == StreamState::kBusy && !is_collective(current(g).kind)) {
      rescale_compute(g, /*slow=*/false);
    }
  }
}

void Simulator::arrive(std::uint32_t g, std::int32_t axis) {
  const std::int32_t cls = static_cast<std::int32_t>(g / kNumStreams);
  const std::int32_t stream = static_cast<std::int32_t>(g % kNumStreams);
  state_[g] = StreamState::kBlockedCollective;
  const std::int32_t type = classes_.group_type[static_cast<std::size_t>(cls) *
                                                    static_cast<std::size_t>(classes_.ndim) +
                                                static_cast<std::size_t>(axis)];
  const std::size_t slot = static_cast<std::size_t>(type) * kNumStreams +
                           static_cast<std::size_t>(stream);
  // Every class of the type must reach collective k before any passes it, so a type has at
  // most one pending collective per stream.
  if (pending_count_[slot] == 0) {
    pending_k_[slot] = coll_pos_[g];
  } else if (pending_k_[slot] != coll_pos_[g]) {
    fail(Error(ErrorCode::kInternal,
               str_cat("class ", cls, " reaches collective #", coll_pos_[g], " of stream ",
                       to_string(static_cast<StreamKind>(stream)), " while its group waits in #",
                       pending_k_[slot])));
    return;
  }
  if (++pending_count_[slot] ==
      static_cast<std::int32_t>(classes_.types[static_cast<std::size_t>(type)].size())) {
    pending_count_[slot] = 0;
    start_collective(type, stream);
  }
}

void Simulator::start_collective(std::int32_t type, std::int32_t stream) {
  const auto& members = classes_.types[static_cast<std::size_t>(type)];
  SimDuration transfer;
  SimDuration latency;
  std::int32_t link = 0;
  for (std::int32_t m : members) {
    const std::uint32_t gm = static_cast<std::uint32_t>(m) * kNumStreams +
                             static_cast<std::uint32_t>(stream);
    const CollStep& coll =
        colls_[static_cast<std::size_t>(steps_[static_cast<std::size_t>(cursor_[gm])].arg)];
    state_[gm] = StreamState::kBusy;
    op_start_[gm] = now_;
    coll_compute_start_[gm] = compute_before(static_cast<std::size_t>(m));
    // The ring runs at the pace of its slowest member's link.
    transfer = std::max(transfer, scaled(coll.transfer, link_factor(m)));
    latency = std::max(latency, coll.latency);
    link = coll.link;
    comm_begin(m);
  }
  std::int32_t id = 0;
  if (free_flows_.empty()) {
    id = static_cast<std::int32_t>(flows_.size());
    flows_.emplace_back();
  } else {
    id = free_flows_.back();
    free_flows_.pop_back();
  }
  Flow& flow = flows_[static_cast<std::size_t>(id)];
  flow.type = type;
  flow.stream = stream;
  flow.link = link;
  flow.remaining = transfer.ps();
  flow.share = 0;
  flow.last = now_;
  flow.latency = latency;
  ++flow.generation;
  if (!contention_ || transfer.ps() == 0) {
    queue_.push(now_ + transfer, EventKind::kFlowDone, static_cast<std::uint32_t>(id),
                flow.generation);
    return;
  }
  for (std::int32_t m : members) {
    ++link_load_[static_cast<std::size_t>(m) * 2 + static_cast<std::size_t>(link)];
  }
  transferring_.push_back(id);
  reshare(link);
}

void Simulator::reshare(std::int32_t link) {
  for (std::int32_t id : transferring_) {
    Flow& flow = flows_[static_cast<std::size_t>(id)];
    if (flow.link != link) {
      continue;
    }
    std::int64_t share = 1;
    for (std::int32_t m : classes_.types[static_cast<std::size_t>(flow.type)]) {
      share = std::max<std::int64_t>(
          share, link_load_[static_cast<std::size_t>(m) * 2 + static_cast<std::size_t>(link)]);
    }
    if (share == flow.share) {
      continue;
    }
    if (flow.share > 0) {
      // Progress so far at the old share (rounded down: never early).
      flow.remaining = std::max<std::int64_t>(0, flow.remaining - (now_ - flow.last).ps() / flow.share);
    }
    flow.last = now_;
    flow.share = share;
    queue_.push(now_ + SimDuration::ps(flow.remaining * share), EventKind::kFlowDone,
                static_cast<std::uint32_t>(id), ++flow.generation);
  }
}

void Simulator::on_flow_done(std::int32_t id) {
  Flow& flow = flows_[static_cast<std::size_t>(id)];
  if (flow.share > 0) {
    flow.share = 0;
    transferring_.erase(std::find(transferring_.begin(), transferring_.end(), id));
    for (std::int32_t m : classes_.types[static_cast<std::size_t>(flow.type)]) {
      --link_load_[static_cast<std::size_t>(m) * 2 + static_cast<std::size_t>(flow.link)];
    }
    reshare(flow.link);
  }
  Flow& f = flows_[static_cast<std::size_t>(id)];
  if (f.latency.ps() > 0) {
    queue_.push(now_ + f.latency, EventKind::kCollectiveDone, static_cast<std::uint32_t>(id),
                ++f.generation);
    return;
  }
  finish_collective(id);
}

void Simulator::finish_collective(std::int32_t id) {
  const Flow flow = flows_[static_cast<std::size_t>(id)];
  ++flows_[static_cast<std::size_t>(id)].generation;
  free_flows_.push_back(id);
  for (std::int32_t m : classes_.types[static_cast<std::size_t>(flow.type)]) {
    comm_end(m);
  }
  for (std::int32_t m : classes_.types[static_cast<std::size_t>(flow.type)]) {
    on_op_done(static_cast<std::uint32_t>(m) * kNumStreams + static_cast<std::uint32_t>(flow.stream));
  }
}

void Simulator::on_op_done(std::uint32_t g) {
  const std::int32_t cls = static_cast<std::int32_t>(g / kNumStreams);
  const std::size_t c = static_cast<std::size_t>(cls);
  const std::size_t pos = static_cast<std::size_t>(cursor_[g]);
  const Step& step = steps_[pos];
  if (is_collective(step.kind)) {
    const SimDuration exposed =
        (now_ - op_start_[g]) - SimDuration::ps(compute_before(c) - coll_compute_start_[g]);
    comm_intervals_[c].push_back(
        CommInterval{op_start_[g], now_, exposed, step.arg, step.stream, step.kind});
    ++coll_pos_[g];
  } else {
    ClassClock& k = clock_[c];
    k.compute += now_ - op_start_[g];
    if (--k.computing == 0) {
      k.compute_union += (now_ - k.compute_since).ps();
    }
  }
  if (record_trace_) {
    trace_.push_back(TraceRecord{cls, step.stream, step_op_[pos], op_start_[g], now_});
  }
  if (record_ops_) {
    op_log_.push_back(OpRecord{cls, step.stream, step_op_[pos], op_start_[g], now_, 0});
  }
  ++cursor_[g];
  state_[g] = StreamState::kReady;
  advance(g);
}

Error Simulator::deadlock_error() const {
  std::ostringstream os;
  os << "deadlock at t=" << now_.us() << " us: ";
  bool first = true;
  for (std::size_t g = 0; g < state_.size(); ++g) {
    if (state_[g] == StreamState::kDone) {
      continue;
    }
    const std::int32_t cls = static_cast<std::int32_t>(g / kNumStreams);
    const std::int32_t i = current_op(static_cast<std::uint32_t>(g));
    const Op& op = op_at(cls, i);
    os << (first ? "" : "; ") << "class " << cls << " (rank "
       << classes_.representative[static_cast<std::size_t>(cls)] << ") stream "
       << to_string(static_cast<StreamKind>(g % kNumStreams)) << " blocked at op "
       << describe_op(cls, i);
    first = false;
    if (state_[g] == StreamState::kBlockedEvent) {
      os << " waiting for event " << op.event << ", which is never recorded";
    } else if (state_[g] == StreamState::kBlockedCollective) {
      os << " in collective #" << coll_pos_[g] << " of its stream on axis '"
         << schedule_.mesh().axis_name(op.axis) << "', never reached by class";
      const std::int32_t type =
          classes_.group_type[static_cast<std::size_t>(cls) * static_cast<std::size_t>(classes_.ndim) +
                              static_cast<std::size_t>(op.axis)];
      for (std::int32_t q : classes_.types[static_cast<std::size_t>(type)]) {
        const std::size_t qg = static_cast<std::size_t>(q) * kNumStreams + g % kNumStreams;
        if (state_[qg] != StreamState::kBlockedCollective || coll_pos_[qg] != coll_pos_[g]) {
          os << " " << q;
        }
      }
    }
  }
  return Error(ErrorCode::kFailedPrecondition, os.str());
}

SimResult Simulator::finish() {
  SimResult result;
  result.links = links_;
  result.events = events_;
  result.baseline_step_time = SimTime();
  std::vector<CollectiveKindStat> kinds;
  // Collective axes were checked against the mesh in prepare().
  const std::size_t ndim = static_cast<std::size_t>(schedule_.mesh().ndim());
  constexpr std::size_t kNumOpKinds = static_cast<std::size_t>(OpKind::kWait) + 1;
  std::vector<std::int32_t> comm_slot(kNumStreams * ndim);       // per class
  std::vector<std::int32_t> kind_slots(kNumOpKinds * ndim, -1);  // over all classes
  for (std::size_t c = 0; c < static_cast<std::size_t>(num_classes_); ++c) {
    ClassResult cr;
    cr.representative_rank = classes_.representative[c];
    cr.num_ranks = classes_.num_ranks[c];
    cr.program = classes_.program[c];
    cr.straggler = classes_.straggler[c] != 0;
    if (cr.straggler) {
      result.straggler_ranks += cr.num_ranks;
    }
    for (std::size_t s = 0; s < kNumStreams; ++s) {
      cr.end = std::max(cr.end, stream_end_time_[c * kNumStreams + s]);
    }
    const ClassClock& clock = clock_[c];
    cr.compute = clock.compute;
    // The union of the class's communication and its part outside compute were accumulated as
    // the run went (ClassClock), as was each collective's exposure.
    cr.communication = clock.communication;
    cr.exposed_communication = clock.exposed;
    // The stat of a (stream, axis) and of a (kind, axis) is found through a table indexed by
    // both (-1: none).
    std::fill(comm_slot.begin(), comm_slot.end(), -1);
    for (const CommInterval& iv : comm_intervals_[c]) {
      const std::size_t s = static_cast<std::size_t>(iv.stream);
      const CollStep& coll = colls_[static_cast<std::size_t>(iv.coll)];
      const std::size_t axis = static_cast<std::size_t>(coll.axis);
      std::int32_t& slot = comm_slot[s * ndim + axis];
      if (slot < 0) {
        slot = static_cast<std::int32_t>(cr.comm.size());
        cr.comm.push_back(CommStat{iv.stream, coll.axis, 0, SimDuration(), SimDuration()});
      }
      CommStat& stat = cr.comm[static_cast<std::size_t>(slot)];
      ++stat.count;
      stat.busy += iv.end - iv.start;
      stat.exposed += iv.exposed;
      std::int32_t& kind_slot = kind_slots[static_cast<std::size_t>(iv.kind) * ndim + axis];
      if (kind_slot < 0) {
        kind_slot = static_cast<std::int32_t>(kinds.size());
        kinds.push_back(CollectiveKindStat{iv.kind, coll.axis, 0, 0.0, SimDuration()});
      }
      CollectiveKindStat& kind = kinds[static_cast<std::size_t>(kind_slot)];
      ++kind.count;
      kind.bus_bytes += coll.bus_bytes;
      kind.time += iv.end - iv.start;
    }
    std::sort(cr.comm.begin(), cr.comm.end(), [](const CommStat& a, const CommStat& b) {
      return std::pair(a.stream, a.axis) < std::pair(b.stream, b.axis);
    });
    cr.overlap_fraction = cr.communication.ps() > 0
                              ? 1.0 - static_cast<double>(cr.exposed_communication.ps()) /
                                          static_cast<double>(cr.communication.ps())
                              : 1.0;
    cr.memory = memory_[c];
    cr.memory.end_bytes = mem_total_[c];
    cr.memory.end_reserved_bytes = allocator_[c].reserved_bytes();
    result.fits = result.fits && cr.memory.fits;
    result.step_time = std::max(result.step_time, cr.end);
    result.classes.push_back(std::move(cr));
  }
  std::sort(kinds.begin(), kinds.end(), [](const CollectiveKindStat& a, const CollectiveKindStat& b) {
    return std::pair(a.kind, a.axis) < std::pair(b.kind, b.axis);
  });
  result.collectives = std::move(kinds);
  result.baseline_step_time = result.step_time;
  result.trace = std::move(trace_);
  result.memory_trace = std::move(memory_trace_);
  result.op_log = std::move(op_log_);
  return result;
}

Expected<SimResult> Simulator::run() {
  reset();
  for (std::uint32_t g = 0; g < state_.size(); ++g) {
    queue_.push(SimTime::zero(), EventKind::kStreamReady, g, generation_[g]);
  }
  while (!queue_.empty() && !error_) {
    const Event ev = queue_.pop();
    // Skip stale events: a stream-ready event whose stream moved on (a ready stream has nothing
    // else in flight, so its state says it all), or one of an older generation.
    const bool live =
        ev.kind == EventKind::kStreamReady ? state_[ev.subject] == StreamState::kReady
        : ev.kind == EventKind::kOpDone    ? ev.generation == generation_[ev.subject]
                                           : ev.generation == flows_[ev.subject].generation;
    if (!live) {
      continue;
    }
    now_ = ev.t;
    ++events_;
    switch (ev.kind) {
      case EventKind::kStreamReady:
        advance(ev.subject);
        break;
      case EventKind::kOpDone:
        on_op_done(ev.subject);
        break;
      case EventKind::kFlowDone:
        on_flow_done(static_cast<std::int32_t>(ev.subject));
        break;
      case EventKind::kCollectiveDone:
        finish_collective(static_cast<std::int32_t>(ev.subject));
        break;
    }
  }
  if (error_) {
    return *error_;
  }
  for (StreamState s : state_) {
    if (s != StreamState::kDone) {
      return deadlock_error();
    }
  }
  return finish();
}

// One simulation of the schedule's classes refined by `straggler` flags (empty: none). Holds the
// classes and options that the Simulator references, at a stable address.
struct ClassSimulation {
  ClassSimulation(const Schedule& schedule, const Hardware& hardware, SimOptions opts,
                  SimClasses cls)
      : options(std::move(opts)),
        classes(std::move(cls)),
        sim(schedule, hardware, options, classes) {}
  SimOptions options;
  SimClasses classes;
  Simulator sim;
};

Expected<std::unique_ptr<ClassSimulation>> prepare_classes(const Schedule& schedule,
                                                           const Hardware& hardware,
                                                           const SimOptions& options,
                                                           std::span<const char> straggler) {
  FSDP_TRY(SimClasses classes,
           make_sim_classes(schedule.mesh(), schedule.rank_class(),
                            static_cast<std::int32_t>(schedule.programs().size()), straggler));
  auto sim = std::make_unique<ClassSimulation>(schedule, hardware, options, std::move(classes));
  FSDP_RETURN_IF_ERROR(sim->sim.prepare());
  return sim;
}

}  // namespace

// With stragglers, `baseline` is the same schedule without them (step time only).
struct PreparedSimulation::Impl {
  std::unique_ptr<ClassSimulation> main;
  std::unique_ptr<ClassSimulation> baseline;
};

PreparedSimulation::PreparedSimulation(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreparedSimulation::PreparedSimulation(PreparedSimulation&&) noexcept = default;
PreparedSimulation& PreparedSimulation::operator=(PreparedSimulation&&) noexcept = default;
PreparedSimulation::~PreparedSimulation() = default;

Expected<SimResult> PreparedSimulation::run() {
  FSDP_CHECK(impl_ != nullptr) << "run() on a moved-from PreparedSimulation";
  FSDP_TRY(SimResult result, impl_->main->sim.run());
  if (impl_->baseline) {
    FSDP_TRY(SimResult baseline, impl_->baseline->sim.run());
    result.baseline_step_time = baseline.step_time;
  }
  return result;
}

Expected<PreparedSimulation> prepare_simulation(const Schedule& schedule, const Hardware& hardware,
                                                const SimOptions& options) {
  auto impl = std::make_unique<PreparedSimulation::Impl>();
  if (!options.straggler.active()) {
    FSDP_TRY(impl->main, prepare_classes(schedule, hardware, options, {}));
    return PreparedSimulation(std::move(impl));
  }
  FSDP_TRY(std::vector<char> flags,
           straggler_flags(options.straggler, schedule.mesh().size()));
  FSDP_TRY(impl->main, prepare_classes(schedule, hardware, options, flags));
  SimOptions baseline_options = options;
  baseline_options.straggler = Straggler();
  baseline_options.record_trace = false;
  baseline_options.record_ops = false;
  FSDP_TRY(impl->baseline, prepare_classes(schedule, hardware, baseline_options, {}));
  return PreparedSimulation(std::move(impl));
}

Expected<SimResult> simulate(const Schedule& schedule, const Hardware& hardware,
                             const SimOptions& options) {
  FSDP_TRY(PreparedSimulation prepared, prepare_simulation(schedule, hardware, options));
  return prepared.run();
}

}  // namespace fsdp::sim

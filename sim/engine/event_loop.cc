// SPDX-License-Identifier: Apache-2.0
// The DES loop of docs/design/simulator.md: state is structure-of-arrays indexed by dense stream
// ids (class * kNumStreams + stream), positions in the compiled stream lists and flow ids; events
// carry indices only; dispatch is one switch. Base durations were computed by compile_program;
// stragglers, contention and SM slowdown rescale them with integer or exactly rounded arithmetic.
// The Simulator has internal linkage and every function it runs per event is defined here or
// inline in link_sharing.h / statistics.h, so the compiler sees the whole loop at once.
#include "sim/engine/internal/event_loop.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/base/check.h"
#include "core/base/strings.h"
#include "sim/engine/event_queue.h"
#include "sim/engine/internal/link_sharing.h"
#include "sim/engine/internal/statistics.h"
#include "sim/model/caching_allocator.h"

namespace fsdp::sim::internal {
namespace {

static_assert(kNumStreams <= 7, "event_state_ keeps a waiting bit per stream in a byte");

enum class StreamState : std::uint8_t { kReady, kBusy, kBlockedEvent, kBlockedCollective, kDone };

// d * factor rounded up; d itself for factor 1.
SimDuration scaled(SimDuration d, double factor) {
  if (factor == 1.0) {
    return d;
  }
  return SimDuration::ps(static_cast<std::int64_t>(std::ceil(static_cast<double>(d.ps()) * factor)));
}

// A traced run's memory sample. Out of line and cold: the untraced loop keeps only the test of
// record_trace, not the copy of the per-class bytes (docs/design/simulator.md, "Results").
[[gnu::noinline, gnu::cold]] void push_memory_sample(std::vector<MemorySample>& trace,
                                                     std::int32_t cls, SimTime now,
                                                     std::int64_t total, const ClassBytes& by_class) {
  trace.push_back(MemorySample{cls, now, total, by_class});
}

class Simulator {
 public:
  Simulator(const Schedule& schedule, const SimOptions& options, const SimClasses& classes,
            StreamProgram program)
      : schedule_(schedule),
        options_(options),
        classes_(classes),
        program_(std::move(program)),
        sm_slowdown_(options.cost.sm_slowdown != 1.0),
        record_trace_(options.record_trace),
        record_ops_(options.record_ops),
        stop_at_overflow_(options.stop_at_memory_overflow),
        sharing_(classes.types, options.contention) {}

  // One step from the compiled state. Repeatable.
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
  Error deadlock_error() const;

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
  const Step& current(std::uint32_t g) const {
    return program_.steps[static_cast<std::size_t>(cursor_[g])];
  }
  std::int32_t current_op(std::uint32_t g) const {
    return program_.step_op[static_cast<std::size_t>(cursor_[g])];
  }
  // Compute time of class c before now_ (see ClassClock).
  std::int64_t compute_before(std::size_t c) const { return stats_.clock[c].compute_before(now_); }
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
  const SimOptions& options_;
  const SimClasses& classes_;
  StreamProgram program_;  // read-only while running
  // Options read in the loop, copied here so that they load without the indirection.
  bool sm_slowdown_ = false;
  bool record_trace_ = false;
  bool record_ops_ = false;
  bool stop_at_overflow_ = false;
  bool stopped_at_overflow_ = false;  // the run ended at a reservation past the device

  // Per class.
  std::vector<std::int32_t> comm_active_;  // collectives in flight
  std::vector<CachingAllocator> allocator_;
  // Per stream g = c * kNumStreams + s.
  std::vector<std::int64_t> cursor_;
  std::vector<std::int64_t> cursor_end_;  // the end of the stream's list (list_end of list_of)
  std::vector<StreamState> state_;
  std::vector<std::int64_t> coll_pos_;
  std::vector<SimTime> op_start_;
  std::vector<std::uint32_t> generation_;
  std::vector<std::int64_t> work_left_;  // running compute op: ps of work at full speed
  std::vector<SimTime> work_since_;
  std::vector<char> work_slow_;
  // Per group type and stream (type * kNumStreams + s): arrivals at the pending collective.
  std::vector<std::int32_t> pending_count_;
  std::vector<std::int64_t> pending_k_;
  // The collectives in flight and the links they share.
  LinkSharing sharing_;
  // Per event (class base + event id): bit 0 once recorded; bit 1 + s while stream s of the class
  // waits for it (kNumStreams <= 7).
  std::vector<std::uint8_t> event_state_;
  // Per buffer (class base + buffer id): its size (-1 when not allocated) and allocator block.
  struct LiveBuffer {
    std::int64_t bytes = -1;
    CachingAllocator::Handle block;
  };
  std::vector<LiveBuffer> buffers_;
  // What the run accumulates for its result: exposure, memory over time, trace, op log.
  RunStats stats_;

  EventQueue queue_;
  SimTime now_;
  std::int64_t events_ = 0;
  std::optional<Error> error_;
};

void Simulator::reset() {
  const std::size_t nc = static_cast<std::size_t>(program_.num_classes);
  const std::size_t ns = nc * kNumStreams;
  cursor_.resize(ns);
  cursor_end_.resize(ns);
  for (std::uint32_t g = 0; g < ns; ++g) {
    cursor_[g] = program_.list_begin[list_of(g)];
    cursor_end_[g] = program_.list_end[list_of(g)];
  }
  state_.assign(ns, StreamState::kReady);
  coll_pos_.assign(ns, 0);
  op_start_.assign(ns, SimTime());
  generation_.assign(ns, 0);
  work_left_.assign(ns, 0);
  work_since_.assign(ns, SimTime());
  work_slow_.assign(ns, 0);
  comm_active_.assign(nc, 0);
  pending_count_.assign(classes_.types.size() * kNumStreams, 0);
  pending_k_.assign(classes_.types.size() * kNumStreams, -1);
  sharing_.reset(nc);
  event_state_.assign(static_cast<std::size_t>(program_.event_base[nc]), 0);
  buffers_.assign(static_cast<std::size_t>(program_.buffer_base[nc]), LiveBuffer());
  // Copy-assignment keeps the capacity of the previous run's vectors.
  allocator_ = program_.init_allocator;
  stats_.reset(program_, record_trace_);
  queue_.clear();
  queue_.reserve(2 * ns + 64);
  now_ = SimTime();
  events_ = 0;
  error_.reset();
  stopped_at_overflow_ = false;
}

Error Simulator::memory_error(std::int32_t cls, std::size_t pos) const {
  const Step& step = program_.steps[pos];
  if (step.kind == OpKind::kAlloc) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("class ", cls, " allocates buffer ", step.arg, " twice, at op ",
                         describe_op(schedule_, classes_, cls, program_.step_op[pos])));
  }
  return Error(ErrorCode::kFailedPrecondition,
               str_cat("class ", cls, " frees buffer ", step.arg, " that is not allocated, at op ",
                       describe_op(schedule_, classes_, cls, program_.step_op[pos])));
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
  const Step* const steps = program_.steps.data();
  std::uint8_t* const event_state = event_state_.data() + program_.event_base[c];
  LiveBuffer* const buffers = buffers_.data() + program_.buffer_base[c];
  ClassBytes& by_class = stats_.mem_by_class[c];
  std::int64_t& total = stats_.mem_total[c];
  MemoryResult& m = stats_.memory[c];
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
        add_live_bytes(m, by_class, total, step.buffer_class, delta);
        if (record_ops) {
          stats_.op_log.push_back(
              OpRecord{cls, step.stream, program_.step_op[pos], now_, now_, delta});
        }
        note_peak(m, by_class, total, now_, program_.step_op[pos]);
        note_reserved(m, allocator.reserved_bytes(), program_.step_op[pos]);
        if (record_trace) {
          push_memory_sample(stats_.memory_trace, cls, now_, total, by_class);
        }
        if (!m.reserved_fits && stop_at_overflow_) [[unlikely]] {
          stopped_at_overflow_ = true;
          fail(Error(ErrorCode::kFailedPrecondition, "stopped at a memory overflow"));
          cursor_[g] = static_cast<std::int64_t>(pos + 1);
          return;
        }
        break;
      }
      case OpKind::kFree: {
        LiveBuffer& buffer = buffers[step.arg];
        if (buffer.bytes < 0) [[unlikely]] {
          fail(memory_error(cls, pos));
          cursor_[g] = static_cast<std::int64_t>(pos);
          return;
        }
        const std::int64_t delta = -buffer.bytes;
        buffer.bytes = -1;
        allocator.release(buffer.block);
        remove_live_bytes(by_class, total, step.buffer_class, delta);
        if (record_ops) {
          stats_.op_log.push_back(
              OpRecord{cls, step.stream, program_.step_op[pos], now_, now_, delta});
        }
        if (record_trace) {
          push_memory_sample(stats_.memory_trace, cls, now_, total, by_class);
        }
        break;
      }
      case OpKind::kRecord: {
        const unsigned waiting = event_state[step.arg] >> 1;
        event_state[step.arg] = 1;
        if (record_ops) {
          stats_.op_log.push_back(OpRecord{cls, step.stream, program_.step_op[pos], now_, now_, 0});
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
          stats_.op_log.push_back(OpRecord{cls, step.stream, program_.step_op[pos], now_, now_, 0});
        }
        break;
      case OpKind::kAllGather:
      case OpKind::kReduceScatter:
      case OpKind::kAllReduce:
      case OpKind::kAllToAll:
        cursor_[g] = static_cast<std::int64_t>(pos);
        arrive(g, program_.colls[static_cast<std::size_t>(step.arg)].axis);
        return;
      default:
        cursor_[g] = static_cast<std::int64_t>(pos);
        start_compute(g, step);
        return;
    }
  }
  cursor_[g] = static_cast<std::int64_t>(pos);
  state_[g] = StreamState::kDone;
  stats_.stream_end_time[g] = now_;
}

void Simulator::start_compute(std::uint32_t g, const Step& step) {
  const std::int32_t cls = static_cast<std::int32_t>(g / kNumStreams);
  const SimDuration d = scaled(SimDuration::ps(step.value), compute_factor(cls));
  state_[g] = StreamState::kBusy;
  op_start_[g] = now_;
  stats_.clock[static_cast<std::size_t>(cls)].begin_compute(now_);
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
  stats_.clock[c].begin_communication(now_);
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
  stats_.clock[c].end_communication(now_);
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
    const CollStep& coll = program_.colls[static_cast<std::size_t>(
        program_.steps[static_cast<std::size_t>(cursor_[gm])].arg)];
    state_[gm] = StreamState::kBusy;
    op_start_[gm] = now_;
    stats_.coll_compute_start[gm] = compute_before(static_cast<std::size_t>(m));
    // The ring runs at the pace of its slowest member's link.
    transfer = std::max(transfer, scaled(coll.transfer, link_factor(m)));
    latency = std::max(latency, coll.latency);
    link = coll.link;
    comm_begin(m);
  }
  sharing_.start(type, stream, link, transfer, latency, now_, queue_);
}

void Simulator::on_flow_done(std::int32_t id) {
  if (!sharing_.end_transfer(id, now_, queue_)) {
    finish_collective(id);
  }
}

void Simulator::finish_collective(std::int32_t id) {
  const Flow flow = sharing_.flow(static_cast<std::uint32_t>(id));
  sharing_.release(id);
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
  const Step& step = program_.steps[pos];
  if (is_collective(step.kind)) {
    const SimDuration exposed =
        stats_.clock[c].exposed_since(op_start_[g], stats_.coll_compute_start[g], now_);
    stats_.comm_intervals[c].push_back(
        CommInterval{op_start_[g], now_, exposed, step.arg, step.stream, step.kind});
    ++coll_pos_[g];
  } else {
    stats_.clock[c].end_compute(op_start_[g], now_);
  }
  if (record_trace_) {
    stats_.trace.push_back(
        TraceRecord{cls, step.stream, program_.step_op[pos], op_start_[g], now_});
  }
  if (record_ops_) {
    stats_.op_log.push_back(
        OpRecord{cls, step.stream, program_.step_op[pos], op_start_[g], now_, 0});
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
       << describe_op(schedule_, classes_, cls, i);
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
                                           : ev.generation == sharing_.generation(ev.subject);
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
  if (error_ && stopped_at_overflow_) {
    SimResult partial = assemble_result(stats_, program_, classes_, allocator_,
                                        schedule_.mesh().ndim(), events_);
    partial.fits = false;
    partial.stopped_at_memory_overflow = true;
    return partial;
  }
  if (error_) {
    return *error_;
  }
  for (StreamState s : state_) {
    if (s != StreamState::kDone) {
      return deadlock_error();
    }
  }
  return assemble_result(stats_, program_, classes_, allocator_, schedule_.mesh().ndim(),
                         events_);
}

}  // namespace

struct EventLoop::State {
  State(const Schedule& schedule, const SimOptions& options, const SimClasses& classes,
        StreamProgram program)
      : sim(schedule, options, classes, std::move(program)) {}
  Simulator sim;
};

EventLoop::EventLoop(const Schedule& schedule, const SimOptions& options,
                     const SimClasses& classes, StreamProgram program)
    : state_(std::make_unique<State>(schedule, options, classes, std::move(program))) {}

EventLoop::~EventLoop() = default;

Expected<SimResult> EventLoop::run() { return state_->sim.run(); }

}  // namespace fsdp::sim::internal

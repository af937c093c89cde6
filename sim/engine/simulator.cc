// SPDX-License-Identifier: Apache-2.0
// The DES loop of docs/design/simulator.md: state is structure-of-arrays indexed by dense stream
// ids (class * kNumStreams + stream) and flat op ids; events carry indices only; dispatch is one
// switch. Durations are precomputed per op before the loop, so the loop does integer work only.
#include "sim/engine/simulator.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "core/base/check.h"
#include "core/base/strings.h"
#include "sim/engine/event_queue.h"

namespace fsdp::sim {
namespace {

constexpr std::int64_t kNotArrived = std::numeric_limits<std::int64_t>::min();

enum class StreamState : std::uint8_t { kReady, kBusy, kBlockedEvent, kBlockedCollective, kDone };

struct Interval {
  SimTime start;
  SimTime end;
};

struct CommInterval {
  SimTime start;
  SimTime end;
  StreamKind stream = StreamKind::kAllGather;
  std::int32_t axis = 0;
  OpKind kind = OpKind::kAllGather;
  double bus_bytes = 0;
};

// Length of the overlap of [x.start, x.end) with the sorted, disjoint intervals `a`; `hint` only
// moves forward, so calls with sorted disjoint x walk `a` once.
SimDuration overlap(const std::vector<Interval>& a, SimTime start, SimTime end, std::size_t& hint) {
  while (hint < a.size() && a[hint].end <= start) {
    ++hint;
  }
  SimDuration total;
  for (std::size_t j = hint; j < a.size() && a[j].start < end; ++j) {
    const SimTime s = std::max(a[j].start, start);
    const SimTime e = std::min(a[j].end, end);
    if (s < e) {
      total += e - s;
    }
  }
  return total;
}

class Simulator {
 public:
  Simulator(const Schedule& schedule, const Hardware& hardware, const SimOptions& options)
      : schedule_(schedule), hardware_(hardware), options_(options) {}

  Expected<SimResult> run();

 private:
  Status prepare();
  Status compute_partners();
  void advance(std::uint32_t g);
  void try_start_collective(std::int32_t cls, StreamKind stream, std::int64_t k);
  void on_op_done(std::uint32_t g);
  void apply_memory(std::int32_t cls, std::int32_t op_index, const Op& op);
  void fail(Error error) {
    if (!error_) {
      error_ = std::move(error);
    }
  }
  std::string describe_op(std::int32_t cls, std::int32_t op_index) const;
  Error deadlock_error() const;
  SimResult finish();

  const Op& op_at(std::int32_t cls, std::int32_t i) const {
    return schedule_.programs()[static_cast<std::size_t>(cls)].ops[static_cast<std::size_t>(i)];
  }

  const Schedule& schedule_;
  const Hardware& hardware_;
  const SimOptions& options_;
  std::int32_t num_classes_ = 0;
  std::vector<AxisLink> links_;

  // Per class.
  std::vector<std::int64_t> op_base_, event_base_, buffer_base_;
  // Per flat op (op_base_[c] + i).
  std::vector<SimDuration> duration_;
  std::vector<double> bus_bytes_;
  // Per stream g = c * kNumStreams + s.
  std::vector<std::int32_t> stream_ops_;  // program op indices, stream by stream
  std::vector<std::int64_t> stream_begin_, stream_end_, cursor_;
  std::vector<StreamState> state_;
  std::vector<std::int32_t> blocked_event_;
  std::vector<std::int64_t> coll_base_, coll_count_, coll_pos_;
  std::vector<SimTime> op_start_, stream_end_time_;
  std::vector<std::uint32_t> generation_;
  std::vector<std::int64_t> arrival_;  // ps, kNotArrived until the class reaches the collective
  // partners_[(c * ndim + axis)]: classes that share an axis group with some rank of c.
  std::vector<std::vector<std::int32_t>> partners_;
  std::vector<char> recorded_;
  std::vector<std::int64_t> buffer_bytes_;  // -1 when not allocated

  // Memory per class.
  std::vector<std::array<std::int64_t, kNumBufferClasses>> mem_by_class_;
  std::vector<std::int64_t> mem_total_;
  std::vector<MemoryResult> memory_;

  std::vector<std::vector<Interval>> compute_intervals_;
  std::vector<std::vector<CommInterval>> comm_intervals_;

  EventQueue queue_;
  SimTime now_;
  std::int64_t events_ = 0;
  std::optional<Error> error_;
  std::vector<TraceRecord> trace_;
  std::vector<MemorySample> memory_trace_;
};

Status Simulator::compute_partners() {
  const DeviceMesh& mesh = schedule_.mesh();
  const auto& rank_class = schedule_.rank_class();
  if (static_cast<std::int64_t>(rank_class.size()) != mesh.size()) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("schedule maps ", rank_class.size(), " ranks to classes; the mesh has ",
                         mesh.size()));
  }
  const std::int64_t ndim = mesh.ndim();
  const std::size_t nc = static_cast<std::size_t>(num_classes_);
  partners_.assign(nc * static_cast<std::size_t>(ndim), {});
  std::vector<char> pair(nc * nc);
  std::vector<std::int32_t> members;
  for (std::int64_t a = 0; a < ndim; ++a) {
    std::fill(pair.begin(), pair.end(), 0);
    std::int64_t stride = 1;
    for (std::int64_t b = a + 1; b < ndim; ++b) {
      stride *= mesh.axis_size(b);
    }
    const std::int64_t n = mesh.axis_size(a);
    for (std::int64_t base = 0; base < mesh.size(); ++base) {
      if ((base / stride) % n != 0) {
        continue;
      }
      members.clear();
      for (std::int64_t k = 0; k < n; ++k) {
        const std::int32_t c = rank_class[static_cast<std::size_t>(base + k * stride)];
        if (c < 0 || c >= num_classes_) {
          return Error(ErrorCode::kOutOfRange,
                       str_cat("rank ", base + k * stride, " maps to class ", c, " outside [0, ",
                               num_classes_, ")"));
        }
        if (std::find(members.begin(), members.end(), c) == members.end()) {
          members.push_back(c);
        }
      }
      for (std::int32_t x : members) {
        for (std::int32_t y : members) {
          pair[static_cast<std::size_t>(x) * nc + static_cast<std::size_t>(y)] = 1;
        }
      }
    }
    for (std::size_t x = 0; x < nc; ++x) {
      auto& list = partners_[x * static_cast<std::size_t>(ndim) + static_cast<std::size_t>(a)];
      for (std::size_t y = 0; y < nc; ++y) {
        if (pair[x * nc + y] != 0) {
          list.push_back(static_cast<std::int32_t>(y));
        }
      }
    }
  }
  return ok_status();
}

Status Simulator::prepare() {
  const auto& programs = schedule_.programs();
  num_classes_ = static_cast<std::int32_t>(programs.size());
  if (num_classes_ == 0) {
    return Error(ErrorCode::kFailedPrecondition, "schedule has no rank programs");
  }
  links_ = axis_links(schedule_.mesh(), hardware_);
  FSDP_RETURN_IF_ERROR(compute_partners());
  const std::size_t nc = programs.size();
  const std::size_t ns = nc * kNumStreams;
  op_base_.resize(nc + 1);
  event_base_.resize(nc + 1);
  buffer_base_.resize(nc + 1);
  for (std::size_t c = 0; c < nc; ++c) {
    op_base_[c + 1] = op_base_[c] + static_cast<std::int64_t>(programs[c].ops.size());
    event_base_[c + 1] = event_base_[c] + std::max(programs[c].num_events, 0);
    buffer_base_[c + 1] = buffer_base_[c] + std::max(programs[c].num_buffers, 0);
  }
  duration_.assign(static_cast<std::size_t>(op_base_[nc]), SimDuration());
  bus_bytes_.assign(static_cast<std::size_t>(op_base_[nc]), 0.0);
  stream_ops_.reserve(static_cast<std::size_t>(op_base_[nc]));
  stream_begin_.resize(ns);
  stream_end_.resize(ns);
  coll_base_.resize(ns);
  coll_count_.assign(ns, 0);
  // Collective sequence (kind, axis) per stream of class 0, to check the others against.
  std::array<std::vector<std::pair<OpKind, std::int32_t>>, kNumStreams> reference;
  std::int64_t coll_total = 0;
  const auto& infos = schedule_.collectives();
  const std::int64_t ndim = schedule_.mesh().ndim();
  for (std::size_t c = 0; c < nc; ++c) {
    const RankProgram& p = programs[c];
    std::array<std::vector<std::pair<OpKind, std::int32_t>>, kNumStreams> seq;
    for (int s = 0; s < kNumStreams; ++s) {
      const std::size_t g = c * kNumStreams + static_cast<std::size_t>(s);
      stream_begin_[g] = static_cast<std::int64_t>(stream_ops_.size());
      for (std::size_t i = 0; i < p.ops.size(); ++i) {
        const Op& op = p.ops[i];
        if (static_cast<int>(op.stream) != s) {
          continue;
        }
        const std::int32_t idx = static_cast<std::int32_t>(i);
        const std::size_t flat = static_cast<std::size_t>(op_base_[c]) + i;
        stream_ops_.push_back(idx);
        if (is_collective(op.kind)) {
          if (op.axis < 0 || op.axis >= ndim) {
            return Error(ErrorCode::kOutOfRange,
                         str_cat("op ", describe_op(static_cast<std::int32_t>(c), idx),
                                 " names mesh axis ", op.axis, " outside [0, ", ndim, ")"));
          }
          std::int64_t max_elements = op.elements;
          if (op.collective >= 0 && static_cast<std::size_t>(op.collective) < infos.size()) {
            const auto& members = infos[static_cast<std::size_t>(op.collective)].member_elements;
            if (!members.empty()) {
              max_elements = *std::max_element(members.begin(), members.end());
            }
          }
          const CollectiveCost cost =
              collective_cost(op.kind, max_elements, op.dtype,
                              links_[static_cast<std::size_t>(op.axis)], options_.cost);
          duration_[flat] = cost.duration;
          bus_bytes_[flat] = cost.bus_bytes;
          seq[static_cast<std::size_t>(s)].emplace_back(op.kind, op.axis);
          ++coll_count_[g];
        } else if (is_compute(op.kind)) {
          duration_[flat] = compute_cost(op, hardware_, options_.cost);
        } else if (op.kind == OpKind::kRecord || op.kind == OpKind::kWait) {
          if (op.event < 0 || op.event >= p.num_events) {
            return Error(ErrorCode::kOutOfRange,
                         str_cat("op ", describe_op(static_cast<std::int32_t>(c), idx),
                                 " names event ", op.event, " outside [0, ", p.num_events, ")"));
          }
        } else if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) {
          if (op.buffer < 0 || op.buffer >= p.num_buffers) {
            return Error(ErrorCode::kOutOfRange,
                         str_cat("op ", describe_op(static_cast<std::int32_t>(c), idx),
                                 " names buffer ", op.buffer, " outside [0, ", p.num_buffers,
                                 ")"));
          }
        }
      }
      stream_end_[g] = static_cast<std::int64_t>(stream_ops_.size());
      coll_base_[g] = coll_total;
      coll_total += coll_count_[g];
    }
    if (c == 0) {
      reference = seq;
    } else {
      for (std::size_t s = 0; s < kNumStreams; ++s) {
        if (seq[s] != reference[s]) {
          return Error(ErrorCode::kFailedPrecondition,
                       str_cat("class ", c, " (rank ", p.representative_rank, ") issues ",
                               seq[s].size(), " collectives on stream ",
                               to_string(static_cast<StreamKind>(s)),
                               " that differ from class 0's ", reference[s].size(),
                               " in kind or axis"));
        }
      }
    }
  }
  cursor_ = stream_begin_;
  state_.assign(ns, StreamState::kReady);
  blocked_event_.assign(ns, -1);
  coll_pos_.assign(ns, 0);
  op_start_.assign(ns, SimTime());
  stream_end_time_.assign(ns, SimTime());
  generation_.assign(ns, 0);
  arrival_.assign(static_cast<std::size_t>(coll_total), kNotArrived);
  recorded_.assign(static_cast<std::size_t>(event_base_[nc]), 0);
  buffer_bytes_.assign(static_cast<std::size_t>(buffer_base_[nc]), -1);
  mem_by_class_.assign(nc, {});
  mem_total_.assign(nc, 0);
  memory_.assign(nc, MemoryResult());
  compute_intervals_.assign(nc, {});
  comm_intervals_.assign(nc, {});
  for (std::size_t c = 0; c < nc; ++c) {
    MemoryResult& m = memory_[c];
    m.capacity_bytes = hardware_.memory_bytes();
    for (const ResidentBuffer& b : programs[c].resident) {
      m.resident_by_class[static_cast<std::size_t>(b.buffer_class)] += b.bytes;
      m.resident_bytes += b.bytes;
    }
    mem_by_class_[c] = m.resident_by_class;
    mem_total_[c] = m.resident_bytes;
    m.peak_bytes = m.resident_bytes;
    m.peak_by_class = m.resident_by_class;
    if (m.resident_bytes > m.capacity_bytes) {
      m.fits = false;
    }
    std::size_t compute_ops = 0;
    for (const Op& op : programs[c].ops) {
      if (is_compute(op.kind)) {
        ++compute_ops;
      }
    }
    compute_intervals_[c].reserve(compute_ops);
    comm_intervals_[c].reserve(static_cast<std::size_t>(
        coll_count_[c * kNumStreams] + coll_count_[c * kNumStreams + 1] +
        coll_count_[c * kNumStreams + 2]));
  }
  if (options_.record_trace) {
    trace_.reserve(static_cast<std::size_t>(op_base_[nc]));
    memory_trace_.reserve(static_cast<std::size_t>(op_base_[nc]));
  }
  queue_.reserve(2 * ns + 64);
  return ok_status();
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

void Simulator::apply_memory(std::int32_t cls, std::int32_t op_index, const Op& op) {
  const std::size_t c = static_cast<std::size_t>(cls);
  const std::size_t b = static_cast<std::size_t>(buffer_base_[c] + op.buffer);
  std::int64_t delta = 0;
  std::size_t bc = static_cast<std::size_t>(op.buffer_class);
  if (op.kind == OpKind::kAlloc) {
    if (buffer_bytes_[b] >= 0) {
      fail(Error(ErrorCode::kFailedPrecondition,
                 str_cat("class ", cls, " allocates buffer ", op.buffer, " twice, at op ",
                         describe_op(cls, op_index))));
      return;
    }
    // The free op names the buffer class too, so only the size is remembered.
    buffer_bytes_[b] = op.bytes;
    delta = op.bytes;
  } else {
    if (buffer_bytes_[b] < 0) {
      fail(Error(ErrorCode::kFailedPrecondition,
                 str_cat("class ", cls, " frees buffer ", op.buffer,
                         " that is not allocated, at op ", describe_op(cls, op_index))));
      return;
    }
    delta = -buffer_bytes_[b];
    buffer_bytes_[b] = -1;
  }
  if (bc >= kNumBufferClasses) {
    bc = 0;
  }
  mem_by_class_[c][bc] += delta;
  mem_total_[c] += delta;
  MemoryResult& m = memory_[c];
  if (mem_total_[c] > m.peak_bytes) {
    m.peak_bytes = mem_total_[c];
    m.peak_by_class = mem_by_class_[c];
    m.peak_time = now_;
    m.peak_op = op_index;
  }
  // When the resident buffers alone overflow, fits is already false and no op is blamed.
  if (mem_total_[c] > m.capacity_bytes && m.fits) {
    m.fits = false;
    m.first_overflow_op = op_index;
    m.first_overflow_time = now_;
  }
  if (options_.record_trace) {
    memory_trace_.push_back(MemorySample{cls, now_, mem_total_[c]});
  }
}

void Simulator::advance(std::uint32_t g) {
  const std::int32_t cls = static_cast<std::int32_t>(g / kNumStreams);
  const StreamKind stream = static_cast<StreamKind>(g % kNumStreams);
  const std::size_t c = static_cast<std::size_t>(cls);
  while (cursor_[g] < stream_end_[g]) {
    if (error_) {
      return;
    }
    const std::int32_t i = stream_ops_[static_cast<std::size_t>(cursor_[g])];
    const Op& op = op_at(cls, i);
    switch (op.kind) {
      case OpKind::kAlloc:
      case OpKind::kFree:
        apply_memory(cls, i, op);
        ++cursor_[g];
        break;
      case OpKind::kRecord: {
        recorded_[static_cast<std::size_t>(event_base_[c] + op.event)] = 1;
        for (std::uint32_t s = 0; s < kNumStreams; ++s) {
          const std::uint32_t other = static_cast<std::uint32_t>(c * kNumStreams) + s;
          if (state_[other] == StreamState::kBlockedEvent && blocked_event_[other] == op.event) {
            state_[other] = StreamState::kReady;
            blocked_event_[other] = -1;
            queue_.push(now_, EventKind::kStreamReady, other, generation_[other]);
          }
        }
        ++cursor_[g];
        break;
      }
      case OpKind::kWait:
        if (recorded_[static_cast<std::size_t>(event_base_[c] + op.event)] == 0) {
          state_[g] = StreamState::kBlockedEvent;
          blocked_event_[g] = op.event;
          return;
        }
        ++cursor_[g];
        break;
      case OpKind::kAllGather:
      case OpKind::kReduceScatter:
      case OpKind::kAllReduce: {
        const std::int64_t k = coll_pos_[g];
        arrival_[static_cast<std::size_t>(coll_base_[g] + k)] = now_.ps();
        state_[g] = StreamState::kBlockedCollective;
        const auto& partners =
            partners_[c * static_cast<std::size_t>(schedule_.mesh().ndim()) +
                      static_cast<std::size_t>(op.axis)];
        for (std::int32_t p : partners) {
          try_start_collective(p, stream, k);
        }
        return;
      }
      default: {  // compute
        state_[g] = StreamState::kBusy;
        op_start_[g] = now_;
        queue_.push(now_ + duration_[static_cast<std::size_t>(op_base_[c] + i)],
                    EventKind::kOpDone, g, generation_[g]);
        return;
      }
    }
  }
  state_[g] = StreamState::kDone;
  stream_end_time_[g] = now_;
}

void Simulator::try_start_collective(std::int32_t cls, StreamKind stream, std::int64_t k) {
  const std::size_t c = static_cast<std::size_t>(cls);
  const std::uint32_t g = static_cast<std::uint32_t>(c * kNumStreams + static_cast<int>(stream));
  if (state_[g] != StreamState::kBlockedCollective || coll_pos_[g] != k) {
    return;
  }
  const std::int32_t i = stream_ops_[static_cast<std::size_t>(cursor_[g])];
  const Op& op = op_at(cls, i);
  std::int64_t start = kNotArrived;
  const auto& partners = partners_[c * static_cast<std::size_t>(schedule_.mesh().ndim()) +
                                   static_cast<std::size_t>(op.axis)];
  for (std::int32_t p : partners) {
    const std::size_t pg = static_cast<std::size_t>(p) * kNumStreams + static_cast<int>(stream);
    const std::int64_t t = arrival_[static_cast<std::size_t>(coll_base_[pg] + k)];
    if (t == kNotArrived) {
      return;
    }
    start = std::max(start, t);
  }
  state_[g] = StreamState::kBusy;
  op_start_[g] = SimTime::ps(start);
  queue_.push(SimTime::ps(start) + duration_[static_cast<std::size_t>(op_base_[c] + i)],
              EventKind::kOpDone, g, generation_[g]);
}

void Simulator::on_op_done(std::uint32_t g) {
  const std::int32_t cls = static_cast<std::int32_t>(g / kNumStreams);
  const std::size_t c = static_cast<std::size_t>(cls);
  const std::int32_t i = stream_ops_[static_cast<std::size_t>(cursor_[g])];
  const Op& op = op_at(cls, i);
  if (is_collective(op.kind)) {
    comm_intervals_[c].push_back(
        CommInterval{op_start_[g], now_, op.stream, op.axis, op.kind,
                     bus_bytes_[static_cast<std::size_t>(op_base_[c] + i)]});
    ++coll_pos_[g];
  } else {
    compute_intervals_[c].push_back(Interval{op_start_[g], now_});
  }
  if (options_.record_trace) {
    trace_.push_back(TraceRecord{cls, op.stream, i, op_start_[g], now_});
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
    const RankProgram& p = schedule_.programs()[static_cast<std::size_t>(cls)];
    const std::int32_t i = stream_ops_[static_cast<std::size_t>(cursor_[g])];
    const Op& op = op_at(cls, i);
    os << (first ? "" : "; ") << "class " << cls << " (rank " << p.representative_rank
       << ") stream " << to_string(static_cast<StreamKind>(g % kNumStreams)) << " blocked at op "
       << describe_op(cls, i);
    first = false;
    if (state_[g] == StreamState::kBlockedEvent) {
      os << " waiting for event " << op.event << ", which is never recorded";
    } else if (state_[g] == StreamState::kBlockedCollective) {
      os << " in collective #" << coll_pos_[g] << " of its stream on axis '"
         << schedule_.mesh().axis_name(op.axis) << "', never reached by class";
      const auto& partners =
          partners_[static_cast<std::size_t>(cls) * static_cast<std::size_t>(schedule_.mesh().ndim()) +
                    static_cast<std::size_t>(op.axis)];
      for (std::int32_t q : partners) {
        const std::size_t qg = static_cast<std::size_t>(q) * kNumStreams + g % kNumStreams;
        if (arrival_[static_cast<std::size_t>(coll_base_[qg] + coll_pos_[g])] == kNotArrived) {
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
  const auto& programs = schedule_.programs();
  std::vector<CollectiveKindStat> kinds;
  for (std::size_t c = 0; c < programs.size(); ++c) {
    ClassResult cr;
    cr.representative_rank = programs[c].representative_rank;
    cr.num_ranks = programs[c].num_ranks;
    for (std::size_t s = 0; s < kNumStreams; ++s) {
      cr.end = std::max(cr.end, stream_end_time_[c * kNumStreams + s]);
    }
    const auto& comp = compute_intervals_[c];
    for (const Interval& iv : comp) {
      cr.compute += iv.end - iv.start;
    }
    auto& comm = comm_intervals_[c];
    // Per (stream, axis): intervals of one stream are sorted and disjoint.
    std::array<std::size_t, kNumStreams> hint{};
    for (const CommInterval& iv : comm) {
      const std::size_t s = static_cast<std::size_t>(iv.stream);
      auto it = std::find_if(cr.comm.begin(), cr.comm.end(), [&](const CommStat& st) {
        return st.stream == iv.stream && st.axis == iv.axis;
      });
      if (it == cr.comm.end()) {
        cr.comm.push_back(CommStat{iv.stream, iv.axis, 0, SimDuration(), SimDuration()});
        it = cr.comm.end() - 1;
      }
      ++it->count;
      it->busy += iv.end - iv.start;
      // Intervals of different streams interleave in `comm`, so keep one hint per stream.
      it->exposed += (iv.end - iv.start) - overlap(comp, iv.start, iv.end, hint[s]);
      auto kt = std::find_if(kinds.begin(), kinds.end(), [&](const CollectiveKindStat& k) {
        return k.kind == iv.kind && k.axis == iv.axis;
      });
      if (kt == kinds.end()) {
        kinds.push_back(CollectiveKindStat{iv.kind, iv.axis, 0, 0.0, SimDuration()});
        kt = kinds.end() - 1;
      }
      ++kt->count;
      kt->bus_bytes += iv.bus_bytes;
      kt->time += iv.end - iv.start;
    }
    std::sort(cr.comm.begin(), cr.comm.end(), [](const CommStat& a, const CommStat& b) {
      return std::pair(a.stream, a.axis) < std::pair(b.stream, b.axis);
    });
    // Union of all communication, then the part of it outside compute.
    std::vector<Interval> all;
    all.reserve(comm.size());
    for (const CommInterval& iv : comm) {
      all.push_back(Interval{iv.start, iv.end});
    }
    std::stable_sort(all.begin(), all.end(),
                     [](const Interval& a, const Interval& b) { return a.start < b.start; });
    std::size_t h = 0;
    std::size_t j = 0;
    while (j < all.size()) {
      Interval u = all[j++];
      while (j < all.size() && all[j].start <= u.end) {
        u.end = std::max(u.end, all[j++].end);
      }
      if (u.start < u.end) {
        cr.communication += u.end - u.start;
        cr.exposed_communication += (u.end - u.start) - overlap(comp, u.start, u.end, h);
      }
    }
    cr.overlap_fraction = cr.communication.ps() > 0
                              ? 1.0 - static_cast<double>(cr.exposed_communication.ps()) /
                                          static_cast<double>(cr.communication.ps())
                              : 1.0;
    cr.memory = memory_[c];
    cr.memory.end_bytes = mem_total_[c];
    result.fits = result.fits && cr.memory.fits;
    result.step_time = std::max(result.step_time, cr.end);
    result.classes.push_back(std::move(cr));
  }
  std::sort(kinds.begin(), kinds.end(), [](const CollectiveKindStat& a, const CollectiveKindStat& b) {
    return std::pair(a.kind, a.axis) < std::pair(b.kind, b.axis);
  });
  result.collectives = std::move(kinds);
  result.trace = std::move(trace_);
  result.memory_trace = std::move(memory_trace_);
  return result;
}

Expected<SimResult> Simulator::run() {
  FSDP_RETURN_IF_ERROR(prepare());
  for (std::uint32_t g = 0; g < state_.size(); ++g) {
    queue_.push(SimTime::zero(), EventKind::kStreamReady, g, generation_[g]);
  }
  while (!queue_.empty() && !error_) {
    const Event ev = queue_.pop();
    if (ev.generation != generation_[ev.subject]) {
      continue;
    }
    FSDP_DCHECK(ev.t >= now_);
    now_ = ev.t;
    ++events_;
    switch (ev.kind) {
      case EventKind::kStreamReady:
        if (state_[ev.subject] == StreamState::kReady) {
          advance(ev.subject);
        }
        break;
      case EventKind::kOpDone:
        on_op_done(ev.subject);
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

}  // namespace

Expected<SimResult> simulate(const Schedule& schedule, const Hardware& hardware,
                             const SimOptions& options) {
  Simulator sim(schedule, hardware, options);
  return sim.run();
}

}  // namespace fsdp::sim

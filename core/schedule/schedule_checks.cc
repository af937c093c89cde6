// SPDX-License-Identifier: Apache-2.0
// The checks read each program once in issue order and answer happens-before questions from the
// vector clocks of HappensBefore, so a check costs O(ops x streams) per rank class. The DAG and
// the rules are described in docs/design/schedule-ir.md.
#include "core/schedule/schedule_checks.h"

#include "core/base/check.h"
#include "core/base/checked_math.h"
#include "core/base/strings.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/exception.hpp>
#include <boost/graph/topological_sort.hpp>

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace fsdp {
namespace {

constexpr int kNumOpKinds = static_cast<int>(OpKind::kWait) + 1;
constexpr int kNumPhases = static_cast<int>(Phase::kStep) + 1;

constexpr std::string_view kUnshard = "unshard";
constexpr std::string_view kWeightSync = "model_weight_sync";
constexpr std::string_view kGradReduce = "grad_reduce";
constexpr std::string_view kGradFinalize = "grad_finalize";

std::size_t idx(std::int64_t i) {
  return static_cast<std::size_t>(i);
}

bool valid_stream(StreamKind s) {
  return static_cast<int>(s) < kNumStreams;
}
bool valid_kind(OpKind k) {
  return static_cast<int>(k) < kNumOpKinds;
}

// "op 17 (reduce-scatter, unit 'L1' group 0, microbatch 1, reduce-scatter stream)".
std::string op_text(const RankProgram& program, std::size_t i,
                    const std::vector<std::string>* unit_names) {
  const Op& op = program.ops[i];
  std::string text = str_cat("op ", i, " (");
  text += valid_kind(op.kind) ? std::string(to_string(op.kind))
                              : str_cat("kind ", static_cast<int>(op.kind));
  if (op.unit >= 0) {
    if (unit_names != nullptr && idx(op.unit) < unit_names->size()) {
      text += str_cat(", unit '", (*unit_names)[idx(op.unit)], "'");
    } else {
      text += str_cat(", unit ", op.unit);
    }
    if (op.group >= 0) {
      text += str_cat(" group ", op.group);
    }
  }
  if (op.microbatch >= 0) {
    text += str_cat(", microbatch ", op.microbatch);
  }
  text += valid_stream(op.stream) ? str_cat(", ", to_string(op.stream), " stream)")
                                  : str_cat(", stream ", static_cast<int>(op.stream), ")");
  return text;
}

// Names a rank class and its ops in error messages.
class Where {
 public:
  Where(const Schedule& schedule, std::size_t cls) : schedule_(schedule), cls_(cls) {}

  const RankProgram& program() const { return schedule_.programs()[cls_]; }
  std::string prefix() const {
    return str_cat("rank class ", cls_, " (rank ", program().representative_rank, ")");
  }
  std::string op(std::size_t i) const { return op_text(program(), i, &schedule_.unit_names()); }
  Error fail(ErrorCode code, std::size_t i, std::string_view what) const {
    return Error(code, str_cat(prefix(), " ", op(i), ": ", what));
  }
  Error fail(ErrorCode code, std::string_view what) const {
    return Error(code, str_cat(prefix(), ": ", what));
  }

 private:
  const Schedule& schedule_;
  std::size_t cls_;
};

// A (unit, group) pair as one map key.
std::int64_t group_key(std::int32_t unit, std::int32_t group) {
  return (static_cast<std::int64_t>(unit) << 32) | static_cast<std::uint32_t>(group);
}

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

// One op on a cycle of the DAG given by the two predecessor lists (Kahn's algorithm leaves every
// node on or after a cycle; walking predecessors inside that set must repeat a node).
std::size_t op_on_cycle(const std::vector<std::int32_t>& stream_pred,
                        const std::vector<std::int32_t>& event_pred) {
  const std::size_t n = stream_pred.size();
  std::vector<std::vector<std::size_t>> succ(n);
  std::vector<std::int32_t> indegree(n, 0);
  for (std::size_t v = 0; v < n; ++v) {
    for (const std::int32_t p : {stream_pred[v], event_pred[v]}) {
      if (p >= 0) {
        succ[idx(p)].push_back(v);
        ++indegree[v];
      }
    }
  }
  std::vector<std::size_t> ready;
  for (std::size_t v = 0; v < n; ++v) {
    if (indegree[v] == 0) {
      ready.push_back(v);
    }
  }
  while (!ready.empty()) {
    const std::size_t v = ready.back();
    ready.pop_back();
    for (const std::size_t w : succ[v]) {
      if (--indegree[w] == 0) {
        ready.push_back(w);
      }
    }
  }
  std::size_t cur = n;
  for (std::size_t v = 0; v < n; ++v) {
    if (indegree[v] > 0) {
      cur = v;
      break;
    }
  }
  FSDP_CHECK(cur < n) << "boost reported a cycle that Kahn's algorithm did not find";
  std::vector<bool> seen(n, false);
  while (!seen[cur]) {
    seen[cur] = true;
    const std::int32_t sp = stream_pred[cur];
    const std::int32_t ep = event_pred[cur];
    cur = sp >= 0 && indegree[idx(sp)] > 0 ? idx(sp) : idx(ep);
  }
  return cur;
}

}  // namespace

// --- HappensBefore -----------------------------------------------------------------------------

Expected<HappensBefore> HappensBefore::make(const RankProgram& program,
                                            const std::vector<std::string>* unit_names) {
  const std::size_t n = program.ops.size();
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    return Error(ErrorCode::kOutOfRange, str_cat("program has ", n, " ops; at most 2^31 - 1"));
  }
  if (program.num_events < 0) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("program has num_events ", program.num_events, "; expected >= 0"));
  }
  auto fail = [&](ErrorCode code, std::size_t i, std::string_view what) {
    return Error(code, str_cat(op_text(program, i, unit_names), ": ", what));
  };
  HappensBefore hb;
  hb.stream_.assign(n, StreamKind::kCompute);
  hb.position_.assign(n, 0);
  hb.stream_pred_.assign(n, -1);
  hb.event_pred_.assign(n, -1);
  std::vector<std::int32_t> record_of(idx(program.num_events), -1);
  std::array<std::int32_t, kNumStreams> last{-1, -1, -1};
  std::array<std::int32_t, kNumStreams> count{0, 0, 0};
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = program.ops[i];
    if (!valid_stream(op.stream) || !valid_kind(op.kind)) {
      return fail(ErrorCode::kOutOfRange, i, "stream or op kind outside its enum");
    }
    const auto s = static_cast<std::size_t>(op.stream);
    hb.stream_[i] = op.stream;
    hb.position_[i] = count[s]++;
    hb.stream_pred_[i] = last[s];
    last[s] = static_cast<std::int32_t>(i);
    if (op.kind == OpKind::kRecord || op.kind == OpKind::kWait) {
      if (op.event < 0 || op.event >= program.num_events) {
        return fail(ErrorCode::kOutOfRange, i,
                    str_cat("event ", op.event, " outside [0, ", program.num_events, ")"));
      }
    }
    if (op.kind == OpKind::kRecord) {
      std::int32_t& r = record_of[idx(op.event)];
      if (r >= 0) {
        return fail(ErrorCode::kFailedPrecondition, i,
                    str_cat("records event ", op.event, " again (first recorded by op ", r, ")"));
      }
      r = static_cast<std::int32_t>(i);
    }
  }
  Graph graph(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = program.ops[i];
    if (op.kind == OpKind::kWait) {
      const std::int32_t r = record_of[idx(op.event)];
      if (r < 0) {
        return fail(ErrorCode::kFailedPrecondition, i,
                    str_cat("waits on event ", op.event, ", which no op records"));
      }
      hb.event_pred_[i] = r;
      boost::add_edge(idx(r), i, graph);
    }
    if (hb.stream_pred_[i] >= 0) {
      boost::add_edge(idx(hb.stream_pred_[i]), i, graph);
    }
  }
  std::vector<std::size_t> reversed;
  reversed.reserve(n);
  try {
    boost::topological_sort(graph, std::back_inserter(reversed));
  } catch (const boost::not_a_dag&) {
    const std::size_t on_cycle = op_on_cycle(hb.stream_pred_, hb.event_pred_);
    return fail(ErrorCode::kCycle, on_cycle,
                "lies on a cycle of stream order and record/wait edges (the step deadlocks)");
  }
  hb.order_.reserve(n);
  for (auto it = reversed.rbegin(); it != reversed.rend(); ++it) {
    hb.order_.push_back(static_cast<std::int32_t>(*it));
  }
  hb.clock_.assign(n, {-1, -1, -1});
  for (const std::int32_t v : hb.order_) {
    std::array<std::int32_t, kNumStreams>& c = hb.clock_[idx(v)];
    for (const std::int32_t p : {hb.stream_pred_[idx(v)], hb.event_pred_[idx(v)]}) {
      if (p >= 0) {
        const std::array<std::int32_t, kNumStreams>& pc = hb.clock_[idx(p)];
        for (std::size_t s = 0; s < c.size(); ++s) {
          c[s] = std::max(c[s], pc[s]);
        }
      }
    }
    c[static_cast<std::size_t>(hb.stream_[idx(v)])] = hb.position_[idx(v)];
  }
  return hb;
}

bool HappensBefore::before(std::int64_t a, std::int64_t b) const {
  FSDP_CHECK(a >= 0 && a < num_ops() && b >= 0 && b < num_ops()) << a << ", " << b;
  if (a == b) {
    return false;
  }
  return position_[idx(a)] <= clock_[idx(b)][static_cast<std::size_t>(stream_[idx(a)])];
}

std::int32_t HappensBefore::stream_predecessor(std::int64_t op) const {
  FSDP_CHECK(op >= 0 && op < num_ops()) << op;
  return stream_pred_[idx(op)];
}

std::int32_t HappensBefore::event_predecessor(std::int64_t op) const {
  FSDP_CHECK(op >= 0 && op < num_ops()) << op;
  return event_pred_[idx(op)];
}

// --- critical path -----------------------------------------------------------------------------

Expected<CriticalPath> critical_path(const RankProgram& program,
                                     const std::function<std::int64_t(const Op&)>& weight) {
  FSDP_TRY(HappensBefore order, HappensBefore::make(program));
  return critical_path(program, order, weight);
}

Expected<CriticalPath> critical_path(const RankProgram& program, const HappensBefore& order,
                                     const std::function<std::int64_t(const Op&)>& weight) {
  FSDP_CHECK(order.num_ops() == static_cast<std::int64_t>(program.ops.size()))
      << order.num_ops() << " vs " << program.ops.size();
  const std::size_t n = program.ops.size();
  CriticalPath path;
  if (n == 0) {
    return path;
  }
  std::vector<std::int64_t> dist(n, 0);
  std::vector<std::int32_t> via(n, -1);
  for (const std::int32_t v : order.topological_order()) {
    const std::int64_t w = weight(program.ops[idx(v)]);
    if (w < 0) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat(op_text(program, idx(v), nullptr), ": weight ", w, " is negative"));
    }
    std::int64_t best = 0;
    std::int32_t best_pred = -1;
    for (const std::int32_t p : {order.stream_predecessor(v), order.event_predecessor(v)}) {
      if (p >= 0 &&
          (best_pred < 0 || dist[idx(p)] > best || (dist[idx(p)] == best && p < best_pred))) {
        best = dist[idx(p)];
        best_pred = p;
      }
    }
    if (!checked_add(best, w, &dist[idx(v)])) {
      return Error(ErrorCode::kOutOfRange, "critical path length overflows int64");
    }
    via[idx(v)] = best_pred;
  }
  std::size_t end = 0;
  for (std::size_t v = 1; v < n; ++v) {
    if (dist[v] > dist[end]) {
      end = v;
    }
  }
  path.length = dist[end];
  for (std::int32_t v = static_cast<std::int32_t>(end); v >= 0; v = via[idx(v)]) {
    path.ops.push_back(v);
  }
  std::reverse(path.ops.begin(), path.ops.end());
  return path;
}

// --- memory ------------------------------------------------------------------------------------

Expected<MemoryTally> tally_memory(const RankProgram& program) {
  MemoryTally tally;
  for (const ResidentBuffer& b : program.resident) {
    if (!checked_add(tally.resident_bytes, b.bytes, &tally.resident_bytes)) {
      return Error(ErrorCode::kOutOfRange, "resident bytes overflow int64");
    }
  }
  if (program.num_buffers < 0) {
    return Error(ErrorCode::kOutOfRange,
                 str_cat("program has num_buffers ", program.num_buffers, "; expected >= 0"));
  }
  std::vector<std::int64_t> live_bytes(idx(program.num_buffers), -1);
  std::vector<bool> freed(idx(program.num_buffers), false);
  std::int64_t live = 0;
  for (std::size_t i = 0; i < program.ops.size(); ++i) {
    const Op& op = program.ops[i];
    if (op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) {
      continue;
    }
    if (op.buffer < 0 || op.buffer >= program.num_buffers) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat(op_text(program, i, nullptr), ": buffer ", op.buffer, " outside [0, ",
                           program.num_buffers, ")"));
    }
    const std::size_t b = idx(op.buffer);
    if (op.kind == OpKind::kAlloc) {
      if (live_bytes[b] >= 0) {
        return Error(ErrorCode::kFailedPrecondition,
                     str_cat(op_text(program, i, nullptr), ": allocates buffer ", op.buffer,
                             " a second time"));
      }
      live_bytes[b] = op.bytes;
      if (!checked_add(live, op.bytes, &live)) {
        return Error(ErrorCode::kOutOfRange, "live transient bytes overflow int64");
      }
      tally.peak_transient_bytes = std::max(tally.peak_transient_bytes, live);
    } else {
      if (live_bytes[b] < 0 || freed[b]) {
        return Error(ErrorCode::kFailedPrecondition,
                     str_cat(op_text(program, i, nullptr), ": frees buffer ", op.buffer,
                             freed[b] ? " a second time" : " before it is allocated"));
      }
      freed[b] = true;
      live -= live_bytes[b];
    }
  }
  tally.end_transient_bytes = live;
  return tally;
}

// --- checks ------------------------------------------------------------------------------------

namespace {

Status structure_impl(const Schedule& s) {
  if (s.programs().empty()) {
    return Error(ErrorCode::kFailedPrecondition, "schedule has no rank programs");
  }
  const std::size_t n_classes = s.programs().size();
  std::vector<std::int64_t> count(n_classes, 0);
  std::vector<std::int64_t> lowest(n_classes, -1);
  for (std::size_t r = 0; r < s.rank_class().size(); ++r) {
    const std::int32_t c = s.rank_class()[r];
    if (c < 0 || idx(c) >= n_classes) {
      return Error(ErrorCode::kOutOfRange, str_cat("rank ", r, " maps to rank class ", c,
                                                   ", outside [0, ", n_classes, ")"));
    }
    if (count[idx(c)]++ == 0) {
      lowest[idx(c)] = static_cast<std::int64_t>(r);
    }
  }
  for (std::size_t c = 0; c < n_classes; ++c) {
    const RankProgram& p = s.programs()[c];
    if (count[c] == 0 || p.num_ranks != count[c] || p.representative_rank != lowest[c]) {
      return Error(
          ErrorCode::kFailedPrecondition,
          str_cat("rank class ", c, " claims ", p.num_ranks, " ranks with representative rank ",
                  p.representative_rank, ", but rank_class maps ", count[c],
                  " ranks to it, the lowest ", lowest[c]));
    }
  }
  const std::int64_t ndim = s.mesh().ndim();
  for (std::size_t k = 0; k < s.collectives().size(); ++k) {
    const CollectiveInfo& info = s.collectives()[k];
    if (info.axis < 0 || info.axis >= ndim || !is_collective(info.kind)) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("collective ", k, " has kind ", to_string(info.kind), " on axis ",
                           info.axis, "; expected a collective on an axis in [0, ", ndim, ")"));
    }
  }
  const auto n_units = static_cast<std::int64_t>(s.unit_names().size());
  for (std::size_t c = 0; c < n_classes; ++c) {
    const Where where(s, c);
    const RankProgram& p = s.programs()[c];
    if (p.num_events < 0 || p.num_buffers < 0) {
      return where.fail(ErrorCode::kOutOfRange, "negative num_events or num_buffers");
    }
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const Op& op = p.ops[i];
      if (!valid_stream(op.stream) || !valid_kind(op.kind) ||
          static_cast<int>(op.phase) >= kNumPhases ||
          static_cast<int>(op.buffer_class) >= kNumBufferClasses) {
        return where.fail(ErrorCode::kOutOfRange, i,
                          "stream, kind, phase or buffer class outside its enum");
      }
      if (op.unit < -1 || op.unit >= n_units || op.group < -1 || op.microbatch < -1 ||
          op.microbatch >= s.num_microbatches()) {
        return where.fail(ErrorCode::kOutOfRange, i,
                          str_cat("unit ", op.unit, ", group ", op.group, " or microbatch ",
                                  op.microbatch, " out of range (", n_units, " units, ",
                                  s.num_microbatches(), " microbatches)"));
      }
      if (op.elements < 0 || op.bytes < 0 || op.flops < 0 || op.mem_bytes < 0) {
        return where.fail(ErrorCode::kOutOfRange, i,
                          "negative elements, bytes, flops or mem_bytes");
      }
      const bool needs_event = op.kind == OpKind::kRecord || op.kind == OpKind::kWait;
      if (needs_event && (op.event < 0 || op.event >= p.num_events)) {
        return where.fail(ErrorCode::kOutOfRange, i,
                          str_cat("event ", op.event, " outside [0, ", p.num_events, ")"));
      }
      const bool needs_buffer = op.kind == OpKind::kAlloc || op.kind == OpKind::kFree;
      if (needs_buffer && (op.buffer < 0 || op.buffer >= p.num_buffers)) {
        return where.fail(ErrorCode::kOutOfRange, i,
                          str_cat("buffer ", op.buffer, " outside [0, ", p.num_buffers, ")"));
      }
      if (is_collective(op.kind)) {
        if (op.collective < 0 || idx(op.collective) >= s.collectives().size()) {
          return where.fail(
              ErrorCode::kOutOfRange, i,
              str_cat("collective ", op.collective, " outside [0, ", s.collectives().size(), ")"));
        }
        if (op.axis < 0 || op.axis >= ndim) {
          return where.fail(ErrorCode::kOutOfRange, i,
                            str_cat("mesh axis ", op.axis, " outside [0, ", ndim, ")"));
        }
      }
    }
  }
  return ok_status();
}

// Builds every program's HappensBefore; the errors name the rank class.
Expected<std::vector<HappensBefore>> build_orders(const Schedule& s) {
  std::vector<HappensBefore> orders;
  orders.reserve(s.programs().size());
  for (std::size_t c = 0; c < s.programs().size(); ++c) {
    auto hb = HappensBefore::make(s.programs()[c], &s.unit_names());
    if (!hb) {
      return hb.error().with_context(Where(s, c).prefix());
    }
    orders.push_back(std::move(*hb));
  }
  return orders;
}

// Every record is issued before the waits on its event (HappensBefore::make has already checked
// that each waited event has exactly one record).
Status record_order_impl(const Schedule& s) {
  for (std::size_t c = 0; c < s.programs().size(); ++c) {
    const Where where(s, c);
    const RankProgram& p = s.programs()[c];
    std::vector<bool> recorded(idx(p.num_events), false);
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const Op& op = p.ops[i];
      if (op.kind == OpKind::kRecord) {
        recorded[idx(op.event)] = true;
      } else if (op.kind == OpKind::kWait && !recorded[idx(op.event)]) {
        return where.fail(ErrorCode::kFailedPrecondition, i,
                          str_cat("waits on event ", op.event,
                                  " before its record is issued (a stream issued in program "
                                  "order would not wait)"));
      }
    }
  }
  return ok_status();
}

// What the collectives table says about one (unit, group).
struct GroupNeeds {
  std::int64_t unshard = 0;  // all-gathers filling the unsharded buffer
  std::int64_t sync = 0;     // all-gathers of the model-weight sync
};

// One kUnshardedWeights buffer of a program as the weights check sees it.
struct WeightBuffer {
  std::int32_t alloc = -1;
  std::int32_t freed_by = -1;         // the first free of the buffer
  std::string_view role;              // kUnshard or kWeightSync once a gather writes it
  std::vector<std::int32_t> gathers;  // the all-gathers that write it
};

Status weights_program(const Schedule& s, std::size_t c, const HappensBefore& hb) {
  const Where where(s, c);
  const RankProgram& p = s.programs()[c];
  std::map<std::int64_t, GroupNeeds> needs;
  std::map<std::int32_t, std::vector<std::int32_t>> gathered_groups;  // unit -> its groups
  for (const CollectiveInfo& info : s.collectives()) {
    if (info.what != kUnshard && info.what != kWeightSync) {
      continue;
    }
    GroupNeeds& n = needs[group_key(info.unit, info.group)];
    if (n.unshard == 0 && n.sync == 0) {
      gathered_groups[info.unit].push_back(info.group);
    }
    ++(info.what == kUnshard ? n.unshard : n.sync);
  }
  std::vector<WeightBuffer> buffers(idx(p.num_buffers));
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (op.kind == OpKind::kFree && buffers[idx(op.buffer)].freed_by < 0) {
      buffers[idx(op.buffer)].freed_by = static_cast<std::int32_t>(i);
    }
  }
  std::map<std::int64_t, std::int32_t> last_alloc;     // (unit, group) -> unsharded-class buffer
  std::map<std::int64_t, std::int32_t> unshard_buf;    // (unit, group) -> latest unshard buffer
  std::map<std::int64_t, std::int32_t> sync_buf;       // (unit, group) -> latest sync buffer
  std::map<std::int32_t, std::int32_t> last_backward;  // unit -> latest backward op
  std::map<std::int64_t, std::int32_t> last_copy;      // (unit, group) -> latest grad copy
  std::map<std::int64_t, std::vector<std::int32_t>> grad_collectives;
  const auto ii = [](std::size_t i) { return static_cast<std::int32_t>(i); };

  // Checks that op i reads the weights of buffer b (the latest of `role` for its group).
  auto reads = [&](std::size_t i, std::int32_t group, std::string_view role,
                   const std::map<std::int64_t, std::int32_t>& latest,
                   std::int64_t n_gathers) -> Status {
    const Op& op = p.ops[i];
    const auto it = latest.find(group_key(op.unit, group));
    if (it == latest.end()) {
      return where.fail(ErrorCode::kFailedPrecondition, i,
                        str_cat("runs before any ", role, " all-gather of group ", group));
    }
    const WeightBuffer& b = buffers[idx(it->second)];
    if (static_cast<std::int64_t>(b.gathers.size()) != n_gathers) {
      return where.fail(ErrorCode::kFailedPrecondition, i,
                        str_cat("reads buffer ", it->second, " of group ", group, ", written by ",
                                b.gathers.size(), " ", role, " all-gathers; expected ", n_gathers));
    }
    for (const std::int32_t g : b.gathers) {
      if (!hb.before(g, static_cast<std::int64_t>(i))) {
        return where.fail(ErrorCode::kFailedPrecondition, i,
                          str_cat("does not happen after ", where.op(idx(g)), ", which fills ",
                                  role, " buffer ", it->second, " of group ", group));
      }
    }
    if (b.freed_by < 0) {
      return where.fail(ErrorCode::kFailedPrecondition, i,
                        str_cat("reads ", role, " buffer ", it->second, " of group ", group,
                                ", which is never freed"));
    }
    if (!hb.before(static_cast<std::int64_t>(i), b.freed_by)) {
      return where.fail(
          ErrorCode::kFailedPrecondition, i,
          str_cat("does not happen before ", where.op(idx(b.freed_by)), ", which frees ", role,
                  " buffer ", it->second, " of group ", group));
    }
    return ok_status();
  };

  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    const std::int64_t key = group_key(op.unit, op.group);
    if (op.kind == OpKind::kAlloc && op.buffer_class == BufferClass::kUnshardedWeights) {
      last_alloc[key] = op.buffer;
      buffers[idx(op.buffer)].alloc = ii(i);
    } else if (is_collective(op.kind)) {
      const std::string_view what = s.collectives()[idx(op.collective)].what;
      if (what == kUnshard || what == kWeightSync) {
        const auto it = last_alloc.find(key);
        if (it == last_alloc.end()) {
          return where.fail(
              ErrorCode::kFailedPrecondition, i,
              str_cat("gathers (", what, ") into no allocated unsharded-weights buffer"));
        }
        WeightBuffer& b = buffers[idx(it->second)];
        if (!b.role.empty() && b.role != what) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            str_cat("gathers (", what, ") into buffer ", it->second,
                                    ", already written by a ", b.role, " all-gather"));
        }
        if (!hb.before(b.alloc, static_cast<std::int64_t>(i))) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            str_cat("does not happen after ", where.op(idx(b.alloc)),
                                    ", which allocates its buffer ", it->second));
        }
        b.role = what == kUnshard ? kUnshard : kWeightSync;
        b.gathers.push_back(ii(i));
        (what == kUnshard ? unshard_buf : sync_buf)[key] = it->second;
      } else if (what == kGradReduce || what == kGradFinalize) {
        const auto copy = last_copy.find(key);
        if (copy == last_copy.end() || !hb.before(copy->second, static_cast<std::int64_t>(i))) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            "does not happen after the copy of the group's backward gradients");
        }
        grad_collectives[key].push_back(ii(i));
      }
    } else if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward ||
               op.kind == OpKind::kRecompute) {
      const auto groups = gathered_groups.find(op.unit);
      if (groups != gathered_groups.end()) {
        for (const std::int32_t g : groups->second) {
          const GroupNeeds& n = needs[group_key(op.unit, g)];
          if (n.unshard > 0) {
            FSDP_RETURN_IF_ERROR(reads(i, g, kUnshard, unshard_buf, n.unshard));
          }
          if (n.sync > 0) {
            FSDP_RETURN_IF_ERROR(reads(i, g, kWeightSync, sync_buf, n.sync));
          }
        }
      }
      if (op.kind == OpKind::kBackward) {
        last_backward[op.unit] = ii(i);
      }
    } else if (op.kind == OpKind::kGradCopy) {
      const auto bwd = last_backward.find(op.unit);
      if (bwd == last_backward.end() || !hb.before(bwd->second, static_cast<std::int64_t>(i))) {
        return where.fail(ErrorCode::kFailedPrecondition, i,
                          "does not happen after a backward of its unit");
      }
      last_copy[key] = ii(i);
    } else if (op.kind == OpKind::kOptimizerStep) {
      for (const std::int32_t g : grad_collectives[key]) {
        if (!hb.before(g, static_cast<std::int64_t>(i))) {
          return where.fail(
              ErrorCode::kFailedPrecondition, i,
              str_cat("does not happen after gradient collective ", where.op(idx(g))));
        }
      }
    }
  }
  return ok_status();
}

Status buffers_program(const Schedule& s, std::size_t c, const HappensBefore& hb) {
  const Where where(s, c);
  const RankProgram& p = s.programs()[c];
  std::vector<std::int32_t> alloc(idx(p.num_buffers), -1);
  std::vector<std::int32_t> freed(idx(p.num_buffers), -1);
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) {
      continue;
    }
    const std::size_t b = idx(op.buffer);
    if (op.kind == OpKind::kAlloc) {
      if (alloc[b] >= 0) {
        return where.fail(ErrorCode::kFailedPrecondition, i,
                          str_cat("allocates buffer ", op.buffer, " again (first allocated by ",
                                  where.op(idx(alloc[b])), ")"));
      }
      std::int64_t bytes = 0;
      if (!checked_mul(op.elements, dtype_bytes(op.dtype), &bytes) || bytes != op.bytes) {
        return where.fail(ErrorCode::kFailedPrecondition, i,
                          str_cat("allocates ", op.bytes, " bytes for ", op.elements,
                                  " elements of ", to_string(op.dtype)));
      }
      alloc[b] = static_cast<std::int32_t>(i);
      continue;
    }
    if (alloc[b] < 0) {
      return where.fail(ErrorCode::kFailedPrecondition, i,
                        str_cat("frees buffer ", op.buffer, " before it is allocated"));
    }
    if (freed[b] >= 0) {
      return where.fail(ErrorCode::kFailedPrecondition, i,
                        str_cat("frees buffer ", op.buffer, " again (first freed by ",
                                where.op(idx(freed[b])), ")"));
    }
    const Op& a = p.ops[idx(alloc[b])];
    if (a.buffer_class != op.buffer_class || a.unit != op.unit || a.group != op.group) {
      return where.fail(
          ErrorCode::kFailedPrecondition, i,
          str_cat("frees buffer ", op.buffer, " as ", to_string(op.buffer_class), " but ",
                  where.op(idx(alloc[b])), " allocated it as ", to_string(a.buffer_class)));
    }
    if (!hb.before(alloc[b], static_cast<std::int64_t>(i))) {
      return where.fail(ErrorCode::kFailedPrecondition, i,
                        str_cat("frees buffer ", op.buffer, " without happening after ",
                                where.op(idx(alloc[b])), ", which allocates it"));
    }
    freed[b] = static_cast<std::int32_t>(i);
  }
  for (std::size_t b = 0; b < alloc.size(); ++b) {
    if (alloc[b] < 0) {
      return where.fail(ErrorCode::kFailedPrecondition,
                        str_cat("transient buffer ", b, " is never allocated"));
    }
    if (freed[b] < 0) {
      return where.fail(ErrorCode::kFailedPrecondition, idx(alloc[b]),
                        str_cat("allocates buffer ", b, ", which is not freed by the step's end"));
    }
  }
  auto tally = tally_memory(p);
  if (!tally) {
    return tally.error().with_context(where.prefix());
  }
  if (tally->end_transient_bytes != 0) {
    return where.fail(ErrorCode::kFailedPrecondition,
                      str_cat(tally->end_transient_bytes,
                              " transient bytes are live at the step's end; expected 0"));
  }
  return ok_status();
}

// Indices of the collective ops of each stream, in issue order.
std::array<std::vector<std::int32_t>, kNumStreams> collectives_by_stream(const RankProgram& p) {
  std::array<std::vector<std::int32_t>, kNumStreams> out;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (is_collective(p.ops[i].kind)) {
      out[static_cast<std::size_t>(p.ops[i].stream)].push_back(static_cast<std::int32_t>(i));
    }
  }
  return out;
}

Status collectives_impl(const Schedule& s) {
  const RankProgram& ref = s.programs().front();
  const auto ref_seq = collectives_by_stream(ref);
  const auto describe = [&](const Op& op) {
    return str_cat("(", to_string(op.kind), ", axis '", s.mesh().axis_name(op.axis),
                   "', collective ", op.collective, ")");
  };
  for (std::size_t c = 0; c < s.programs().size(); ++c) {
    const Where where(s, c);
    const RankProgram& p = s.programs()[c];
    FSDP_TRY(MeshCoordinate coord, s.mesh().coordinate(p.representative_rank));
    const auto seq = collectives_by_stream(p);
    std::vector<bool> issued(s.collectives().size(), false);
    for (const std::vector<std::int32_t>& stream_ops : seq) {
      for (const std::int32_t i : stream_ops) {
        issued[idx(p.ops[idx(i)].collective)] = true;
      }
    }
    const auto missing = std::find(issued.begin(), issued.end(), false);
    if (missing != issued.end()) {
      const auto k = static_cast<std::size_t>(missing - issued.begin());
      const CollectiveInfo& info = s.collectives()[k];
      return where.fail(ErrorCode::kFailedPrecondition,
                        str_cat("never issues collective ", k, " (", to_string(info.kind), " ",
                                info.what, " of unit ", info.unit, " group ", info.group, ")"));
    }
    for (std::size_t st = 0; st < seq.size(); ++st) {
      for (std::size_t k = 0; k < seq[st].size(); ++k) {
        const std::size_t i = idx(seq[st][k]);
        const Op& op = p.ops[i];
        if (k >= ref_seq[st].size()) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            str_cat("is collective ", k + 1,
                                    " of its stream, but rank class 0 "
                                    "issues only ",
                                    ref_seq[st].size(), " there"));
        }
        const Op& r = ref.ops[idx(ref_seq[st][k])];
        if (op.kind != r.kind || op.axis != r.axis || op.collective != r.collective) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            str_cat("issues ", describe(op), " as collective ", k,
                                    " of its stream where rank class 0 issues ", describe(r)));
        }
        const CollectiveInfo& info = s.collectives()[idx(op.collective)];
        if (op.kind != info.kind || op.axis != info.axis || op.unit != info.unit ||
            op.group != info.group || op.dtype != info.dtype) {
          return where.fail(
              ErrorCode::kFailedPrecondition, i,
              str_cat("disagrees with collective ", op.collective, " (", to_string(info.kind),
                      " of unit ", info.unit, " group ", info.group, " in ", to_string(info.dtype),
                      " on axis ", info.axis, ")"));
        }
        std::int64_t bytes = 0;
        if (!checked_mul(op.elements, dtype_bytes(op.dtype), &bytes) || bytes != op.bytes) {
          return where.fail(ErrorCode::kFailedPrecondition, i,
                            str_cat("moves ", op.bytes, " bytes for ", op.elements, " elements of ",
                                    to_string(op.dtype)));
        }
        if (!info.member_elements.empty()) {
          const std::int64_t size = s.mesh().axis_size(info.axis);
          const std::int64_t member = coord.local_ranks[idx(info.axis)];
          if (static_cast<std::int64_t>(info.member_elements.size()) != size) {
            return where.fail(ErrorCode::kFailedPrecondition, i,
                              str_cat("collective ", op.collective, " lists ",
                                      info.member_elements.size(), " member counts for axis '",
                                      s.mesh().axis_name(info.axis), "' of size ", size));
          }
          if (info.member_elements[idx(member)] != op.elements) {
            return where.fail(
                ErrorCode::kFailedPrecondition, i,
                str_cat("moves ", op.elements, " elements where collective ", op.collective,
                        " lists ", info.member_elements[idx(member)], " for member ", member));
          }
        } else if (op.elements != r.elements) {
          return where.fail(
              ErrorCode::kFailedPrecondition, i,
              str_cat("moves ", op.elements, " elements where rank class 0 moves ", r.elements,
                      " and collective ", op.collective, " lists no per-member counts"));
        }
      }
      if (seq[st].size() < ref_seq[st].size()) {
        return where.fail(ErrorCode::kFailedPrecondition,
                          str_cat("issues ", seq[st].size(), " collectives on the ",
                                  to_string(static_cast<StreamKind>(st)),
                                  " stream where rank class 0 issues ", ref_seq[st].size()));
      }
    }
  }
  return ok_status();
}

}  // namespace

Status check_structure(const Schedule& schedule) {
  return structure_impl(schedule);
}

Status check_events(const Schedule& schedule) {
  FSDP_RETURN_IF_ERROR(structure_impl(schedule));
  FSDP_TRY(std::vector<HappensBefore> orders, build_orders(schedule));
  (void)orders;
  return record_order_impl(schedule);
}

Status check_weights_gathered(const Schedule& schedule) {
  FSDP_RETURN_IF_ERROR(structure_impl(schedule));
  FSDP_TRY(std::vector<HappensBefore> orders, build_orders(schedule));
  for (std::size_t c = 0; c < orders.size(); ++c) {
    FSDP_RETURN_IF_ERROR(weights_program(schedule, c, orders[c]));
  }
  return ok_status();
}

Status check_buffer_lifetimes(const Schedule& schedule) {
  FSDP_RETURN_IF_ERROR(structure_impl(schedule));
  FSDP_TRY(std::vector<HappensBefore> orders, build_orders(schedule));
  for (std::size_t c = 0; c < orders.size(); ++c) {
    FSDP_RETURN_IF_ERROR(buffers_program(schedule, c, orders[c]));
  }
  return ok_status();
}

Status check_collective_order(const Schedule& schedule) {
  FSDP_RETURN_IF_ERROR(structure_impl(schedule));
  return collectives_impl(schedule);
}

Status check_schedule(const Schedule& schedule) {
  FSDP_RETURN_IF_ERROR(structure_impl(schedule));
  FSDP_TRY(std::vector<HappensBefore> orders, build_orders(schedule));
  FSDP_RETURN_IF_ERROR(record_order_impl(schedule));
  for (std::size_t c = 0; c < orders.size(); ++c) {
    FSDP_RETURN_IF_ERROR(weights_program(schedule, c, orders[c]));
    FSDP_RETURN_IF_ERROR(buffers_program(schedule, c, orders[c]));
  }
  return collectives_impl(schedule);
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// The DAG of a program has one node per op and an edge from each op to the next op of its stream
// and from each record to the waits on its event; vector clocks over the streams, computed in a
// topological order, answer "a before b" in O(1).
#include "core/schedule/happens_before.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/exception.hpp>
#include <boost/graph/topological_sort.hpp>

#include <algorithm>
#include <iterator>
#include <limits>
#include <string_view>

#include "core/base/check.h"
#include "core/base/checked_math.h"
#include "core/base/strings.h"

namespace fsdp {
namespace {

std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

bool valid_stream(StreamKind s) { return static_cast<int>(s) < kNumStreams; }
bool valid_kind(OpKind k) { return static_cast<int>(k) < kNumOpKinds; }

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

// "op 17 (reduce-scatter, unit 'L1' group 0, microbatch 1, reduce-scatter stream)".
std::string describe_op(const RankProgram& program, std::size_t i,
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
    return Error(code, str_cat(describe_op(program, i, unit_names), ": ", what));
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
                   str_cat(describe_op(program, idx(v), nullptr), ": weight ", w, " is negative"));
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

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// HappensBefore: the partial order in which one RankProgram's ops run (stream order plus
// record/wait edges), answered in O(1) per query from vector clocks; critical_path, the longest
// weighted path through it; describe_op, how errors name an op. The verifier
// (schedule_verifier.h) and the analyses build on it (docs/design/schedule-ir.md, "Checks").
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/base/expected.h"
#include "core/schedule/op.h"
#include "core/schedule/schedule.h"

namespace fsdp {

// "op 17 (reduce-scatter, unit 'L1' group 0, microbatch 1, reduce-scatter stream)"; units by
// index when `unit_names` is null.
std::string describe_op(const RankProgram& program, std::size_t i,
                        const std::vector<std::string>* unit_names);

// The happens-before order of one RankProgram. Its DAG has one node per op and an edge from each
// op to the next op of the same stream and from each record to every wait on its event. Ops on a
// stream run in issue order, and a wait holds its stream until the record is reached, so "a
// happens before b" means a has finished before b starts. Queries use vector clocks over the
// streams computed in a topological order: O(ops x streams) to build, O(1) per query. Immutable.
class HappensBefore {
 public:
  // Errors: an op with a stream or kind outside its enum, or a record/wait event outside
  // [0, num_events) (kOutOfRange); an event recorded twice or waited on but never recorded
  // (kFailedPrecondition); a cycle (kCycle, naming one op on it). Messages name the op by index,
  // kind and stream, and by unit when `unit_names` is given.
  static Expected<HappensBefore> make(const RankProgram& program,
                                      const std::vector<std::string>* unit_names = nullptr);

  std::int64_t num_ops() const { return static_cast<std::int64_t>(stream_pred_.size()); }
  // Whether op a finishes before op b starts: false when a == b. FSDP_CHECKs both indices.
  bool before(std::int64_t a, std::int64_t b) const;
  // The ops in a topological order of the DAG (from boost::topological_sort).
  const std::vector<std::int32_t>& topological_order() const { return order_; }
  // The op's predecessors in the DAG: the previous op of its stream and, for a wait, the record
  // of its event; -1 where there is none.
  std::int32_t stream_predecessor(std::int64_t op) const;
  std::int32_t event_predecessor(std::int64_t op) const;

 private:
  HappensBefore() = default;
  std::vector<StreamKind> stream_;
  std::vector<std::int32_t> position_;     // index of the op on its stream
  std::vector<std::int32_t> stream_pred_;  // previous op of the same stream, or -1
  std::vector<std::int32_t> event_pred_;   // a wait's record op, or -1
  std::vector<std::array<std::int32_t, kNumStreams>> clock_;  // last position per stream <= op
  std::vector<std::int32_t> order_;
};

// A longest path through a program's happens-before DAG.
struct CriticalPath {
  std::int64_t length = 0;        // the sum of the weights of `ops`
  std::vector<std::int32_t> ops;  // op indices along the path, first to last
  friend bool operator==(const CriticalPath&, const CriticalPath&) = default;
};

// The longest path through the DAG of `program` with each op weighted by `weight(op)` (e.g. its
// duration; 0 for records and waits). Ties go to the lower op index. An empty program gives
// length 0 and no ops. Errors: those of HappensBefore::make; a negative weight
// (kInvalidArgument); a length beyond int64 (kOutOfRange).
Expected<CriticalPath> critical_path(const RankProgram& program,
                                     const std::function<std::int64_t(const Op&)>& weight);
// The same over a HappensBefore already built for `program`.
Expected<CriticalPath> critical_path(const RankProgram& program, const HappensBefore& order,
                                     const std::function<std::int64_t(const Op&)>& weight);

}  // namespace fsdp

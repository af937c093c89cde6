// SPDX-License-Identifier: Apache-2.0
// The invariants every Schedule must satisfy (docs/design/schedule-ir.md, "Checks"): well-formed
// ids and rank classes; an acyclic happens-before DAG per program; weights gathered before and
// freed after every compute that reads them; every transient buffer allocated and freed exactly
// once; the same collective sequence on every rank class. Each check returns the first violation
// as one line naming the rank class (its representative rank), the op index, kind, unit and
// stream. No exception escapes (Boost.Graph's not_a_dag becomes ErrorCode::kCycle).
#pragma once

#include "core/base/expected.h"
#include "core/schedule/op.h"
#include "core/schedule/schedule.h"

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fsdp {

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

// Transient memory of one program counted in issue order (a valid serial execution: issue order
// respects every stream's order and issues records before their waits).
struct MemoryTally {
  std::int64_t resident_bytes = 0;        // the sum of RankProgram::resident
  std::int64_t peak_transient_bytes = 0;  // the most transient bytes live at once
  std::int64_t end_transient_bytes = 0;   // live at the end of the step: 0 when all are freed
  friend bool operator==(const MemoryTally&, const MemoryTally&) = default;
};

// Errors: a buffer id outside [0, num_buffers) (kOutOfRange); a buffer allocated twice, or freed
// before its allocation or twice (kFailedPrecondition); byte totals beyond int64 (kOutOfRange).
Expected<MemoryTally> tally_memory(const RankProgram& program);

// Runs every check below, in this order, and returns the first violation.
Status check_schedule(const Schedule& schedule);

// Shape of the schedule: at least one program; rank_class maps every rank to a program, each
// program's num_ranks is its rank count and its representative the lowest of them; every op's
// stream, kind, unit, event, buffer, axis and collective id is in range and present where its
// kind needs it (kOutOfRange / kFailedPrecondition).
Status check_structure(const Schedule& schedule);

// (a) Per program: every waited event is recorded exactly once, the DAG is acyclic (kCycle), and
// every record is issued before the waits on its event (a backend issuing in program order would
// otherwise wait on nothing).
Status check_events(const Schedule& schedule);

// (b) Per program, with the collectives table telling which groups gather: every forward,
// backward and recompute of a unit happens after the all-gathers that filled the unsharded
// buffer of each of its sharded groups (the buffer's alloc happens before those all-gathers) and
// before that buffer's free; likewise for the model-weight-sync buffer of ZeRO-1/2/HFSDP groups.
// Every gradient collective of a group happens after the grad copy of its unit's latest backward,
// and the group's optimizer step after all of its gradient collectives.
Status check_weights_gathered(const Schedule& schedule);

// (c) Per program: every transient buffer id in [0, num_buffers) is allocated exactly once and
// freed exactly once by the end of the step, by a free of the same buffer class, unit and group
// that happens after the alloc; alloc bytes = elements x dtype bytes; the live transient bytes
// return to 0.
Status check_buffer_lifetimes(const Schedule& schedule);

// (d) Every program issues, on each stream, the same sequence of (kind, axis, collective index)
// as the first program, so every member of a collective group issues its collectives in the same
// order (with the acyclic DAGs of (a), the step cannot deadlock), and issues every collective of
// the table at least once (an entry nobody issues is a dropped leg). Each collective op agrees
// with its CollectiveInfo (kind, axis, unit, group, dtype) and moves elements x dtype bytes; with
// member_elements, the op's elements are the representative rank's entry (by its coordinate on
// the axis); without, every program has the same elements for that op.
Status check_collective_order(const Schedule& schedule);

}  // namespace fsdp

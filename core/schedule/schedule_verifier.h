// SPDX-License-Identifier: Apache-2.0
// The verifier: the invariants every Schedule satisfies (docs/design/schedule-ir.md, "Checks").
// Schedule::make runs verify_schedule on the parts it is given, in every build type, so a
// Schedule that exists is verified and its consumers (the simulator, the backends) re-check
// nothing. Each check returns the first violation as one line naming the rank class (its
// representative rank), the op index, kind, unit and stream. No exception escapes.
#pragma once

#include <cstdint>

#include "core/base/expected.h"
#include "core/schedule/happens_before.h"
#include "core/schedule/schedule.h"

namespace fsdp {

// Runs every check below, in this order, and returns the first violation.
Status verify_schedule(const ScheduleParts& schedule);

// Shape of the schedule: at least one program; rank_class maps every rank to a program, each
// program's num_ranks is its rank count and its representative the lowest of them; every op's
// stream, kind, unit, event, buffer, axis and collective id is in range and present where its
// kind needs it; every operand's space, access, extent, buffer and group is in range, and each
// op kind has the operands it needs (a collective: send and receive buffers; a unit's compute:
// the weights of every group of the unit); every collective of the table names a step of a leg
// of a group of the geometry that performs its kind on its axis (kOutOfRange /
// kFailedPrecondition).
Status check_structure(const ScheduleParts& schedule);

// (a) Per program: every waited event is recorded exactly once, the DAG is acyclic (kCycle), and
// every record is issued before the waits on its event (a backend issuing in program order would
// otherwise wait on nothing).
Status check_events(const ScheduleParts& schedule);

// (b) Per program: every transient buffer id in [0, num_buffers) is allocated exactly once and
// freed exactly once by the end of the step, by a free of the same buffer class, unit and group
// that happens after the alloc; alloc bytes = elements x dtype bytes; the live transient bytes
// return to 0.
Status check_buffer_lifetimes(const ScheduleParts& schedule);

// (c) Use-def, per program, over the operands: every access to a transient buffer happens after
// its allocation and before its release, and the buffer belongs to the operand's group; every
// read of a transient buffer has a write before it; conflicting accesses to a buffer (one of them
// a write) are ordered by happens-before in issue order, so a read sees the latest write on every
// path and no two writes race. Resident buffers hold their values from the previous step. Each
// parameter collective's operands hold the layout ranges it moves on the representative rank:
// the send operand's extent covers the step's input range, the receive operand's and the
// accumulator's its output range (a buffer of extent E holds exactly the rank's range of E; a
// reduce-scatter before the last of a chain works in place in the full-extent partial buffer).
Status check_operands(const ScheduleParts& schedule);

// (d) Every program issues, on each stream, the same sequence of (kind, axis, collective index)
// as the first program, so every member of a collective group issues its collectives in the same
// order (with the acyclic DAGs of (a), the step cannot deadlock), and issues every collective of
// the table at least once (an entry nobody issues is a dropped leg). Each collective op agrees
// with its CollectiveInfo (kind, axis, unit, group, dtype) and moves elements x dtype bytes; with
// member_elements, the op's elements are the representative rank's entry (by its coordinate on
// the axis); without, every program has the same elements for that op.
Status check_collective_order(const ScheduleParts& schedule);

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

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// SimClasses: the rank classes the simulator runs, one simulated program instance each. They
// refine the schedule's program classes (and, with stragglers, straggler vs normal ranks) until
// they are stable over the mesh: every rank of a class sees the same set of classes in its group
// on each axis. Stability makes "a collective starts when every class of its group has arrived"
// exact: the classes of a group form one *group type* per axis, and every class belongs to exactly
// one type per axis. Immutable value built by make_sim_classes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/base/expected.h"
#include "core/mesh/device_mesh.h"

namespace fsdp::sim {

struct SimClasses {
  std::vector<std::int32_t> rank_class;          // class of each rank (size mesh.size())
  std::vector<std::int32_t> program;             // per class: its schedule program
  std::vector<std::int64_t> representative;      // per class: lowest rank
  std::vector<std::int64_t> num_ranks;           // per class
  std::vector<char> straggler;                   // per class: its ranks are stragglers
  std::int64_t ndim = 0;
  std::vector<std::int32_t> group_type;          // [class * ndim + axis]: the class's group type
  std::vector<std::vector<std::int32_t>> types;  // per group type: member classes, ascending
  std::vector<std::int32_t> type_axis;           // per group type: its mesh axis
  std::int32_t num_classes() const { return static_cast<std::int32_t>(program.size()); }
  friend bool operator==(const SimClasses&, const SimClasses&) = default;
};

// Refines (rank_program[r], straggler[r]) into stable classes (color refinement over the mesh's
// axis groups). Class ids are ordered by (program, straggler) and then by first rank, so without
// stragglers and with stable program classes numbered by first rank, class c is program c.
// `straggler` is empty or has one entry per rank. Errors: a rank_program size that is not
// mesh.size(), an entry outside [0, num_programs) (kOutOfRange), a straggler size mismatch.
Expected<SimClasses> make_sim_classes(const DeviceMesh& mesh,
                                      std::span<const std::int32_t> rank_program,
                                      std::int32_t num_programs,
                                      std::span<const char> straggler = {});

}  // namespace fsdp::sim

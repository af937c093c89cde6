// SPDX-License-Identifier: Apache-2.0
// Schedule: the IR of one optimizer step that the simulator executes virtually and the backends
// execute for real. Ranks whose programs are provably identical share one RankProgram (an
// equivalence class); rank_class() maps every rank of the mesh to its program. Immutable once
// built by build_schedule (core/schedule/schedule_builder.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/mesh/device_mesh.h"
#include "core/schedule/op.h"

namespace fsdp {

// A buffer that lives across steps (allocated before the first step, never freed by it).
struct ResidentBuffer {
  BufferClass buffer_class = BufferClass::kShardedWeights;
  std::int32_t unit = -1;
  std::int32_t group = -1;
  std::string what;  // "main_weight", "model_weight", "main_grad", "optimizer_state"
  DType dtype = DType::kFp32;
  std::int64_t elements = 0;
  std::int64_t bytes = 0;
  friend bool operator==(const ResidentBuffer&, const ResidentBuffer&) = default;
};

// One collective of the step's program, shared by every rank class: which buffer of which
// group it moves on which mesh axis, and (for uneven shards on a 1-D mesh) each member's count.
struct CollectiveInfo {
  OpKind kind = OpKind::kAllGather;
  std::int32_t axis = 0;
  std::int32_t unit = -1;
  std::int32_t group = -1;
  DType dtype = DType::kBf16;
  std::string what;  // "unshard", "model_weight_sync", "grad_reduce", "grad_finalize"
  // Elements each member of the axis group contributes (AG) or receives (RS), or reduces (AR);
  // empty when every member has the same count (then Op::elements is that count).
  std::vector<std::int64_t> member_elements;
  friend bool operator==(const CollectiveInfo&, const CollectiveInfo&) = default;
};

// The op program of one rank equivalence class.
struct RankProgram {
  std::int64_t representative_rank = 0;  // the lowest rank of the class
  std::int64_t num_ranks = 0;            // ranks in the class
  std::vector<Op> ops;                   // program (issue) order, all streams interleaved
  std::vector<ResidentBuffer> resident;  // buffers live across steps
  std::int32_t num_events = 0;           // event ids are [0, num_events)
  std::int32_t num_buffers = 0;          // transient buffer ids are [0, num_buffers)
  friend bool operator==(const RankProgram&, const RankProgram&) = default;
};

// Per step: the count of each collective kind on each mesh axis, e.g. {"reduce-scatter": {"dp":
// 9}}; the same for every rank.
using CollectiveSummary = std::map<std::string, std::map<std::string, std::int64_t>>;

class Schedule {
 public:
  Schedule(DeviceMesh mesh, bool unified_streams, std::int64_t num_microbatches,
           std::vector<RankProgram> programs, std::vector<std::int32_t> rank_class,
           std::vector<CollectiveInfo> collectives, std::vector<std::string> unit_names);

  const DeviceMesh& mesh() const { return mesh_; }
  bool unified_streams() const { return unified_streams_; }
  std::int64_t num_microbatches() const { return num_microbatches_; }
  const std::vector<RankProgram>& programs() const { return programs_; }
  // Program index of each rank (size mesh().size()).
  const std::vector<std::int32_t>& rank_class() const { return rank_class_; }
  const RankProgram& program_of_rank(std::int64_t rank) const;
  const std::vector<CollectiveInfo>& collectives() const { return collectives_; }
  const std::vector<std::string>& unit_names() const { return unit_names_; }
  CollectiveSummary collective_summary() const;

  friend bool operator==(const Schedule&, const Schedule&) = default;

 private:
  DeviceMesh mesh_;
  bool unified_streams_ = false;
  std::int64_t num_microbatches_ = 1;
  std::vector<RankProgram> programs_;
  std::vector<std::int32_t> rank_class_;
  std::vector<CollectiveInfo> collectives_;
  std::vector<std::string> unit_names_;
};

}  // namespace fsdp

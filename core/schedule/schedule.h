// SPDX-License-Identifier: Apache-2.0
// Schedule: the IR of one optimizer step that the simulator executes virtually and the backends
// execute for real. Ranks whose programs are provably identical share one RankProgram (an
// equivalence class); rank_class() maps every rank of the mesh to its program. Every op names the
// buffers it reads and writes (operand.h); the schedule carries the geometry every consumer needs
// to issue it (group_geometry.h: layouts, placements, legs). A Schedule exists only verified:
// Schedule::make runs verify_schedule (schedule_verifier.h) on its parts, so consumers trust it
// and re-check nothing. build_schedule (schedule_builder.h) is its usual producer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/expected.h"
#include "core/mesh/device_mesh.h"
#include "core/model/unit_work.h"
#include "core/policy/framework_profile.h"
#include "core/schedule/collective_leg.h"
#include "core/schedule/group_geometry.h"
#include "core/schedule/op.h"
#include "core/schedule/operand.h"
#include "core/schedule/plan_padding.h"
#include "core/schedule/workload.h"

namespace fsdp {

// What a resident buffer holds (docs/design/fsdp-behaviour.md §5.1).
enum class ResidentKind : std::uint8_t {
  kMainWeight,      // the main (optimizer-dtype) weight shard, optimizer placements
  kModelWeight,     // the compute-dtype weight shard when it does not alias the main weight
  kMainGrad,        // the main-grad accumulator, gradient placements
  kOptimizerState,  // the optimizer's states (e.g. Adam's two moments), optimizer placements
};
std::string_view to_string(ResidentKind kind);  // "main_weight", "model_weight", ...

// A buffer that lives across steps (allocated before the first step, never freed by it).
struct ResidentBuffer {
  BufferClass buffer_class = BufferClass::kShardedWeights;
  ResidentKind kind = ResidentKind::kMainWeight;
  std::int32_t unit = -1;
  std::int32_t group = -1;           // the group within the unit
  std::int32_t geometry_group = -1;  // flat index into the schedule's geometry groups
  DType dtype = DType::kFp32;
  std::int64_t elements = 0;
  std::int64_t bytes = 0;
  friend bool operator==(const ResidentBuffer&, const ResidentBuffer&) = default;
};

// One collective of the step's program, shared by every rank class: which step of which leg of
// which group it performs on which mesh axis, and (for uneven shards on a 1-D mesh) each
// member's count. geometry_group and leg_step place it in the geometry
// (collective_geometry(groups[geometry_group], leg, leg_step, ...)); a collective with
// geometry_group -1 moves `elements` of no layout (hand-written simulator inputs). An activation
// collective of a tensor- or expert-parallel split names the unit's work.collectives entry it
// performs (`activation`, with geometry_group -1): it moves the unit's activations, which the IR
// holds in no buffer, so its ops name no operands (docs/design/parallelism.md).
struct CollectiveInfo {
  OpKind kind = OpKind::kAllGather;
  std::int32_t axis = 0;
  std::int32_t unit = -1;
  std::int32_t group = -1;
  std::int32_t geometry_group = -1;
  CollectiveLeg leg = CollectiveLeg::kUnshard;
  std::int32_t leg_step = 0;
  DType dtype = DType::kBf16;
  // Elements each member of the axis group contributes (AG) or receives (RS), or reduces (AR);
  // empty when every member has the same count (then Op::elements is that count).
  std::vector<std::int64_t> member_elements;
  // Index into unit_work[unit].collectives, or -1 for a parameter group's leg.
  std::int32_t activation = -1;
  friend bool operator==(const CollectiveInfo&, const CollectiveInfo&) = default;
};

// The op program of one rank equivalence class.
struct RankProgram {
  std::int64_t representative_rank = 0;  // the lowest rank of the class
  std::int64_t num_ranks = 0;            // ranks in the class
  std::vector<Op> ops;                   // issue order, all streams interleaved
  std::vector<Operand> operands;         // ops' operands (Op::first_operand, num_operands)
  std::vector<ResidentBuffer> resident;  // buffers live across steps
  std::int32_t num_events = 0;           // event ids are [0, num_events)
  std::int32_t num_buffers = 0;          // transient buffer ids are [0, num_buffers)

  std::span<const Operand> operands_of(const Op& op) const {
    return std::span<const Operand>(operands).subspan(static_cast<std::size_t>(op.first_operand),
                                                      static_cast<std::size_t>(op.num_operands));
  }
  friend bool operator==(const RankProgram&, const RankProgram&) = default;
};

// Per step: the count of each collective kind on each mesh axis, e.g. {"reduce-scatter": {"dp":
// 9}}; the same for every rank.
using CollectiveSummary = std::map<std::string, std::map<std::string, std::int64_t>>;

// Everything a Schedule holds, unverified: what producers assemble and the verifier checks.
struct ScheduleParts {
  explicit ScheduleParts(DeviceMesh m) : mesh(std::move(m)) {}
  DeviceMesh mesh;
  bool unified_streams = false;
  std::int64_t num_microbatches = 1;
  // What every gradient accumulation multiplies a reduced gradient by: grad_scale / |DP mesh|
  // (the FSDP averaging rule, §4.7).
  double gradient_scale = 1.0;
  std::vector<RankProgram> programs;
  std::vector<std::int32_t> rank_class;  // program index of each rank (size mesh.size())
  std::vector<CollectiveInfo> collectives;
  std::vector<std::string> unit_names;
  // The microbatch every forward, backward and recompute op computes, and each unit's kernels
  // (indexed like unit_names; empty, or an empty entry: cost from the op's FLOPs).
  Workload workload;
  std::vector<UnitWork> unit_work;
  // What the framework's process holds beside the programs' buffers (the simulator counts it).
  RuntimeMemory runtime_memory;
  // The layouts, placements and legs of every parameter group (shared: a layout of a million
  // tensors is not copied with the schedule). Null: no groups.
  std::shared_ptr<const ShardGeometry> geometry;

  const ShardGeometry& groups() const;
  friend bool operator==(const ScheduleParts& a, const ScheduleParts& b);
};

class Schedule {
 public:
  // Verifies `parts` (verify_schedule) and computes the layouts' padding. Errors: the first
  // violation the verifier finds; padding totals beyond int64.
  static Expected<Schedule> make(ScheduleParts parts);

  const DeviceMesh& mesh() const { return parts_.mesh; }
  bool unified_streams() const { return parts_.unified_streams; }
  std::int64_t num_microbatches() const { return parts_.num_microbatches; }
  double gradient_scale() const { return parts_.gradient_scale; }
  const std::vector<RankProgram>& programs() const { return parts_.programs; }
  // Program index of each rank (size mesh().size()).
  const std::vector<std::int32_t>& rank_class() const { return parts_.rank_class; }
  const RankProgram& program_of_rank(std::int64_t rank) const;
  const std::vector<CollectiveInfo>& collectives() const { return parts_.collectives; }
  const std::vector<std::string>& unit_names() const { return parts_.unit_names; }
  const Workload& workload() const { return parts_.workload; }
  const RuntimeMemory& runtime_memory() const { return parts_.runtime_memory; }
  // The kernels of unit u's forward (UnitWork), or nullptr when the schedule has none for it.
  const UnitWork* unit_work(std::int32_t unit) const {
    return unit >= 0 && static_cast<std::size_t>(unit) < parts_.unit_work.size() &&
                   !parts_.unit_work[static_cast<std::size_t>(unit)].empty()
               ? &parts_.unit_work[static_cast<std::size_t>(unit)]
               : nullptr;
  }
  // The unit's entry an activation collective performs (the verifier has checked it exists);
  // nullptr for a parameter group's collective.
  const ActivationCollective* activation_of(const CollectiveInfo& info) const {
    if (info.activation < 0) {
      return nullptr;
    }
    return &parts_.unit_work[static_cast<std::size_t>(info.unit)]
                .collectives[static_cast<std::size_t>(info.activation)];
  }
  // Every parameter group's layout, placements and legs.
  const ShardGeometry& geometry() const { return parts_.groups(); }
  // What the groups' layouts spend on padding.
  const PlanPadding& padding() const { return padding_; }
  CollectiveSummary collective_summary() const;
  // The verified parts (a copy can be changed and verified again).
  const ScheduleParts& parts() const { return parts_; }

  friend bool operator==(const Schedule& a, const Schedule& b) { return a.parts_ == b.parts_; }

 private:
  Schedule(ScheduleParts parts, PlanPadding padding)
      : parts_(std::move(parts)), padding_(padding) {}
  ScheduleParts parts_;
  PlanPadding padding_;
};

}  // namespace fsdp

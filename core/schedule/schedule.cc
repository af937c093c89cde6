// SPDX-License-Identifier: Apache-2.0
#include "core/schedule/schedule.h"

#include <utility>

#include "core/base/check.h"
#include "core/schedule/schedule_verifier.h"

namespace fsdp {

std::string_view to_string(ResidentKind kind) {
  switch (kind) {
    case ResidentKind::kMainWeight:
      return "main_weight";
    case ResidentKind::kModelWeight:
      return "model_weight";
    case ResidentKind::kMainGrad:
      return "main_grad";
    case ResidentKind::kOptimizerState:
      return "optimizer_state";
  }
  return "?";
}

const ShardGeometry& ScheduleParts::groups() const {
  static const ShardGeometry kNone;
  return geometry ? *geometry : kNone;
}

bool operator==(const ScheduleParts& a, const ScheduleParts& b) {
  return a.mesh == b.mesh && a.unified_streams == b.unified_streams &&
         a.num_microbatches == b.num_microbatches && a.gradient_scale == b.gradient_scale &&
         a.programs == b.programs && a.rank_class == b.rank_class &&
         a.collectives == b.collectives && a.unit_names == b.unit_names &&
         a.workload == b.workload && a.unit_work == b.unit_work &&
         a.runtime_memory == b.runtime_memory && a.groups() == b.groups();
}

Expected<Schedule> Schedule::make(ScheduleParts parts) {
  FSDP_RETURN_IF_ERROR(verify_schedule(parts));
  FSDP_TRY(PlanPadding padding, plan_padding(parts.groups()));
  return Schedule(std::move(parts), padding);
}

const RankProgram& Schedule::program_of_rank(std::int64_t rank) const {
  FSDP_CHECK(rank >= 0 && rank < mesh().size()) << rank;
  return programs()[static_cast<std::size_t>(rank_class()[static_cast<std::size_t>(rank)])];
}

CollectiveSummary Schedule::collective_summary() const {
  CollectiveSummary summary;
  if (programs().empty()) {
    return summary;
  }
  for (const Op& op : programs().front().ops) {
    if (is_collective(op.kind)) {
      ++summary[std::string(to_string(op.kind))][mesh().axis_name(op.axis)];
    }
  }
  return summary;
}

}  // namespace fsdp

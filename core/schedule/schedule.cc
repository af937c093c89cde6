// SPDX-License-Identifier: Apache-2.0
#include "core/schedule/schedule.h"

#include <utility>

#include "core/base/check.h"

namespace fsdp {

Schedule::Schedule(DeviceMesh mesh, bool unified_streams, std::int64_t num_microbatches,
                   std::vector<RankProgram> programs, std::vector<std::int32_t> rank_class,
                   std::vector<CollectiveInfo> collectives, std::vector<std::string> unit_names)
    : mesh_(std::move(mesh)),
      unified_streams_(unified_streams),
      num_microbatches_(num_microbatches),
      programs_(std::move(programs)),
      rank_class_(std::move(rank_class)),
      collectives_(std::move(collectives)),
      unit_names_(std::move(unit_names)) {
  FSDP_CHECK(static_cast<std::int64_t>(rank_class_.size()) == mesh_.size())
      << rank_class_.size() << " vs " << mesh_.size();
}

const RankProgram& Schedule::program_of_rank(std::int64_t rank) const {
  FSDP_CHECK(rank >= 0 && rank < mesh_.size()) << rank;
  return programs_[static_cast<std::size_t>(rank_class_[static_cast<std::size_t>(rank)])];
}

CollectiveSummary Schedule::collective_summary() const {
  CollectiveSummary summary;
  if (programs_.empty()) {
    return summary;
  }
  for (const Op& op : programs_.front().ops) {
    if (is_collective(op.kind)) {
      ++summary[std::string(to_string(op.kind))][mesh_.axis_name(op.axis)];
    }
  }
  return summary;
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
#include "cli/resource_estimate.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/base/strings.h"

namespace fsdp::cli {
namespace {

std::string gib(double bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

std::int64_t memory_budget_bytes() {
  double budget = 9.2e18;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    budget = static_cast<double>(pages) * static_cast<double>(page_size);
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    budget = std::min(budget, static_cast<double>(limit.rlim_cur));
  }
  return static_cast<std::int64_t>(budget);
}

Status check_memory_estimate(std::int64_t ranks, std::int64_t units, std::int64_t microbatches,
                             std::int64_t copies) {
  // In double: the inputs may be near int64's range, and only the comparison matters.
  const double ops = static_cast<double>(units) * static_cast<double>(microbatches) *
                     static_cast<double>(kOpsPerUnitMicrobatch);
  const double need = static_cast<double>(copies) *
                      (static_cast<double>(ranks) * static_cast<double>(kBytesPerRank) +
                       ops * static_cast<double>(kBytesPerOp));
  const double budget = static_cast<double>(memory_budget_bytes());
  if (need <= budget) {
    return ok_status();
  }
  return Error(ErrorCode::kOutOfRange,
               str_cat("the run needs about ", gib(need), " (", ranks, " ranks x ", kBytesPerRank,
                       " B + ", units, " units x ", microbatches, " microbatches x ",
                       kOpsPerUnitMicrobatch, " ops x ", kBytesPerOp, " B",
                       copies > 1 ? str_cat(", ", copies, " at once") : std::string(),
                       "), more than the ", gib(budget), " this process may use"));
}

}  // namespace fsdp::cli

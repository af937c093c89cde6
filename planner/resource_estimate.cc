// SPDX-License-Identifier: Apache-2.0
#include "planner/resource_estimate.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/base/strings.h"

namespace fsdp::planner {
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
    // The limit counts every mapping, and a started fsdpsim already holds about 0.9 GB of address
    // space (libraries, thread stacks, BLAS buffers) of which little is resident: what is left is
    // the limit less the mappings of now.
    double mapped = 0.0;
    if (std::FILE* statm = std::fopen("/proc/self/statm", "r"); statm != nullptr) {
      unsigned long long size_pages = 0;
      if (std::fscanf(statm, "%llu", &size_pages) == 1 && page_size > 0) {
        mapped = static_cast<double>(size_pages) * static_cast<double>(page_size);
      }
      std::fclose(statm);
    }
    budget = std::min(budget, std::max(0.0, static_cast<double>(limit.rlim_cur) - mapped));
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

Status check_training_memory(std::int64_t parameters, std::int64_t activation_bytes_per_token,
                             std::int64_t tokens_per_microbatch, std::int64_t microbatches,
                             std::int64_t ranks_here, bool check) {
  // In double: only the comparison matters, and the product may pass int64.
  const double copies = static_cast<double>(kTrainCopiesPerParam) * (check ? 2.0 : 1.0);
  const double weights = static_cast<double>(parameters) * copies * 4.0;
  const double activations = static_cast<double>(ranks_here) * static_cast<double>(microbatches) *
                             static_cast<double>(tokens_per_microbatch) *
                             static_cast<double>(activation_bytes_per_token);
  const double need = weights + activations;
  const double budget = static_cast<double>(memory_budget_bytes());
  if (need <= budget) {
    return ok_status();
  }
  return Error(
      ErrorCode::kOutOfRange,
      str_cat("training needs about ", gib(need), " (", parameters, " parameters x ", copies,
              " x 4 B + ", ranks_here, " ranks x ", microbatches, " microbatches x ",
              tokens_per_microbatch, " tokens x ", activation_bytes_per_token,
              " B of activations), more than the ", gib(budget),
              " this process may use; shrink it with --layers, --hidden, --ffn or "
              "--vocab"));
}

}  // namespace fsdp::planner

// SPDX-License-Identifier: Apache-2.0
#include "core/layout/owner_planner.h"

#include "core/base/checked_math.h"
#include "core/base/strings.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

namespace fsdp {

Expected<std::vector<std::int64_t>> plan_tensor_owners(std::span<const Shape> shapes,
                                                       std::int64_t dp_size) {
  if (dp_size <= 0) {
    return Error(ErrorCode::kInvalidArgument, str_cat("dp size must be positive, got ", dp_size));
  }
  // Longest processing time first: numel descending, ties in id order.
  std::vector<std::size_t> order(shapes.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return shapes[a].numel() != shapes[b].numel() ? shapes[a].numel() > shapes[b].numel() : a < b;
  });
  // Min-heap keyed (load, rank): the least-loaded rank, ties to the lowest rank. Only ranks that
  // can receive a tensor enter the heap, so a huge dp_size costs nothing extra.
  using Entry = std::pair<std::int64_t, std::int64_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  const std::int64_t used_ranks =
      std::min(dp_size, std::max<std::int64_t>(1, static_cast<std::int64_t>(shapes.size())));
  for (std::int64_t r = 0; r < used_ranks; ++r) {
    heap.emplace(0, r);
  }
  std::vector<std::int64_t> owners(shapes.size(), 0);
  for (const std::size_t i : order) {
    auto [load, rank] = heap.top();
    heap.pop();
    owners[i] = rank;
    if (!checked_add(load, shapes[i].numel(), &load)) {
      return Error(ErrorCode::kOutOfRange,
                   str_cat("rank ", rank, " load overflows int64 when assigning tensor ", i,
                           " shape ", to_string(shapes[i]), " (numel ", shapes[i].numel(), ")"));
    }
    heap.emplace(load, rank);
  }
  return owners;
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// Rendezvous over a Store. Values handed out by share_from_first carry a one-byte tag ('v' value,
// 'e' error message), so a failure of the first member reaches the others at once. Waits for
// several keys share one deadline; each get gets the rest rounded up, so a get that timed out
// implies the shared deadline passed.
#include "backends/store/rendezvous.h"

#include <algorithm>

#include "core/base/strings.h"

namespace fsdp::store {

Status store_barrier(Store& store, std::string_view name, int rank, int world,
                     std::chrono::milliseconds timeout) {
  FSDP_RETURN_IF_ERROR(store.set(str_cat("barrier/", name, "/", rank), "1"));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int r = 0; r < world; ++r) {
    const auto left = std::max(std::chrono::milliseconds(0),
                               std::chrono::ceil<std::chrono::milliseconds>(
                                   deadline - std::chrono::steady_clock::now()));
    Expected<std::string> got = store.get(str_cat("barrier/", name, "/", r), left);
    if (!got && std::chrono::steady_clock::now() >= deadline) {
      return Error(ErrorCode::kUnavailable,
                   str_cat("rank ", r, " did not reach barrier '", name, "' within ",
                           format_seconds(timeout), " s (store ", store.name(), ", key '",
                           str_cat("barrier/", name, "/", r), "')"));
    }
    if (!got) {
      return got.error().with_context(str_cat("barrier '", name, "'"));
    }
  }
  return ok_status();
}

Expected<std::string> share_from_first(Store& store, std::string_view key, bool first,
                                       const Expected<std::string>& value,
                                       std::chrono::milliseconds timeout) {
  if (first) {
    const std::string tagged =
        value.has_value() ? str_cat("v", *value) : str_cat("e", value.error().message());
    FSDP_RETURN_IF_ERROR(store.set(key, tagged));
    return value;
  }
  FSDP_TRY(std::string tagged, store.get(key, timeout));
  if (!tagged.empty() && tagged.front() == 'v') {
    return tagged.substr(1);
  }
  if (!tagged.empty() && tagged.front() == 'e') {
    return Error(ErrorCode::kUnavailable,
                 str_cat("store ", store.name(), ": key '", key,
                         "': the first member failed: ", tagged.substr(1)));
  }
  return Error(ErrorCode::kInternal,
               str_cat("store ", store.name(), ": key '", key, "' holds an untagged value"));
}

Status finish_rendezvous(Store& store, int rank, int world, std::chrono::milliseconds timeout) {
  if (rank != 0) {
    return store.set(str_cat("exit/", rank), "1");
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int r = 1; r < world; ++r) {
    const auto left = std::max(std::chrono::milliseconds(0),
                               std::chrono::ceil<std::chrono::milliseconds>(
                                   deadline - std::chrono::steady_clock::now()));
    Expected<std::string> got = store.get(str_cat("exit/", r), left);
    if (!got && std::chrono::steady_clock::now() >= deadline) {
      return Error(ErrorCode::kUnavailable,
                   str_cat("rank ", r, " did not finish within ", format_seconds(timeout),
                           " s (store ", store.name(), ", key 'exit/", r, "')"));
    }
    if (!got) {
      return got.error().with_context("finishing the run");
    }
  }
  return store.clear();
}

}  // namespace fsdp::store

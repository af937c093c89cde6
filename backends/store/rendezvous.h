// SPDX-License-Identifier: Apache-2.0
// Rendezvous over a Store for members started without mpirun: a barrier, the hand-out of one
// member's bytes to a group (the NCCL unique id of a mesh axis group), and the end-of-run
// handshake after which member 0 may clear the store and, for a TcpStore, stop serving. Every
// function waits at most `timeout` per key and names the store, the key and the timeout on error.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "backends/store/store.h"
#include "core/base/expected.h"

namespace fsdp::store {

// Member `rank` of `world` sets "barrier/<name>/<rank>" and waits for every member's key. Each
// name serves once (keys are write-once). Errors: "rank <r> did not reach barrier '<name>' within
// <t> s (store <s>, key 'barrier/<name>/<r>')" (kUnavailable); the store's.
Status store_barrier(Store& store, std::string_view name, int rank, int world,
                     std::chrono::milliseconds timeout);

// The first member of a group (`first`) publishes `value` under `key` and returns it; the others
// wait for it. When the first member's value is an error, it publishes the message instead, and
// every member returns that error (the others fail at once instead of at the timeout).
Expected<std::string> share_from_first(Store& store, std::string_view key, bool first,
                                       const Expected<std::string>& value,
                                       std::chrono::milliseconds timeout);

// The end of a run: every member but 0 sets "exit/<rank>" (it reads nothing afterwards); member
// 0 waits for all of them, then clears the store. Member 0 must keep a TcpStore alive until this
// returns. Errors: "rank <r> did not finish within <t> s (store <s>, key 'exit/<r>')"; the
// store's.
Status finish_rendezvous(Store& store, int rank, int world, std::chrono::milliseconds timeout);

}  // namespace fsdp::store

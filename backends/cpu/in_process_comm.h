// SPDX-License-Identifier: Apache-2.0
// InProcessWorld: every rank of a mesh as a thread of one process, with shared-memory
// collectives. Each (mesh axis, axis group, stream) has its own channel; a collective posts the
// member's buffers, meets the others at a barrier, does this member's share of the work reading
// the others' buffers (reductions sum members in rank order, so results are deterministic and
// identical on every member) and meets them again before returning. Every wait is timed: a member
// that does not join within the timeout ends the collective on every waiting member with an
// error naming the missing ranks, and any error aborts the whole world so no rank hangs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "backends/exec/communicator.h"
#include "core/base/expected.h"
#include "core/mesh/device_mesh.h"

namespace fsdp::cpu {

class InProcessWorld {
 public:
  // Error: timeout <= 0 (kInvalidArgument).
  static Expected<std::shared_ptr<InProcessWorld>> make(const DeviceMesh& mesh,
                                                        std::chrono::milliseconds timeout);
  virtual ~InProcessWorld() = default;
  // The communicators of `rank` (one per mesh axis). FSDP_CHECKs the rank.
  virtual std::unique_ptr<exec::CommunicatorSet> communicators(std::int64_t rank) = 0;
  // Ends every pending and future collective with `error`.
  virtual void abort(const Error& error) = 0;
};

}  // namespace fsdp::cpu

// SPDX-License-Identifier: Apache-2.0
// Communicator: the collectives of one rank on one mesh axis (the ranks that share every other
// mesh coordinate), as the schedule IR issues them. Calls are made from inside a Device task of
// `stream`, in the stream's order: on the CPU device they block that stream's worker (so they are
// asynchronous to the host), a CUDA communicator would enqueue them on the stream. Every member
// issues the same sequence of calls per stream (schedule check (d)), and each stream has its own
// channel (MPI: one MPI_Comm_dup per stream), so streams never interleave on one channel.
// Reductions are sums; the executor applies the FSDP averaging rule itself.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/base/expected.h"
#include "core/model/dtype.h"
#include "core/schedule/op.h"

namespace fsdp::exec {

class Communicator {
 public:
  virtual ~Communicator() = default;
  // This rank's index on the axis and the number of members.
  virtual std::int64_t rank() const = 0;
  virtual std::int64_t size() const = 0;
  // The mesh axis name, for messages.
  virtual const std::string& axis_name() const = 0;

  // recv (Σ counts elements) = the members' `send` buffers concatenated in rank order; this
  // member sends counts[rank()] elements. `send` may alias recv + Σ_{k<rank()} counts[k]
  // (in place).
  virtual Status all_gather_v(StreamKind stream, DType dtype, const void* send,
                              std::span<const std::int64_t> counts, void* recv) = 0;
  // recv (counts[rank()] elements) = Σ over members of send[offset .. offset + counts[rank()]),
  // offset = Σ_{k<rank()} counts[k]; send holds Σ counts elements. recv may be send + offset: in
  // place, the member's own chunk of its input becomes its output and the rest of send is
  // undefined afterwards (MPI_IN_PLACE may use it), as in the executor's steps of a multi-axis
  // gradient reduction before the last. Otherwise recv must not overlap send.
  virtual Status reduce_scatter_v(StreamKind stream, DType dtype, const void* send,
                                  std::span<const std::int64_t> counts, void* recv) = 0;
  // buf (count elements) = Σ over members of buf, in place.
  virtual Status all_reduce(StreamKind stream, DType dtype, void* buf, std::int64_t count) = 0;
  // The exchange of an expert-parallel MoE layer's tokens (docs/design/parallelism.md): send and
  // recv hold size() x count elements; recv[k x count ..) = member k's send[rank() x count ..).
  // send and recv must not overlap.
  virtual Status all_to_all(StreamKind stream, DType dtype, const void* send, std::int64_t count,
                            void* recv) = 0;
};

// The communicators of one rank, one per mesh axis (index = mesh axis).
class CommunicatorSet {
 public:
  virtual ~CommunicatorSet() = default;
  virtual std::int64_t num_axes() const = 0;
  virtual Communicator& axis(std::int64_t mesh_axis) = 0;
  // Wakes every member blocked in a collective of this rank's groups with `error` (a rank that
  // failed tells its peers instead of letting them wait for the timeout). May be a no-op.
  virtual void abort(const Error& error) = 0;
};

}  // namespace fsdp::exec

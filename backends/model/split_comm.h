// SPDX-License-Identifier: Apache-2.0
// SplitComm: the collectives a tensor- or expert-parallel decoder issues inside its units'
// computation, on its tensor- or expert-parallel group (docs/design/parallelism.md, "Training it
// for real"). The schedule IR lists each of them as an activation collective right after the unit's
// compute op; the executor implements this interface over the mesh axis's communicator on the
// compute stream and checks every call against the IR's entry (kind, site, element count) when it
// reaches that op. Pointers are the decoder's device memory; calls are made in the compute stream's
// order.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/base/expected.h"

namespace fsdp::backend {

class SplitComm {
 public:
  virtual ~SplitComm() = default;
  // This rank's index in the group and the group's size.
  virtual std::int64_t rank() const = 0;
  virtual std::int64_t size() const = 0;
  // buf (n fp32 values) = the sum over the group's members, in place. `site` names the IR entry
  // ("attention.out", "head.in_grad", ...).
  virtual Status all_reduce(std::string_view site, float* buf, std::int64_t n) = 0;
  // recv (size() x n fp32 values) = every member's `send` (n values), in member order.
  virtual Status all_gather(std::string_view site, const float* send, std::int64_t n,
                            float* recv) = 0;
  // Expert parallelism: `send` holds size() blocks of n values, block m for member m; recv
  // (size() x n values) gets block rank() of every member's send, in member order. The IR
  // counts the whole send buffer (size() x n elements).
  virtual Status all_to_all(std::string_view site, const float* send, std::int64_t n,
                            float* recv) = 0;
};

}  // namespace fsdp::backend

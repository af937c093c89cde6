// SPDX-License-Identifier: Apache-2.0
#include "core/schedule/operand.h"

namespace fsdp {

std::string_view to_string(BufferSpace space) {
  switch (space) {
    case BufferSpace::kTransient:
      return "transient";
    case BufferSpace::kResident:
      return "resident";
  }
  return "?";
}

std::string_view to_string(Access access) {
  switch (access) {
    case Access::kRead:
      return "read";
    case Access::kWrite:
      return "write";
    case Access::kReadWrite:
      return "read-write";
  }
  return "?";
}

std::string_view to_string(Extent extent) {
  switch (extent) {
    case Extent::kNone:
      return "none";
    case Extent::kFull:
      return "full";
    case Extent::kParameter:
      return "parameter";
    case Extent::kGradient:
      return "gradient";
    case Extent::kOptimizer:
      return "optimizer";
  }
  return "?";
}

}  // namespace fsdp

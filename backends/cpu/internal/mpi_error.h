// SPDX-License-Identifier: Apache-2.0
// The CPU backend's wording of a failed MPI call (defined in mpi_session.cc): kUnavailable,
// "<call> failed: <MPI_Error_string>". Takes the MPI return code as int so no MPI header leaks.
#pragma once

#include <string_view>

#include "core/base/error.h"

namespace fsdp::internal {

Error mpi_error(int code, std::string_view call);

}  // namespace fsdp::internal

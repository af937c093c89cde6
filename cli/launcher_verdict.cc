// SPDX-License-Identifier: Apache-2.0
#include "cli/launcher_verdict.h"

#include <cstdlib>

#include "backends/cpu/mpi_session.h"

namespace fsdp::cli {

long long launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* text = std::getenv(var); text != nullptr) {
      char* end = nullptr;
      const long long rank = std::strtoll(text, &end, 10);
      return end != text && *end == '\0' ? rank : 0;
    }
  }
  return 0;
}

VerdictIo::VerdictIo(Io& io)
    : io_(io),
      root_(launcher_rank() == 0),
      null_stream_(&null_buffer_),
      quiet_{null_stream_, null_stream_, false, false} {}

int refuse_together(int code, std::string_view what, double timeout_s) {
  if (cpu::launched_by_mpi()) {
    if (auto session = cpu::MpiSession::get(); session) {
      (void)(*session)->arrive(what, timeout_s);
    }
  }
  return code;
}

}  // namespace fsdp::cli

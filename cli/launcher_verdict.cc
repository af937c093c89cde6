// SPDX-License-Identifier: Apache-2.0
#include "cli/launcher_verdict.h"

#include <chrono>
#include <cstdlib>
#include <thread>

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

int refuse_together(int code, double linger_s) {
  if (code != 0 && cpu::launched_by_mpi() && launcher_rank() != 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(linger_s));
  }
  return code;
}

}  // namespace fsdp::cli

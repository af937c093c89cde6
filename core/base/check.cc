// SPDX-License-Identifier: Apache-2.0
#include "core/base/check.h"

#include <cstdio>
#include <cstdlib>

namespace fsdp::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "fsdp: internal error: %s\n", stream_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace fsdp::internal

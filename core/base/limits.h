// SPDX-License-Identifier: Apache-2.0
// Limits shared by the backends and the command line (issue 16): values past them once wrapped
// in a conversion or exhausted memory, so they are refused where they enter.
#pragma once

namespace fsdp {

// Seconds a watchdog may wait: 10^6 s is about 11.6 days; 9e15 s once overflowed the watchdog's
// nanoseconds and fired at once.
inline constexpr double kMaxTimeoutSeconds = 1e6;

}  // namespace fsdp

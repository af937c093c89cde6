// SPDX-License-Identifier: Apache-2.0
// The queue is header-only (push and pop run once or twice per simulated event and are inlined
// into the loop); this file keeps the header compiled on its own as part of fsdp_sim.
#include "sim/engine/event_queue.h"

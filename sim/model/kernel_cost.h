// SPDX-License-Identifier: Apache-2.0
// The per-op compute model (docs/design/simulator.md, "Per-op compute"): a unit's forward,
// backward or recompute op costs the sum of its kernels, priced from the unit's UnitWork, the
// schedule's Workload and the hardware's ComputeProfile. Each weight GEMM from its (m, n, k):
// 2mnk / (dtype peak x large-GEMM efficiency x wave quantization), at least its operand traffic
// over HBM; the backward runs the data-gradient and weight-gradient GEMMs of every forward GEMM.
// Flash attention at its measured forward and backward rates (causal masks halve the work; the
// backward does 2.5x the forward's FLOPs). Elementwise kernels as HBM traffic at the achieved
// bandwidth (eager or fused by torch.compile; the backward moves twice the forward's bytes).
// fp8 matmuls add the amax and cast passes of dynamic tensorwise scaling (the output head stays
// in the compute dtype); Transformer Engine runs an input group as one GEMM whose input its norm
// casts. Evaluated once per op
// when the simulation is prepared, never in the event loop.
#pragma once

#include "core/base/expected.h"
#include "core/hardware/hardware.h"
#include "core/model/unit_work.h"
#include "core/schedule/op.h"
#include "core/schedule/schedule.h"
#include "core/schedule/workload.h"
#include "sim/engine/sim_time.h"

namespace fsdp::sim {

// Seconds per kernel class of one op.
struct KernelTimes {
  double gemm = 0.0;
  double attention = 0.0;
  double elementwise = 0.0;
  double casts = 0.0;  // fp8 amax and casts
  double total() const { return gemm + attention + elementwise + casts; }
};

// The forward (kind kForward) or backward (kBackward) kernels of one microbatch of a unit whose
// weights arrive in `weight_dtype` (kFp8: gathered in fp8, no weight casts). Errors
// (kInvalidArgument): fp8 matmuls on hardware without fp8 tensor cores; another kind.
Expected<KernelTimes> unit_kernel_times(OpKind kind, const UnitWork& work, const Workload& workload,
                                        DType weight_dtype, const Hardware& hardware,
                                        const ComputeProfile& profile);

// The op's duration: forward and backward ops their kernel times; a recompute op the forward
// kernels its checkpointing mode runs again (Workload::recompute): all of them scaled by the op's
// share of the forward's FLOPs (op.flops over the FLOPs the work implies at the importer's
// counting); for selective-op the GEMMs and casts by op.flops over the matmul FLOPs plus every
// elementwise kernel; for core-attention the attention core. Errors as above, and
// kOutOfRange for a duration beyond simulated time.
Expected<SimDuration> unit_compute_cost(const Op& op, const UnitWork& work,
                                        const Workload& workload, const Hardware& hardware,
                                        const ComputeProfile& profile);

// The kernel times of every forward, backward and recompute op of one program (rank class) of
// the schedule that the per-op model prices (as the simulator would: ops of units with work, not
// in fp32); zero when none is. Errors as unit_kernel_times.
Expected<KernelTimes> program_kernel_times(const Schedule& schedule, std::size_t program,
                                           const Hardware& hardware);

// The forward FLOPs per microbatch the work implies, counted as the importer counts them
// (2 x multiply-accumulates of every GEMM; attention over the whole sequence, unmasked).
double work_forward_flops(const UnitWork& work, const Workload& workload);

}  // namespace fsdp::sim

// SPDX-License-Identifier: Apache-2.0
// calibrate_cpu: measures this machine as the CPU backend uses it and returns a Hardware whose
// calibration (core/hardware/calibration.h) the simulator reads: effective rates of the decoder's
// forward, backward and recompute (the HostDecoder kernels at the configuration's shapes, FLOPs as
// the schedule IR counts them), the optimizer update, memory-copy bandwidth, BLAS throughput per
// matmul shape of the model, and under mpirun the backend's all-gather, reduce-scatter and
// all-reduce times per message size on all ranks plus the slowdown of compute while an all-gather
// runs. Every rank measures at the same time, as in training. docs/design/fidelity.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/cpu/mpi_comm.h"
#include "backends/exec/trainer.h"
#include "core/base/expected.h"
#include "core/hardware/hardware.h"

namespace fsdp::cpu {

// The largest counts calibrate_cpu accepts (as commbench's): a count near 2^63 once ran "forever"
// instead of being an error.
inline constexpr std::int64_t kMaxCalibrationRepeats = 10'000;
inline constexpr std::int64_t kMaxCalibrationIters = 1'000'000;

struct CpuCalibrationOptions {
  exec::TrainSpec spec;            // the configuration whose shapes are measured
  std::string name = "cpu";        // the hardware's name
  std::int64_t repeats = 3;        // rounds of each compute measurement (the median is kept)
  // Per-member collective payloads in bytes (multiples of 4); empty: 4 KiB times powers of 4 up
  // to the largest payload of the schedule, plus that payload.
  std::vector<std::int64_t> collective_bytes;
  std::int64_t collective_iters = 5;  // timed calls per size after one warm-up
};

// Progress lines ("measuring ..."), printed by rank 0 only.
using CalibrationLog = std::function<void(const std::string&)>;

// With `session` (under mpirun; every rank calls it with the same options) the collectives are
// measured on a group of all MPI ranks, whose count must equal the spec's mesh size; compute
// figures are the mean over ranks, collective times the slowest rank's. Without a session only
// compute and copy are measured, and the collective fields fall back to the copy bandwidth.
// Errors (kInvalidArgument): repeats outside [1, kMaxCalibrationRepeats] or collective_iters
// outside [1, kMaxCalibrationIters], a payload < 4 bytes or not a multiple of 4, a world size
// that differs from the mesh size; prepare_training's errors.
Expected<Hardware> calibrate_cpu(const CpuCalibrationOptions& options, const MpiSession* session,
                                 const CalibrationLog& log);

}  // namespace fsdp::cpu

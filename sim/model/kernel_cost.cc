// SPDX-License-Identifier: Apache-2.0
// Formulas and the sources of every constant: docs/design/simulator.md, "Per-op compute".
#include "sim/model/kernel_cost.h"

#include <algorithm>
#include <cmath>

#include "core/base/strings.h"
#include "sim/model/cost_model.h"

namespace fsdp::sim {
namespace {

// Bytes of HBM traffic per element that the casts of float8 training add, for each GEMM input
// (docs/design/simulator.md, "Per-op compute"). A GEMM's input x and output gradient dY are
// needed in both layouts (row-major for one GEMM, transposed for the weight gradient's); the
// weight W in its layout forward and transposed backward.
struct CastBytes {
  double x = 0.0;           // x, forward: its fp8 copies
  double x_backward = 0.0;  // x, backward: a transpose of the fp8 copy, when not made forward
  double dy = 0.0;          // dY, backward: both layouts
  double w_forward = 0.0;
  double w_backward = 0.0;
};
// Eager torchao (dynamic tensorwise): an amax pass reads the bf16 tensor (2), the scaled cast
// reads it and writes fp8 (3), a transpose reads and writes the fp8 copy (2).
constexpr CastBytes kEagerCasts{.x = 5, .x_backward = 2, .dy = 7, .w_forward = 5, .w_backward = 5};
// Compiled (torch.compile): the amax rides on the producing kernel and one kernel reads bf16 and
// writes both fp8 layouts (2 + 1 + 1; torchao's roofline model, roofline_utils.py); the weight
// is cast forward and again backward (3 each).
constexpr CastBytes kCompiledCasts{
    .x = 4, .x_backward = 0, .dy = 4, .w_forward = 3, .w_backward = 3};
// Transformer Engine: cast_transpose writes both layouts in one pass (2 + 1 + 1) and the
// backward reuses the weight's transposed copy made forward.
constexpr CastBytes kTeCasts{.x = 4, .x_backward = 0, .dy = 4, .w_forward = 4, .w_backward = 0};
// Flash attention's backward recomputes the scores and runs five matmuls to the forward's two.
constexpr double kAttentionBackwardWork = 2.5;
// Elementwise backward kernels read the saved input and the incoming gradient and write the
// outgoing one: twice the forward's traffic.
constexpr double kElementwiseBackwardFactor = 2.0;

struct Rates {
  double peak = 0.0;  // FLOP/s of the GEMMs' math dtype
  double gemm_efficiency = 1.0;
  double hbm = 0.0;            // achieved elementwise bytes/s
  double operand_bytes = 2.0;  // GEMM input element
  double sm = 1.0;
  double tile_m = 1.0;
  double tile_n = 1.0;
};

// Fraction of the SMs the last wave keeps busy, averaged over the waves: tiles / (waves x SMs).
double wave_efficiency(double m, double n, const Rates& r) {
  const double tiles = std::ceil(m / r.tile_m) * std::ceil(n / r.tile_n);
  const double waves = std::ceil(tiles / r.sm);
  return tiles / (waves * r.sm);
}

// One GEMM whose output is m x n with a reduction over k.
double gemm_seconds(double m, double n, double k, const Rates& r) {
  const double math = 2.0 * m * n * k / (r.peak * r.gemm_efficiency * wave_efficiency(m, n, r));
  const double traffic = ((m * k + n * k) * r.operand_bytes + m * n * 2.0) / r.hbm;
  return std::max(math, traffic);
}

double rows_of(const GemmShape& g, double tokens) {
  return std::ceil(tokens * static_cast<double>(g.rows_num) / static_cast<double>(g.rows_den));
}

}  // namespace

double work_forward_flops(const UnitWork& work, const Workload& workload) {
  const double tokens =
      static_cast<double>(workload.seq_len) * static_cast<double>(workload.micro_batch_size);
  double per_token = 0.0;
  for (const GemmShape& g : work.gemms) {
    per_token += 2.0 * static_cast<double>(g.n) * static_cast<double>(g.k) *
                 static_cast<double>(g.count) * static_cast<double>(g.rows_num) /
                 static_cast<double>(g.rows_den);
  }
  const AttentionShape& a = work.attention;
  per_token += 2.0 * static_cast<double>(a.heads) *
               static_cast<double>(a.qk_head_dim + a.v_head_dim) *
               static_cast<double>(workload.seq_len);
  return per_token * tokens;
}

Expected<KernelTimes> unit_kernel_times(OpKind kind, const UnitWork& work, const Workload& workload,
                                        DType weight_dtype, const Hardware& hardware,
                                        const ComputeProfile& profile) {
  if (kind != OpKind::kForward && kind != OpKind::kBackward) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("kernel times: expected a forward or backward op, got ", to_string(kind)));
  }
  const bool fp8 = workload.matmul_dtype == DType::kFp8;
  if (fp8 && profile.peak_fp8_flops <= 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("fp8 matmuls: hardware '", hardware.name(),
                         "' has no fp8 tensor cores (compute_profile.peak_fp8_flops is 0)"));
  }
  Rates r;
  r.peak = static_cast<double>(fp8 ? profile.peak_fp8_flops : hardware.peak_bf16_flops());
  r.gemm_efficiency =
      static_cast<double>(profile.gemm_permille) / 1000.0 *
      (fp8 ? static_cast<double>(profile.fp8_gemm_relative_permille) / 1000.0 : 1.0);
  r.hbm = static_cast<double>(hardware.hbm_bytes_per_s()) *
          static_cast<double>(profile.elementwise_permille) / 1000.0;
  r.operand_bytes = fp8 ? 1.0 : 2.0;
  r.sm = static_cast<double>(profile.sm_count);
  r.tile_m = static_cast<double>(profile.gemm_tile_m);
  r.tile_n = static_cast<double>(profile.gemm_tile_n);
  const bool backward = kind == OpKind::kBackward;
  const double tokens =
      static_cast<double>(workload.seq_len) * static_cast<double>(workload.micro_batch_size);
  // Compiled graphs and Transformer Engine fuse elementwise chains and casts into one pass.
  const bool fused = workload.compile || workload.kernels == KernelLibrary::kTransformerEngine;
  const bool cudnn = workload.kernels == KernelLibrary::kTransformerEngine;
  const CastBytes& cast = cudnn ? kTeCasts : fused ? kCompiledCasts : kEagerCasts;
  const bool weights_in_fp8 = weight_dtype == DType::kFp8;

  KernelTimes t;
  double cast_bytes = 0.0;
  for (const GemmShape& g : work.gemms) {
    const double m = rows_of(g, tokens);
    const double n = static_cast<double>(g.n);
    const double k = static_cast<double>(g.k);
    const double count = static_cast<double>(g.count);
    if (!backward) {
      t.gemm += count * gemm_seconds(m, n, k, r);
      if (fp8) {
        cast_bytes += count * (m * k * cast.x + (weights_in_fp8 ? 0.0 : n * k * cast.w_forward));
      }
    } else {
      // dX[m, k] = dY[m, n] W[n, k]; dW[n, k] = dY^T[n, m] X[m, k].
      t.gemm += count * (gemm_seconds(m, k, n, r) + gemm_seconds(n, k, m, r));
      if (fp8) {
        cast_bytes += count * (m * k * cast.x_backward + m * n * cast.dy +
                               (weights_in_fp8 ? 0.0 : n * k * cast.w_backward));
      }
    }
  }
  t.casts = cast_bytes / r.hbm;
  const AttentionShape& a = work.attention;
  if (a.heads > 0) {
    const double s = static_cast<double>(workload.seq_len);
    const double flops = 2.0 * static_cast<double>(workload.micro_batch_size) *
                         static_cast<double>(a.heads) * s * s *
                         static_cast<double>(a.qk_head_dim + a.v_head_dim) * (a.causal ? 0.5 : 1.0);
    const double forward_rate = static_cast<double>(cudnn ? profile.cudnn_attention_forward_flops
                                                          : profile.attention_forward_flops);
    const double backward_rate = static_cast<double>(cudnn ? profile.cudnn_attention_backward_flops
                                                           : profile.attention_backward_flops);
    t.attention = backward ? kAttentionBackwardWork * flops / backward_rate : flops / forward_rate;
  }
  const double bytes =
      static_cast<double>(fused ? work.fused_elementwise_bytes : work.elementwise_bytes) * tokens;
  t.elementwise = bytes * (backward ? kElementwiseBackwardFactor : 1.0) / r.hbm;
  return t;
}

namespace {

// One unit op's kernel times: a recompute costs the forward's times scaled by its share of the
// forward's FLOPs.
Expected<KernelTimes> op_kernel_times(const Op& op, const UnitWork& work, const Workload& workload,
                                      const Hardware& hardware, const ComputeProfile& profile) {
  const OpKind kind = op.kind == OpKind::kRecompute ? OpKind::kForward : op.kind;
  FSDP_TRY(KernelTimes t, unit_kernel_times(kind, work, workload, op.dtype, hardware, profile));
  if (op.kind == OpKind::kRecompute) {
    const double full = work_forward_flops(work, workload);
    const double scale = full > 0.0 ? std::max(0.0, static_cast<double>(op.flops) / full) : 1.0;
    t.gemm *= scale;
    t.attention *= scale;
    t.elementwise *= scale;
    t.casts *= scale;
  }
  return t;
}

}  // namespace

Expected<KernelTimes> program_kernel_times(const Schedule& schedule, std::size_t program,
                                           const Hardware& hardware) {
  KernelTimes sum;
  const ComputeProfile* profile = hardware.compute_profile();
  if (profile == nullptr || program >= schedule.programs().size()) {
    return sum;
  }
  for (const Op& op : schedule.programs()[program].ops) {
    const bool unit_op = op.kind == OpKind::kForward || op.kind == OpKind::kBackward ||
                         op.kind == OpKind::kRecompute;
    const UnitWork* work = unit_op ? schedule.unit_work(op.unit) : nullptr;
    if (work == nullptr || op.dtype == DType::kFp32) {
      continue;
    }
    FSDP_TRY(const KernelTimes t,
             op_kernel_times(op, *work, schedule.workload(), hardware, *profile));
    sum.gemm += t.gemm;
    sum.attention += t.attention;
    sum.elementwise += t.elementwise;
    sum.casts += t.casts;
  }
  return sum;
}

Expected<SimDuration> unit_compute_cost(const Op& op, const UnitWork& work,
                                        const Workload& workload, const Hardware& hardware,
                                        const ComputeProfile& profile) {
  FSDP_TRY(const KernelTimes t, op_kernel_times(op, work, workload, hardware, profile));
  return duration_from_seconds(t.total());
}

}  // namespace fsdp::sim

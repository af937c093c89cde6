// SPDX-License-Identifier: Apache-2.0
// Formulas and the sources of every constant: docs/design/simulator.md, "Per-op compute".
#include "sim/model/kernel_cost.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

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

// A GEMM as a kernel library runs it: `norm_fused` when its input is a norm's output that the
// norm itself casts (Transformer Engine's LayerNormLinear).
struct FusedGemm {
  GemmShape shape;
  double n = 0.0;  // output columns (a fused group's sum, in double: no int64 overflow)
  bool norm_fused = false;
};

// Each GEMM as it is (PyTorch runs one kernel per nn.Linear).
std::vector<FusedGemm> separate(const std::vector<GemmShape>& gemms) {
  std::vector<FusedGemm> out;
  out.reserve(gemms.size());
  for (const GemmShape& g : gemms) {
    out.push_back({g, static_cast<double>(g.n), false});
  }
  return out;
}

// Transformer Engine under Megatron-Core: the GEMMs of one input group are one weight (n summed
// over the group's GEMMs and their copies, e.g. linear_qkv, linear_fc1) and one GEMM, at the
// position of the group's first; its input is written by the norm it fuses.
std::vector<FusedGemm> fuse_input_groups(const std::vector<GemmShape>& gemms) {
  std::vector<FusedGemm> out;
  out.reserve(gemms.size());
  std::unordered_map<std::int64_t, std::size_t> group_at;  // input group -> its entry in out
  for (const GemmShape& g : gemms) {
    const double n = static_cast<double>(g.n) * static_cast<double>(g.count);
    if (g.input_group == 0) {
      out.push_back({g, static_cast<double>(g.n), false});
      continue;
    }
    const auto [it, first] = group_at.try_emplace(g.input_group, out.size());
    if (first) {
      FusedGemm fused{g, n, true};
      fused.shape.count = 1;
      out.push_back(fused);
    } else {
      out[it->second].n += n;
    }
  }
  return out;
}

// PyTorch runs the GEMMs of an input group as separate nn.Linear modules (torchtitan's wq, wk,
// wv and w1, w3), so autograd sums their input gradients: eager, each further gradient is one
// add reading two bf16 tensors and writing one (3 x 2 B per element); compiled, one fused kernel
// reads all of them and writes the sum ((copies + 1) x 2 B). Transformer Engine's fused GEMM
// computes the summed gradient itself.
double input_gradient_sum_bytes(const std::vector<GemmShape>& gemms, double tokens, bool compiled) {
  struct Group {
    double copies = 0.0;
    double elements = 0.0;  // of the shared input: rows x k
  };
  std::map<std::int64_t, Group> groups;  // ordered: the same sum on every platform
  for (const GemmShape& g : gemms) {
    if (g.input_group != 0) {
      Group& group = groups[g.input_group];
      group.copies += static_cast<double>(g.count);
      group.elements = rows_of(g, tokens) * static_cast<double>(g.k);
    }
  }
  double bytes = 0.0;
  for (const auto& [id, group] : groups) {
    if (group.copies > 1.0) {
      bytes +=
          group.elements * (compiled ? (group.copies + 1.0) * 2.0 : (group.copies - 1.0) * 6.0);
    }
  }
  return bytes;
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
  // The compute dtype's rates, and the fp8 rates for the GEMMs float8 training converts (every
  // weight GEMM but the output head's).
  Rates r;
  r.peak = static_cast<double>(hardware.peak_bf16_flops());
  r.gemm_efficiency = static_cast<double>(profile.gemm_permille) / 1000.0;
  r.hbm = static_cast<double>(hardware.hbm_bytes_per_s()) *
          static_cast<double>(profile.elementwise_permille) / 1000.0;
  r.operand_bytes = 2.0;
  r.sm = static_cast<double>(profile.sm_count);
  r.tile_m = static_cast<double>(profile.gemm_tile_m);
  r.tile_n = static_cast<double>(profile.gemm_tile_n);
  Rates r8 = r;
  if (fp8) {
    r8.peak = static_cast<double>(profile.peak_fp8_flops);
    r8.gemm_efficiency *= static_cast<double>(profile.fp8_gemm_relative_permille) / 1000.0;
    r8.operand_bytes = 1.0;
  }
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
  for (const FusedGemm& g : cudnn ? fuse_input_groups(work.gemms) : separate(work.gemms)) {
    const double m = rows_of(g.shape, tokens);
    const double n = g.n;
    const double k = static_cast<double>(g.shape.k);
    const double count = static_cast<double>(g.shape.count);
    const bool gemm_fp8 = fp8 && !g.shape.output_head;
    const Rates& rates = gemm_fp8 ? r8 : r;
    // Transformer Engine's LayerNormLinear: the norm writes the group's fp8 input itself.
    const double x_cast = g.norm_fused ? 0.0 : cast.x;
    if (!backward) {
      t.gemm += count * gemm_seconds(m, n, k, rates);
      if (gemm_fp8) {
        cast_bytes += count * (m * k * x_cast + (weights_in_fp8 ? 0.0 : n * k * cast.w_forward));
      }
    } else {
      // dX[m, k] = dY[m, n] W[n, k]; dW[n, k] = dY^T[n, m] X[m, k].
      t.gemm += count * (gemm_seconds(m, k, n, rates) + gemm_seconds(n, k, m, rates));
      if (gemm_fp8) {
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
  const std::int64_t per_token = cudnn   ? work.te_elementwise_bytes
                                 : fused ? work.fused_elementwise_bytes
                                         : work.elementwise_bytes;
  const double bytes = static_cast<double>(per_token) * tokens;
  t.elementwise = bytes * (backward ? kElementwiseBackwardFactor : 1.0) / r.hbm;
  if (backward && !cudnn) {
    t.elementwise += input_gradient_sum_bytes(work.gemms, tokens, workload.compile) / r.hbm;
  }
  return t;
}

namespace {

// The forward FLOPs of the work's attention core per microbatch (unmasked, as the importer
// counts them).
double work_attention_flops(const UnitWork& work, const Workload& workload) {
  const AttentionShape& a = work.attention;
  return 2.0 * static_cast<double>(a.heads) * static_cast<double>(a.qk_head_dim + a.v_head_dim) *
         static_cast<double>(workload.seq_len) * static_cast<double>(workload.seq_len) *
         static_cast<double>(workload.micro_batch_size);
}

// One unit op's kernel times. A recompute runs the forward's kernels that the checkpointing mode
// re-runs (Workload::recompute): a share of all of them by FLOPs; the unsaved matmuls by their
// FLOPs and every elementwise kernel (selective-op); the attention core (core-attention).
Expected<KernelTimes> op_kernel_times(const Op& op, const UnitWork& work, const Workload& workload,
                                      const Hardware& hardware, const ComputeProfile& profile) {
  const OpKind kind = op.kind == OpKind::kRecompute ? OpKind::kForward : op.kind;
  FSDP_TRY(KernelTimes t, unit_kernel_times(kind, work, workload, op.dtype, hardware, profile));
  if (op.kind != OpKind::kRecompute) {
    return t;
  }
  const double flops = std::max(0.0, static_cast<double>(op.flops));
  const double full = work_forward_flops(work, workload);
  const double attention = work_attention_flops(work, workload);
  const auto share = [&](double whole) { return whole > 0.0 ? flops / whole : 1.0; };
  switch (workload.recompute) {
    case RecomputeKernels::kUnsavedOps: {
      const double gemms = share(full - attention);
      t.gemm *= gemms;
      t.casts *= gemms;
      t.attention = 0.0;
      break;
    }
    case RecomputeKernels::kAttentionCore:
      t.attention *= share(attention);
      t.gemm = 0.0;
      t.casts = 0.0;
      t.elementwise = 0.0;
      break;
    case RecomputeKernels::kForwardShare: {
      const double scale = share(full);
      t.gemm *= scale;
      t.attention *= scale;
      t.elementwise *= scale;
      t.casts *= scale;
      break;
    }
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

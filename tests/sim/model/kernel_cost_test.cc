// SPDX-License-Identifier: Apache-2.0
// The per-op compute model (sim/model/kernel_cost.h): each formula of docs/design/simulator.md,
// "Per-op compute", checked on hand-sized kernels.
#include "sim/model/kernel_cost.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/hardware/hardware_presets.h"
#include "core/model/model_presets.h"

namespace fsdp::sim {
namespace {

// A GPU with round figures: 100 TFLOP/s bf16, 200 fp8, 1 TB/s HBM, 10 SMs of 100 x 100 tiles,
// GEMMs at 50% of peak, attention at 20 / 10 TFLOP/s (cuDNN 40 / 20), elementwise at full HBM.
Hardware round_gpu(std::int64_t fp8 = 200'000'000'000'000) {
  HardwareSpec s;
  s.name = "round";
  s.devices_per_node = 8;
  s.memory_bytes = 1LL << 36;
  s.peak_bf16_flops = 100'000'000'000'000;
  s.peak_fp32_flops = 10'000'000'000'000;
  s.hbm_bytes_per_s = 1'000'000'000'000;
  s.intra_node_bytes_per_s = 1'000'000'000;
  s.inter_node_bytes_per_s = 1'000'000'000;
  s.compute_profile = ComputeProfile{.sm_count = 10,
                                     .gemm_tile_m = 100,
                                     .gemm_tile_n = 100,
                                     .peak_fp8_flops = fp8,
                                     .gemm_permille = 500,
                                     .attention_forward_flops = 20'000'000'000'000,
                                     .attention_backward_flops = 10'000'000'000'000,
                                     .cudnn_attention_forward_flops = 40'000'000'000'000,
                                     .cudnn_attention_backward_flops = 20'000'000'000'000,
                                     .elementwise_permille = 1000};
  return Hardware::make(s).value();
}

KernelTimes times(OpKind kind, const UnitWork& w, const Workload& wl, const Hardware& hw,
                  DType weights = DType::kBf16) {
  return unit_kernel_times(kind, w, wl, weights, hw, *hw.compute_profile()).value();
}

TEST(KernelCostTest, GemmIsMathAtTheEfficiencyTimesWaves) {
  const Hardware hw = round_gpu();
  UnitWork w;
  w.gemms.push_back({.n = 1000, .k = 2000});
  // 1000 rows: 10 x 10 = 100 tiles on 10 SMs, full waves. 2 * 1000 * 1000 * 2000 = 4e12 FLOP at
  // 50 TFLOP/s = 80 us.
  const Workload wl{.seq_len = 1000, .micro_batch_size = 1};
  EXPECT_NEAR(times(OpKind::kForward, w, wl, hw).gemm, 80e-6, 1e-15);
  // 1050 rows: 11 x 10 = 110 tiles, 11 waves of 10 would do; 1050 rows is 11 tile rows, so
  // 110 tiles = 11 full waves: the same efficiency, 5% more math.
  const Workload wl2{.seq_len = 1050, .micro_batch_size = 1};
  EXPECT_NEAR(times(OpKind::kForward, w, wl2, hw).gemm, 84e-6, 1e-15);
  // 1 row: 10 tiles on 10 SMs, one full wave, but the math is tiny: the operand traffic
  // (1 x 2000 + 1000 x 2000) x 2 B + 1000 x 2 B over 1 TB/s bounds it.
  const Workload one{.seq_len = 1, .micro_batch_size = 1};
  EXPECT_NEAR(times(OpKind::kForward, w, one, hw).gemm, (2.0 * 2002000 + 2000) / 1e12, 1e-15);
}

TEST(KernelCostTest, PartialWavesWasteSms) {
  const Hardware hw = round_gpu();
  UnitWork w;
  w.gemms.push_back({.n = 100, .k = 1000});
  // 1100 rows x 100 columns: 11 tiles on 10 SMs, two waves of which the second keeps 1 SM busy:
  // efficiency 11 / 20.
  const Workload wl{.seq_len = 1100, .micro_batch_size = 1};
  const double math = 2.0 * 1100 * 100 * 1000 / (100e12 * 0.5 * 11.0 / 20.0);
  EXPECT_NEAR(times(OpKind::kForward, w, wl, hw).gemm, math, 1e-15);
}

TEST(KernelCostTest, BackwardRunsDataAndWeightGradients) {
  const Hardware hw = round_gpu();
  UnitWork w;
  w.gemms.push_back({.n = 1000, .k = 2000, .count = 3});
  const Workload wl{.seq_len = 1000, .micro_batch_size = 1};
  // dX [1000, 2000] and dW [1000, 2000]: twice the forward's math, three times.
  EXPECT_NEAR(times(OpKind::kBackward, w, wl, hw).gemm, 3 * 2 * 80e-6, 1e-15);
}

TEST(KernelCostTest, CausalAttentionDoesHalfTheWork) {
  const Hardware hw = round_gpu();
  UnitWork w;
  w.attention = {.heads = 4, .qk_head_dim = 64, .v_head_dim = 64, .causal = true};
  const Workload wl{.seq_len = 2048, .micro_batch_size = 2};
  const double flops = 2.0 * 2 * 4 * 2048.0 * 2048.0 * 128 * 0.5;
  EXPECT_NEAR(times(OpKind::kForward, w, wl, hw).attention, flops / 20e12, 1e-15);
  EXPECT_NEAR(times(OpKind::kBackward, w, wl, hw).attention, 2.5 * flops / 10e12, 1e-15);
  w.attention.causal = false;
  EXPECT_NEAR(times(OpKind::kForward, w, wl, hw).attention, 2 * flops / 20e12, 1e-15);
  // Transformer Engine runs cuDNN's attention.
  Workload te = wl;
  te.kernels = KernelLibrary::kTransformerEngine;
  EXPECT_NEAR(times(OpKind::kForward, w, te, hw).attention, 2 * flops / 40e12, 1e-15);
}

TEST(KernelCostTest, ElementwiseIsTrafficAndCompileFusesIt) {
  const Hardware hw = round_gpu();
  UnitWork w;
  w.elementwise_bytes = 1000;
  w.fused_elementwise_bytes = 300;
  Workload wl{.seq_len = 1000, .micro_batch_size = 2};
  EXPECT_NEAR(times(OpKind::kForward, w, wl, hw).elementwise, 2e6 / 1e12, 1e-18);
  EXPECT_NEAR(times(OpKind::kBackward, w, wl, hw).elementwise, 4e6 / 1e12, 1e-18);
  wl.compile = true;
  EXPECT_NEAR(times(OpKind::kForward, w, wl, hw).elementwise, 0.6e6 / 1e12, 1e-18);
  // Transformer Engine: its own figure (Megatron-Core's layout).
  w.te_elementwise_bytes = 200;
  wl.kernels = KernelLibrary::kTransformerEngine;
  EXPECT_NEAR(times(OpKind::kForward, w, wl, hw).elementwise, 0.4e6 / 1e12, 1e-18);
  EXPECT_NEAR(times(OpKind::kBackward, w, wl, hw).elementwise, 0.8e6 / 1e12, 1e-18);
}

TEST(KernelCostTest, Fp8RunsAtTheFp8PeakAndPaysItsCasts) {
  const Hardware hw = round_gpu();
  UnitWork w;
  w.gemms.push_back({.n = 1000, .k = 2000});
  Workload wl{.seq_len = 1000, .micro_batch_size = 1, .matmul_dtype = DType::kFp8};
  const KernelTimes t = times(OpKind::kForward, w, wl, hw);
  EXPECT_NEAR(t.gemm, 40e-6, 1e-15);
  // amax + cast of the activations [1000, 2000] and of the weights [1000, 2000]: 5 B each.
  EXPECT_NEAR(t.casts, (2e6 + 2e6) * 5 / 1e12, 1e-15);
  // Weights gathered in fp8 need no cast.
  EXPECT_NEAR(times(OpKind::kForward, w, wl, hw, DType::kFp8).casts, 2e6 * 5 / 1e12, 1e-15);
  // Backward, eager: the transpose of x's fp8 copy (2 B), dY's amax, cast and transpose (7 B),
  // the weight's amax and cast again (5 B); dY is [1000, 1000].
  EXPECT_NEAR(times(OpKind::kBackward, w, wl, hw).casts, (2e6 * 2 + 1e6 * 7 + 2e6 * 5) / 1e12,
              1e-15);
  // Compiled, the amax rides on the producer and one kernel writes both layouts of x (4 B); the
  // weight is cast (3 B) forward and backward.
  wl.compile = true;
  EXPECT_NEAR(times(OpKind::kForward, w, wl, hw).casts, (2e6 * 4 + 2e6 * 3) / 1e12, 1e-15);
  EXPECT_NEAR(times(OpKind::kBackward, w, wl, hw).casts, (1e6 * 4 + 2e6 * 3) / 1e12, 1e-15);
  // Transformer Engine's cast_transpose: 4 B per activation element; the weight's transposed
  // copy is made forward (4 B) and reused backward.
  wl.compile = false;
  wl.kernels = KernelLibrary::kTransformerEngine;
  EXPECT_NEAR(times(OpKind::kForward, w, wl, hw).casts, (2e6 * 4 + 2e6 * 4) / 1e12, 1e-15);
  EXPECT_NEAR(times(OpKind::kBackward, w, wl, hw).casts, 1e6 * 4 / 1e12, 1e-15);
}

TEST(KernelCostTest, Fp8GemmsRunAtTheirRelativeShare) {
  HardwareSpec s = round_gpu().spec();
  s.compute_profile->fp8_gemm_relative_permille = 500;
  const Hardware hw = Hardware::make(s).value();
  UnitWork w;
  w.gemms.push_back({.n = 1000, .k = 2000});
  const Workload wl{.seq_len = 1000, .micro_batch_size = 1, .matmul_dtype = DType::kFp8};
  // 4e12 FLOP at 200 TFLOP/s x 50% x 50%: 80 us, where the full share gives 40 us.
  EXPECT_NEAR(times(OpKind::kForward, w, wl, hw).gemm, 80e-6, 1e-15);
}

// The published measurement scripts/fit_fp8.py sets the Hopper presets' fp8 share from:
// torchao's float8 README gives a Float8Linear forward + backward (tensorwise, compiled) 1.39x
// faster than bf16 at M, K, N = 4096, 8192, 16384 on an H100, whose bf16 GEMMs reach 78% of peak
// and pointwise kernels 92% of 2.4 TB/s (torchao's roofline_utils.py). With those conditions and
// the preset's fp8 share, this model must reproduce the published speedup.
TEST(KernelCostTest, HopperFp8ShareReproducesTheTorchaoMicrobenchmark) {
  HardwareSpec s = find_hardware_preset("h100").value().spec();
  s.hbm_bytes_per_s = 2'400'000'000'000;
  s.compute_profile->gemm_permille = 780;
  s.compute_profile->elementwise_permille = 920;
  const Hardware hw = Hardware::make(s).value();
  UnitWork w;
  w.gemms.push_back({.n = 16384, .k = 8192});
  Workload wl{.seq_len = 4096, .micro_batch_size = 1, .compile = true};
  const auto step = [&] {
    return times(OpKind::kForward, w, wl, hw).total() + times(OpKind::kBackward, w, wl, hw).total();
  };
  const double bf16 = step();
  wl.matmul_dtype = DType::kFp8;
  const double fp8 = step();
  EXPECT_NEAR(bf16 / fp8, 1.39, 0.005);
}

TEST(KernelCostTest, Fp8WithoutFp8TensorCoresIsAnError) {
  const Hardware hw = round_gpu(/*fp8=*/0);
  UnitWork w;
  w.gemms.push_back({.n = 8, .k = 8});
  const Workload wl{.seq_len = 8, .micro_batch_size = 1, .matmul_dtype = DType::kFp8};
  const auto t =
      unit_kernel_times(OpKind::kForward, w, wl, DType::kBf16, hw, *hw.compute_profile());
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().message(),
            "fp8 matmuls: hardware 'round' has no fp8 tensor cores (compute_profile.peak_fp8_flops "
            "is 0)");
  EXPECT_FALSE(unit_kernel_times(OpKind::kForward, w, wl, DType::kBf16,
                                 find_hardware_preset("a100").value(),
                                 *find_hardware_preset("a100")->compute_profile())
                   .has_value());
}

TEST(KernelCostTest, WorkFlopsMatchTheImportersCount) {
  const Model m = load_model_preset("llama-3-8b").value();
  const Workload wl{.seq_len = 8192, .micro_batch_size = 2};
  for (const Unit& u : m.units()) {
    const double expected = static_cast<double>(u.forward_flops_per_token(8192).value()) * 8192 * 2;
    EXPECT_DOUBLE_EQ(work_forward_flops(u.work(), wl), expected) << u.name();
  }
}

TEST(KernelCostTest, RecomputeCostsItsShareOfTheForward) {
  const Hardware hw = round_gpu();
  UnitWork w;
  w.gemms.push_back({.n = 1000, .k = 2000});
  const Workload wl{.seq_len = 1000, .micro_batch_size = 1};
  Op fwd;
  fwd.kind = OpKind::kForward;
  fwd.flops = static_cast<std::int64_t>(work_forward_flops(w, wl));
  Op half = fwd;
  half.kind = OpKind::kRecompute;
  half.flops = fwd.flops / 2;
  const auto f = unit_compute_cost(fwd, w, wl, hw, *hw.compute_profile()).value();
  const auto r = unit_compute_cost(half, w, wl, hw, *hw.compute_profile()).value();
  EXPECT_NEAR(static_cast<double>(r.ps()), static_cast<double>(f.ps()) / 2, 1.0);
}

TEST(KernelCostTest, Fp8TrainingKeepsTheOutputHeadInTheComputeDtype) {
  const Hardware hw = round_gpu();
  UnitWork head;
  head.gemms.push_back({.n = 1000, .k = 2000, .output_head = true});
  const Workload bf16{.seq_len = 1000, .micro_batch_size = 1};
  Workload fp8 = bf16;
  fp8.matmul_dtype = DType::kFp8;
  // torchtitan's converter and Megatron-Core leave it a bf16 GEMM: bf16 math, no casts.
  for (const OpKind kind : {OpKind::kForward, OpKind::kBackward}) {
    EXPECT_DOUBLE_EQ(times(kind, head, fp8, hw).gemm, times(kind, head, bf16, hw).gemm);
    EXPECT_EQ(times(kind, head, fp8, hw).casts, 0.0);
  }
  // The same shape as a layer's GEMM runs at the fp8 rate (twice the peak here).
  head.gemms[0].output_head = false;
  EXPECT_NEAR(times(OpKind::kForward, head, fp8, hw).gemm, 40e-6, 1e-15);
}

TEST(KernelCostTest, TransformerEngineRunsAnInputGroupAsOneNormFusedGemm) {
  const Hardware hw = round_gpu();
  // q [1000 x 2000] and k, v [500 x 2000] read one norm output: input group 1.
  UnitWork w;
  w.gemms.push_back({.n = 1000, .k = 2000, .input_group = 1});
  w.gemms.push_back({.n = 500, .k = 2000, .count = 2, .input_group = 1});
  w.gemms.push_back({.n = 2000, .k = 1000});
  Workload wl{.seq_len = 1000, .micro_batch_size = 1, .matmul_dtype = DType::kFp8};
  // PyTorch: three GEMMs, each casting its input x [1000, 2000] and its weight (eager, 5 B).
  const KernelTimes torch = times(OpKind::kForward, w, wl, hw);
  // Inputs: q, k, v [1000, 2000] and o [1000, 1000]; weights: q and o 2e6, k and v 1e6.
  EXPECT_NEAR(torch.casts, ((3 * 2e6 + 1e6) * 5 + (2e6 + 2 * 1e6 + 2e6) * 5) / 1e12, 1e-15);
  wl.kernels = KernelLibrary::kTransformerEngine;
  const KernelTimes te = times(OpKind::kForward, w, wl, hw);
  // One fused GEMM [1000 x 2000] x [2000 x 2000]^T (linear_qkv): 20 x 10 tiles on 10 SMs, full
  // waves, 8e12 FLOP at 100 TFLOP/s; o as before.
  UnitWork fused;
  fused.gemms.push_back({.n = 2000, .k = 2000});
  fused.gemms.push_back({.n = 2000, .k = 1000});
  EXPECT_NEAR(te.gemm, times(OpKind::kForward, fused, wl, hw).gemm, 1e-15);
  // The norm writes the group's fp8 input: only the weights (the fused 4e6 and o's 2e6, 4 B each,
  // cast_transpose) and o's input x [1000, 1000] (4 B) are cast.
  EXPECT_NEAR(te.casts, ((4e6 + 2e6) * 4 + 1e6 * 4) / 1e12, 1e-15);
  // Backward: the fused weight's dX and dW GEMMs, and dY [1000, 2000] of the group cast once.
  EXPECT_NEAR(times(OpKind::kBackward, w, wl, hw).gemm,
              times(OpKind::kBackward, fused, wl, hw).gemm, 1e-15);
  EXPECT_NEAR(times(OpKind::kBackward, w, wl, hw).casts,
              times(OpKind::kBackward, fused, wl, hw).casts, 1e-15);
}

TEST(KernelCostTest, AutogradSumsTheInputGradientsOfAnUnfusedGroup) {
  const Hardware hw = round_gpu();
  // q and k, v read one input x [1000, 2000]: three input gradients to sum in PyTorch.
  UnitWork w;
  w.gemms.push_back({.n = 1000, .k = 2000, .input_group = 1});
  w.gemms.push_back({.n = 500, .k = 2000, .count = 2, .input_group = 1});
  UnitWork alone = w;
  for (GemmShape& g : alone.gemms) {
    g.input_group = 0;
  }
  Workload wl{.seq_len = 1000, .micro_batch_size = 1};
  // Eager: two adds of 3 x 2 B per element of x (2e6 elements); none forward.
  EXPECT_NEAR(times(OpKind::kBackward, w, wl, hw).elementwise -
                  times(OpKind::kBackward, alone, wl, hw).elementwise,
              2 * 6 * 2e6 / 1e12, 1e-18);
  EXPECT_EQ(times(OpKind::kForward, w, wl, hw).elementwise, 0.0);
  // Compiled: one kernel reads the three and writes the sum (4 x 2 B).
  wl.compile = true;
  EXPECT_NEAR(times(OpKind::kBackward, w, wl, hw).elementwise, 4 * 2 * 2e6 / 1e12, 1e-18);
  // Transformer Engine's fused GEMM writes the summed gradient.
  wl.kernels = KernelLibrary::kTransformerEngine;
  EXPECT_EQ(times(OpKind::kBackward, w, wl, hw).elementwise, 0.0);
}

TEST(KernelCostTest, SelectiveOpRecomputesUnsavedMatmulsAndEveryElementwiseKernel) {
  const Hardware hw = round_gpu();
  UnitWork w;
  w.gemms.push_back({.n = 1000, .k = 2000, .count = 2});
  w.attention = {.heads = 4, .qk_head_dim = 64, .v_head_dim = 64, .causal = true};
  w.elementwise_bytes = 1000;
  Workload wl{.seq_len = 1000, .micro_batch_size = 1};
  const KernelTimes f = times(OpKind::kForward, w, wl, hw);
  const double matmul = 2.0 * 2 * 1000 * 1000 * 2000;
  const double attention = 2.0 * 4 * 128 * 1000.0 * 1000.0;
  Op op;
  op.kind = OpKind::kRecompute;
  const auto cost = [&](std::int64_t flops, RecomputeKernels rule) {
    op.flops = flops;
    wl.recompute = rule;
    return static_cast<double>(unit_compute_cost(op, w, wl, hw, *hw.compute_profile())->ps()) /
           1e12;
  };
  // torchtitan's op policy: one of the two matmuls, all the elementwise traffic, no attention.
  EXPECT_NEAR(cost(static_cast<std::int64_t>(matmul / 2), RecomputeKernels::kUnsavedOps),
              f.gemm / 2 + f.elementwise, 1e-11);
  // Megatron's core-attention: the attention core alone.
  EXPECT_NEAR(cost(static_cast<std::int64_t>(attention), RecomputeKernels::kAttentionCore),
              f.attention, 1e-11);
  // Full: the whole forward.
  EXPECT_NEAR(cost(static_cast<std::int64_t>(matmul + attention), RecomputeKernels::kForwardShare),
              f.total(), 1e-11);
}

TEST(KernelCostTest, PresetsCarryProfiles) {
  for (const char* name : {"a100", "a100-40gb", "h100", "h100-96gb", "h200", "b200", "gb200"}) {
    const Hardware hw = find_hardware_preset(name).value();
    ASSERT_NE(hw.compute_profile(), nullptr) << name;
  }
  EXPECT_EQ(find_hardware_preset("a100")->compute_profile()->peak_fp8_flops, 0);
  EXPECT_GT(find_hardware_preset("h100")->compute_profile()->peak_fp8_flops,
            find_hardware_preset("h100")->peak_bf16_flops());
  EXPECT_EQ(find_hardware_preset("h100-96gb")->hbm_bytes_per_s(), 2'400'000'000'000);
  EXPECT_EQ(find_hardware_preset("gb200")->devices_per_node(), 72);
}

}  // namespace
}  // namespace fsdp::sim

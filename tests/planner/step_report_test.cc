// SPDX-License-Identifier: Apache-2.0
// The figures people compare (docs/metrics.md): torchtitan's FLOP count, tokens/s/GPU, MFU and
// the one fit verdict, on presets whose parameter counts are published.
#include "planner/step_report.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/hardware/hardware_presets.h"

namespace fsdp::planner {
namespace {

RunOptions options_of(std::string model, std::int64_t seq_len) {
  RunOptions o;
  o.model = std::move(model);
  o.seq_len = seq_len;
  return o;
}

TEST(StepReportTest, Llama3_8bFlopsAreTorchtitans) {
  // Llama 3 8B: 8,030,261,248 parameters, of which the token embedding is 128256 x 4096; 32
  // layers of 32 heads of 128 dims. torchtitan: 6 x (N - embedding) + 12 x l x h x q x t.
  const std::int64_t n = 8'030'261'248;
  const std::int64_t embedding = 128'256LL * 4096;
  const std::int64_t t = 8192;
  const sim::ModelFlops f = model_flops_of(options_of("llama-3-8b", t)).value();
  EXPECT_EQ(f.convention, "torchtitan");
  EXPECT_EQ(f.active_parameters, n - embedding);
  EXPECT_DOUBLE_EQ(f.attention_per_token, 12.0 * 32 * 32 * 128 * t);
  EXPECT_DOUBLE_EQ(f.per_token, 6.0 * static_cast<double>(n - embedding) + 12.0 * 32 * 32 * 128 * t);
}

TEST(StepReportTest, MixtralCountsTopKOfItsRoutedExperts) {
  // Mixtral 8x7B: 32 layers, 8 experts of 3 x 4096 x 14336 each, 2 routed per token; the
  // embedding 32000 x 4096 is not counted, the rest (attention, norms, routers, head) fully.
  const sim::ModelFlops f = model_flops_of(options_of("mixtral-8x7b", 4096)).value();
  const std::int64_t routed = 32LL * 8 * 3 * 4096 * 14336;
  const std::int64_t total = 46'702'792'704;
  const std::int64_t embedding = 32'000LL * 4096;
  EXPECT_EQ(f.active_parameters, total - embedding - routed + routed * 2 / 8);
}

TEST(StepReportTest, ModelFilesUseTheirMatmulFlops) {
  RunOptions o = options_of(FSDP_SOURCE_DIR "/tests/cli/testdata/padding.json", 256);
  const sim::ModelFlops f = model_flops_of(o).value();
  EXPECT_EQ(f.convention, "model file");
  EXPECT_GT(f.per_token, 0.0);
}

TEST(StepReportTest, ThroughputMfuAndFitAgreeWithTheSimulation) {
  RunOptions o = options_of("llama-3-8b", 2048);
  o.mesh = "dp=4,tp=2";
  o.microbatches = 3;
  o.micro_batch_size = 2;
  o.sizes.layers = 2;
  SimArgs sim;
  const SimulatedStep s = simulate_step(o, sim).value();
  // 4 data ranks (8 GPUs over tp=2) x 3 microbatches x 2 sequences x 2048 tokens.
  EXPECT_EQ(s.throughput.data_ranks, 4);
  EXPECT_EQ(s.throughput.tokens_per_step, 4 * 3 * 2 * 2048);
  const double step_s = static_cast<double>(s.result.step_time.ps()) * 1e-12;
  EXPECT_NEAR(s.throughput.tokens_per_second_per_gpu, 4.0 * 3 * 2 * 2048 / step_s / 8, 1e-6);
  EXPECT_NEAR(s.throughput.tflops_per_gpu,
              s.flops.per_token * s.throughput.tokens_per_second_per_gpu * 1e-12, 1e-9);
  EXPECT_NEAR(s.throughput.mfu,
              s.throughput.tflops_per_gpu * 1e12 /
                  static_cast<double>(find_hardware_preset("h100")->peak_bf16_flops()),
              1e-12);
  // One verdict: the headroom is the device less the worst reservation plus the runtime.
  std::int64_t worst = 0;
  for (const sim::ClassResult& c : s.result.classes) {
    worst = std::max(worst, c.memory.peak_reserved_bytes + c.memory.runtime_outside_allocator_bytes);
  }
  EXPECT_EQ(s.memory.headroom_bytes, s.hardware.memory_bytes() - worst);
  EXPECT_EQ(s.memory.fits, s.memory.headroom_bytes >= 0);
  EXPECT_EQ(s.memory.fits, s.result.fits);
  const nlohmann::json j = step_report_json(s);
  EXPECT_EQ(j["fits"], s.memory.fits);
  EXPECT_EQ(j["headroom_bytes"], s.memory.headroom_bytes);
  EXPECT_DOUBLE_EQ(j["tokens_per_second_per_gpu"].get<double>(),
                   s.throughput.tokens_per_second_per_gpu);
  EXPECT_DOUBLE_EQ(j["mfu"].get<double>(), s.throughput.mfu);
  EXPECT_DOUBLE_EQ(j["tflops_per_gpu"].get<double>(), s.throughput.tflops_per_gpu);
}

TEST(StepReportTest, ADeviceTooSmallForTheReservationDoesNotFit) {
  // Llama 3 8B on one GPU with Adam: 16 bytes per parameter of state alone, far above 80 GB.
  RunOptions o = options_of("llama-3-8b", 4096);
  o.mesh = "dp=1";
  SimArgs sim;
  const SimulatedStep s = simulate_step(o, sim).value();
  EXPECT_FALSE(s.memory.fits);
  EXPECT_LT(s.memory.headroom_bytes, 0);
  EXPECT_FALSE(s.result.fits);
  EXPECT_NE(step_report_text(s).find("memory: DOES NOT FIT"), std::string::npos);
  EXPECT_EQ(step_report_text(s).find(" fits"), std::string::npos) << step_report_text(s);
}

TEST(StepReportTest, TheAccuracyLineQuotesTheValidationFigures) {
  const std::string line = accuracy_line();
  EXPECT_NE(line.find("3.9% (median)"), std::string::npos) << line;
  EXPECT_NE(line.find("docs/validation.md"), std::string::npos) << line;
}

}  // namespace
}  // namespace fsdp::planner

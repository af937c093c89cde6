// SPDX-License-Identifier: Apache-2.0
// The training checks of executor_test on GPUs: the executor on CudaDevices (ranks as threads sharing GPU 0, the device
// in-process communicators) trains like the unsharded reference. Sharded and unsharded GPU runs
// use the same kernels and reduction orders, so they agree within 1e-5; against the host
// reference (OpenBLAS vs cuBLAS summation order) SGD keeps the difference small too. Every case
// needs a GPU (label gpu) and skips without one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/exec/trainer.h"
#include "tests/backends/cuda/cuda_test_util.h"
#include "tests/backends/exec/train_test_util.h"

namespace fsdp::cuda {
namespace {

exec::TrainSpec tiny_spec(const std::string& mesh, Strategy strategy, OptimizerKind optimizer) {
  exec::TrainSpec spec = exec::testing::tiny_train_spec();
  spec.mesh = parse_device_mesh(mesh).value();
  spec.strategy = strategy;
  spec.optimizer = optimizer;
  spec.microbatches = 2;
  spec.timeout_s = 60.0;
  return spec;
}

std::vector<exec::RankResult> train_on_gpu(const exec::TrainSpec& spec) {
  auto setup = exec::prepare_training(spec);
  EXPECT_TRUE(setup.has_value()) << setup.error().message();
  if (!setup) {
    return {};
  }
  auto results = exec::collect_ranks(
      run_ranks_in_process_cuda(*setup, spec, /*skip_rank=*/{}, /*on_step=*/{}));
  EXPECT_TRUE(results.has_value()) << results.error().message();
  return results ? std::move(*results) : std::vector<exec::RankResult>{};
}

TEST(CudaTrainingTest, ShardedEqualsUnshardedOnTheGpu) {
  FSDP_SKIP_WITHOUT_GPU();
  for (Strategy strategy : {Strategy::kZero2, Strategy::kZero3}) {
    const auto sharded = train_on_gpu(tiny_spec("dp=2", strategy, OptimizerKind::kAdam));
    const auto unsharded = train_on_gpu(tiny_spec("dp=2", Strategy::kNoShard, OptimizerKind::kAdam));
    ASSERT_EQ(sharded.size(), 2U);
    ASSERT_EQ(unsharded.size(), 2U);
    for (std::size_t r = 0; r < sharded.size(); ++r) {
      EXPECT_LE(exec::max_relative_error(sharded[r].losses, unsharded[r].losses), 1e-5)
          << to_string(strategy) << " rank " << r;
      EXPECT_LE(exec::max_relative_error(sharded[r].final_params, unsharded[r].final_params), 1e-5)
          << to_string(strategy) << " rank " << r;
    }
  }
}

// Trains `spec` on the GPU and compares every rank with the host reference of the whole model
// (SGD keeps the cuBLAS/OpenBLAS difference small).
void expect_gpu_run_matches_the_host_reference(const exec::TrainSpec& spec) {
  const auto results = train_on_gpu(spec);
  auto reference = exec::train_reference(spec);
  ASSERT_TRUE(reference.has_value()) << reference.error().message();
  ASSERT_EQ(results.size(), static_cast<std::size_t>(spec.mesh.size()));
  for (const exec::RankResult& r : results) {
    EXPECT_LE(exec::max_relative_error(r.losses, reference->losses), 1e-5) << "rank " << r.rank;
    EXPECT_LE(exec::max_relative_error(r.final_params, reference->final_params), 1e-5)
        << "rank " << r.rank;
    EXPECT_FALSE(r.timeline.empty());
  }
}

TEST(CudaTrainingTest, GpuTrainingMatchesTheHostReference) {
  FSDP_SKIP_WITHOUT_GPU();
  expect_gpu_run_matches_the_host_reference(
      tiny_spec("dp=2", Strategy::kZero3, OptimizerKind::kSgdMomentum));
}

// Tensor parallelism on the GPU (issue 19): dp=1 x tp=2 ranks sharing GPU 0, the decoder's
// collectives on the device in-process communicators.
TEST(CudaTrainingTest, TensorParallelMatchesTheHostReference) {
  FSDP_SKIP_WITHOUT_GPU();
  exec::TrainSpec spec = tiny_spec("dp=1,tp=2", Strategy::kZero3, OptimizerKind::kSgdMomentum);
  spec.model = exec::testing::tiny_tp_llama(spec.model, spec.mesh);
  expect_gpu_run_matches_the_host_reference(spec);
}

// Expert parallelism on the GPU: dp=1 x ep=2 ranks sharing GPU 0, the all-to-alls on the device
// in-process communicators, the router and slot kernels on the device.
TEST(CudaTrainingTest, ExpertParallelMatchesTheHostReference) {
  FSDP_SKIP_WITHOUT_GPU();
  exec::TrainSpec spec = tiny_spec("dp=1,ep=2", Strategy::kZero3, OptimizerKind::kSgdMomentum);
  spec.model = exec::testing::tiny_moe(spec.model, spec.mesh);
  expect_gpu_run_matches_the_host_reference(spec);
}

}  // namespace
}  // namespace fsdp::cuda

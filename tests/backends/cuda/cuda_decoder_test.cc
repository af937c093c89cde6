// SPDX-License-Identifier: Apache-2.0
// The device decoder and optimizer against the host ones: same loss, same gradients and same
// updated weights within fp32 rounding (relative error <= 1e-4 for the model, 1e-6 for the
// elementwise optimizer), with and without recomputation.
#include "backends/cuda/cuda_decoder.h"

#include <gtest/gtest.h>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/model/decoder.h"
#include "tests/backends/model/decoder_test_util.h"
#include "tests/backends/cuda/cuda_test_util.h"

namespace fsdp::cuda {
namespace {

using testing::DeviceVector;
using testing::rel_error;

void compare_decoders(bool recompute_layers) {
  // hidden and vocab above the 256 threads of a row block, so every block reduction strides.
  backend::DecoderConfig config = backend::testing::tiny_config();
  config.vocab = 300;
  config.hidden = 288;
  config.ffn = 96;
  const std::int64_t num_mb = 2;
  auto dev = CudaDevice::make(0, "rank 1");
  ASSERT_TRUE(dev.has_value()) << dev.error().message();
  auto host = backend::HostDecoder::make(config, num_mb, /*data_rank=*/1, /*data_world=*/2);
  ASSERT_TRUE(host.has_value());
  auto gpu = CudaDecoder::make(config, num_mb, 1, 2, 0, (*dev)->stream(StreamKind::kCompute));
  ASSERT_TRUE(gpu.has_value()) << gpu.error().message();
  const backend::ParamValues params = backend::initial_parameters(config);
  const auto units = static_cast<std::int32_t>(params.size());
  for (std::int32_t u = 1; u + 1 < units; ++u) {
    (*host)->set_recompute(u, recompute_layers);
    (*gpu)->set_recompute(u, recompute_layers);
  }
  // Device copies of the parameters and gradient buffers, unit by unit.
  std::vector<std::vector<std::unique_ptr<DeviceVector<float>>>> d_params(params.size());
  std::vector<std::vector<std::unique_ptr<DeviceVector<float>>>> d_grads(params.size());
  std::vector<std::vector<std::vector<float>>> h_grads(params.size());
  for (std::size_t u = 0; u < params.size(); ++u) {
    for (const std::vector<float>& p : params[u]) {
      d_params[u].push_back(std::make_unique<DeviceVector<float>>(p));
      d_grads[u].push_back(std::make_unique<DeviceVector<float>>(p.size()));
      h_grads[u].emplace_back(p.size(), 0.0F);
    }
  }
  auto host_ptrs = [&](std::size_t u) { return backend::testing::const_ptrs(params[u]); };
  auto dev_ptrs = [&](std::size_t u) {
    std::vector<const float*> v;
    for (const auto& p : d_params[u]) v.push_back(p->get());
    return v;
  };
  for (std::int64_t step = 0; step < 2; ++step) {
    (*host)->begin_step(step);
    (*gpu)->begin_step(step);
    for (std::int32_t mb = 0; mb < num_mb; ++mb) {
      for (std::int32_t u = 0; u < units; ++u) {
        (*host)->forward(u, mb, host_ptrs(static_cast<std::size_t>(u)));
        (*gpu)->forward(u, mb, dev_ptrs(static_cast<std::size_t>(u)));
      }
    }
    EXPECT_EQ((*gpu)->activation_bytes(), (*host)->activation_bytes());
    const double host_loss = (*host)->step_loss();
    const double gpu_loss = (*gpu)->step_loss();
    ASSERT_TRUE((*gpu)->status().ok()) << (*gpu)->status().error().message();
    EXPECT_NEAR(gpu_loss, host_loss, 1e-5 * std::abs(host_loss)) << "step " << step;
    for (std::int32_t mb = 0; mb < num_mb; ++mb) {
      for (std::int32_t u = units - 1; u >= 0; --u) {
        const auto uu = static_cast<std::size_t>(u);
        if (recompute_layers && u > 0 && u + 1 < units) {
          (*host)->recompute(u, mb, host_ptrs(uu));
          (*gpu)->recompute(u, mb, dev_ptrs(uu));
        }
        std::vector<float*> hg;
        std::vector<float*> dg;
        for (std::size_t p = 0; p < params[uu].size(); ++p) {
          hg.push_back(h_grads[uu][p].data());
          dg.push_back(d_grads[uu][p]->get());
        }
        (*host)->backward(u, mb, host_ptrs(uu), hg);
        (*gpu)->backward(u, mb, dev_ptrs(uu), dg);
        ASSERT_TRUE((*gpu)->status().ok()) << (*gpu)->status().error().message();
        for (std::size_t p = 0; p < params[uu].size(); ++p) {
          EXPECT_LE(rel_error(d_grads[uu][p]->download(), h_grads[uu][p]), 1e-4)
              << "unit " << u << " param " << p << " microbatch " << mb << " step " << step;
        }
      }
    }
    EXPECT_EQ((*gpu)->activation_bytes(), 0);
  }
}

TEST(CudaDecoderTest, ForwardBackwardMatchesHostDecoder) {
  FSDP_SKIP_WITHOUT_GPU();
  compare_decoders(/*recompute_layers=*/false);
}

TEST(CudaDecoderTest, RecomputationMatchesHostDecoder) {
  FSDP_SKIP_WITHOUT_GPU();
  compare_decoders(/*recompute_layers=*/true);
}

TEST(CudaOptimizerTest, DeviceUpdateMatchesOptimizerUpdate) {
  FSDP_SKIP_WITHOUT_GPU();
  const backend::OptimizerHyper hyper;
  const std::size_t n = 777;
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kSgdMomentum, OptimizerKind::kAdam}) {
    const std::size_t states = kind == OptimizerKind::kSgd ? 0 : (kind == OptimizerKind::kAdam ? 2 : 1);
    std::vector<float> w(n);
    std::vector<float> g(n);
    std::vector<float> st(states * n, 0.0F);
    for (std::size_t i = 0; i < n; ++i) {
      w[i] = 0.01F * static_cast<float>(i % 13) - 0.05F;
      g[i] = 0.003F * static_cast<float>(i % 7) - 0.01F;
    }
    DeviceVector<float> dw(w);
    DeviceVector<float> dg(g);
    DeviceVector<float> dst(st.empty() ? std::vector<float>(1, 0.0F) : st);
    for (std::int64_t step = 1; step <= 3; ++step) {
      backend::optimizer_update(kind, hyper, step, w, g, st);
      ASSERT_EQ(launch_optimizer_update(optimizer_args(kind, hyper, step),
                                        static_cast<std::int64_t>(n), dw.get(), dg.get(),
                                        dst.get(), nullptr),
                cudaSuccess);
    }
    EXPECT_LE(rel_error(dw.download(), w), 1e-6) << "optimizer " << static_cast<int>(kind);
    if (!st.empty()) {
      EXPECT_LE(rel_error(dst.download(), st), 1e-6) << "optimizer " << static_cast<int>(kind);
    }
  }
}

}  // namespace
}  // namespace fsdp::cuda

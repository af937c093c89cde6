// SPDX-License-Identifier: Apache-2.0
// optimizer_update: elementwise SGD, SGD with momentum and Adam. Scalars are double; every value
// is rounded to fp32 when stored, and the update reads the stored (rounded) state, so a shard
// updates bit for bit like the same slice of the unsharded tensor.
#include "backends/model/decoder.h"

#include <cmath>
#include <cstddef>

#include "core/base/check.h"

namespace fsdp::backend {

std::int64_t optimizer_num_states(OptimizerKind kind) {
  // fp32 state (the default) is always a valid policy.
  return OptimizerPolicy::make(kind)->num_states();
}

void optimizer_update(OptimizerKind kind, const OptimizerHyper& hyper, std::int64_t step,
                      std::span<float> weights, std::span<const float> grads,
                      std::span<float> state) {
  const std::size_t n = weights.size();
  FSDP_CHECK(grads.size() == n) << "optimizer_update: " << grads.size() << " grads for " << n
                                << " weights";
  FSDP_CHECK(step >= 1) << "optimizer_update: step must be >= 1, got " << step;
  switch (kind) {
    case OptimizerKind::kSgd:
      FSDP_CHECK(state.empty()) << "optimizer_update: sgd keeps no state, got " << state.size();
      for (std::size_t i = 0; i < n; ++i) {
        weights[i] = static_cast<float>(weights[i] - hyper.lr * grads[i]);
      }
      return;
    case OptimizerKind::kSgdMomentum:
      FSDP_CHECK(state.size() == n) << "optimizer_update: momentum state of " << state.size()
                                    << " values for " << n << " weights";
      for (std::size_t i = 0; i < n; ++i) {
        // PyTorch's SGD: buf = momentum * buf + g (buf starts at 0, so step 1 gives buf = g).
        state[i] = static_cast<float>(hyper.momentum * state[i] + grads[i]);
        weights[i] = static_cast<float>(weights[i] - hyper.lr * state[i]);
      }
      return;
    case OptimizerKind::kAdam: {
      FSDP_CHECK(state.size() == 2 * n) << "optimizer_update: adam state of " << state.size()
                                        << " values for " << n << " weights";
      const double t = static_cast<double>(step);
      const double bias1 = 1.0 - std::pow(hyper.beta1, t);
      const double bias2 = 1.0 - std::pow(hyper.beta2, t);
      float* exp_avg = state.data();
      float* exp_avg_sq = state.data() + n;
      for (std::size_t i = 0; i < n; ++i) {
        const double g = grads[i];
        exp_avg[i] = static_cast<float>(hyper.beta1 * exp_avg[i] + (1.0 - hyper.beta1) * g);
        exp_avg_sq[i] =
            static_cast<float>(hyper.beta2 * exp_avg_sq[i] + (1.0 - hyper.beta2) * g * g);
        const double m_hat = exp_avg[i] / bias1;
        const double v_hat = exp_avg_sq[i] / bias2;
        weights[i] =
            static_cast<float>(weights[i] - hyper.lr * m_hat / (std::sqrt(v_hat) + hyper.eps));
      }
      return;
    }
  }
  FSDP_CHECK(false) << "optimizer_update: unknown optimizer kind " << static_cast<int>(kind);
}

}  // namespace fsdp::backend

// SPDX-License-Identifier: Apache-2.0
// train_unsharded: the single-process reference the sharded backends are checked against. Each
// data rank's microbatch gradients come from that rank's own HostDecoder (the kernels a sharded
// rank runs, on the same shapes), so sharded and unsharded runs differ only in summation order.
#include "backends/model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <vector>

#include "core/base/strings.h"

namespace fsdp::backend {
namespace {

std::size_t idx(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

ParamValues zeros_like(const ParamValues& values, std::size_t per_element = 1) {
  ParamValues out;
  for (const auto& unit : values) {
    auto& u = out.emplace_back();
    for (const auto& param : unit) {
      u.emplace_back(param.size() * per_element, 0.0F);
    }
  }
  return out;
}

std::vector<const float*> param_ptrs(const std::vector<std::vector<float>>& unit) {
  std::vector<const float*> out;
  for (const auto& p : unit) {
    out.push_back(p.data());
  }
  return out;
}

}  // namespace

Expected<TrainResult> train_unsharded(const DecoderConfig& config, OptimizerKind optimizer,
                                      const OptimizerHyper& hyper, std::int64_t steps,
                                      std::int64_t num_microbatches, std::int64_t data_world,
                                      double grad_scale) {
  FSDP_RETURN_IF_ERROR(validate(config));
  if (steps < 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("train_unsharded: steps must be >= 0, got ", steps));
  }
  if (!std::isfinite(grad_scale)) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("train_unsharded: grad_scale must be finite, got ", grad_scale));
  }
  if (data_world < 1) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("train_unsharded: data_world must be >= 1, got ", data_world));
  }
  std::vector<std::unique_ptr<HostDecoder>> decoders;
  for (std::int64_t r = 0; r < data_world; ++r) {
    auto decoder = HostDecoder::make(config, num_microbatches, r, data_world);
    if (!decoder.has_value()) {
      return decoder.error().with_context("train_unsharded");
    }
    decoders.push_back(std::move(decoder).value());
  }
  FSDP_TRY(const OptimizerPolicy policy, OptimizerPolicy::make(optimizer));
  const auto num_states = static_cast<std::size_t>(policy.num_states());

  TrainResult result;
  result.final_params = initial_parameters(config);
  ParamValues& params = result.final_params;
  ParamValues state = zeros_like(params, num_states);
  ParamValues grad = zeros_like(params);      // one microbatch's gradient
  ParamValues rank_sum = zeros_like(params);  // a rank's sum over its microbatches
  ParamValues total = zeros_like(params);     // the sum over ranks
  const std::size_t num_units = params.size();
  const double scale = grad_scale / static_cast<double>(data_world);

  for (std::int64_t step = 0; step < steps; ++step) {
    for (auto& unit : total) {
      for (auto& p : unit) {
        std::fill(p.begin(), p.end(), 0.0F);
      }
    }
    double loss = 0.0;
    for (std::int64_t r = 0; r < data_world; ++r) {
      HostDecoder& decoder = *decoders[idx(r)];
      decoder.begin_step(step);
      for (auto& unit : rank_sum) {
        for (auto& p : unit) {
          std::fill(p.begin(), p.end(), 0.0F);
        }
      }
      for (std::int64_t mb = 0; mb < num_microbatches; ++mb) {
        const auto m = static_cast<std::int32_t>(mb);
        for (std::size_t u = 0; u < num_units; ++u) {
          decoder.forward(static_cast<std::int32_t>(u), m, param_ptrs(params[u]));
        }
        for (std::size_t u = num_units; u-- > 0;) {
          std::vector<float*> grads;
          for (auto& g : grad[u]) {
            grads.push_back(g.data());
          }
          decoder.backward(static_cast<std::int32_t>(u), m, param_ptrs(params[u]), grads);
          // Microbatch gradients accumulate in fp32, as in a rank's gradient buffer.
          for (std::size_t p = 0; p < grad[u].size(); ++p) {
            for (std::size_t i = 0; i < grad[u][p].size(); ++i) {
              rank_sum[u][p][i] += grad[u][p][i];
            }
          }
        }
      }
      loss += decoder.step_loss();
      for (std::size_t u = 0; u < num_units; ++u) {
        for (std::size_t p = 0; p < total[u].size(); ++p) {
          for (std::size_t i = 0; i < total[u][p].size(); ++i) {
            total[u][p][i] += rank_sum[u][p][i];
          }
        }
      }
    }
    result.losses.push_back(loss / static_cast<double>(data_world));
    for (std::size_t u = 0; u < num_units; ++u) {
      for (std::size_t p = 0; p < params[u].size(); ++p) {
        std::vector<float>& g = total[u][p];
        for (float& x : g) {
          x = static_cast<float>(x * scale);
        }
        optimizer_update(optimizer, hyper, step + 1, params[u][p], g, state[u][p]);
      }
    }
  }
  return result;
}

}  // namespace fsdp::backend

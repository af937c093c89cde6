// SPDX-License-Identifier: Apache-2.0
// Host mixture-of-experts kernels (moe_kernels.h).
#include "backends/model/moe_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace fsdp::backend {
namespace {

std::size_t idx(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

}  // namespace

void softmax_rows(std::int64_t rows, std::int64_t cols, const float* x, float* probs) {
  const std::size_t n = idx(cols);
  for (std::size_t t = 0; t < idx(rows); ++t) {
    const float* row = x + t * n;
    const float m = *std::max_element(row, row + n);
    double sum = 0.0;
    for (std::size_t e = 0; e < n; ++e) {
      sum += std::exp(static_cast<double>(row[e]) - m);
    }
    for (std::size_t e = 0; e < n; ++e) {
      probs[t * n + e] = static_cast<float>(std::exp(static_cast<double>(row[e]) - m) / sum);
    }
  }
}

void moe_route(std::int64_t rows, std::int64_t experts, std::int64_t top_k, std::int64_t capacity,
               const float* probs, std::int32_t* choice_expert, float* choice_weight,
               std::int32_t* choice_slot, std::int32_t* slot_token) {
  const std::size_t n = idx(experts);
  const std::size_t k = idx(top_k);
  std::fill(slot_token, slot_token + experts * capacity, -1);
  std::vector<std::int64_t> taken(n, 0);
  std::vector<bool> chosen(n);
  for (std::size_t t = 0; t < idx(rows); ++t) {
    const float* p = probs + t * n;
    std::fill(chosen.begin(), chosen.end(), false);
    double z = 0.0;
    for (std::size_t j = 0; j < k; ++j) {
      std::size_t best = n;
      for (std::size_t e = 0; e < n; ++e) {  // the largest not yet chosen; ties: lower e
        if (!chosen[e] && (best == n || p[e] > p[best])) {
          best = e;
        }
      }
      chosen[best] = true;
      choice_expert[t * k + j] = static_cast<std::int32_t>(best);
      z += p[best];
    }
    for (std::size_t j = 0; j < k; ++j) {
      const auto e = idx(choice_expert[t * k + j]);
      choice_weight[t * k + j] = static_cast<float>(p[e] / z);
      if (taken[e] < capacity) {
        const std::int64_t s = static_cast<std::int64_t>(e) * capacity + taken[e]++;
        choice_slot[t * k + j] = static_cast<std::int32_t>(s);
        slot_token[s] = static_cast<std::int32_t>(t);
      } else {
        choice_slot[t * k + j] = -1;
      }
    }
  }
}

void moe_dispatch(std::int64_t slots, std::int64_t hidden, const std::int32_t* slot_token,
                  const float* x, float* out) {
  const std::size_t h = idx(hidden);
  for (std::size_t s = 0; s < idx(slots); ++s) {
    float* dst = out + s * h;
    if (slot_token[s] < 0) {
      std::fill(dst, dst + h, 0.0F);
    } else {
      const float* src = x + idx(slot_token[s]) * h;
      std::copy(src, src + h, dst);
    }
  }
}

namespace {

// Per token, the sum over its kept copies (in order of j) of (weight x) the slot's row: the
// combine (weights, added to out) and the dispatch's backward (no weights, out overwritten).
void gather_copies(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                   const std::int32_t* choice_slot, const float* choice_weight, const float* slots,
                   bool add, float* out) {
  const std::size_t h = idx(hidden);
  const std::size_t k = idx(top_k);
  for (std::size_t t = 0; t < idx(rows); ++t) {
    for (std::size_t i = 0; i < h; ++i) {
      float sum = 0.0F;
      for (std::size_t j = 0; j < k; ++j) {
        const std::int32_t s = choice_slot[t * k + j];
        if (s >= 0) {
          const float v = slots[idx(s) * h + i];
          sum += choice_weight == nullptr ? v : choice_weight[t * k + j] * v;
        }
      }
      out[t * h + i] = add ? out[t * h + i] + sum : sum;
    }
  }
}

}  // namespace

void moe_dispatch_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                           const std::int32_t* choice_slot, const float* dslots, float* dx) {
  gather_copies(rows, top_k, hidden, choice_slot, nullptr, dslots, false, dx);
}

void moe_combine(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                 const std::int32_t* choice_slot, const float* choice_weight, const float* y,
                 float* out) {
  gather_copies(rows, top_k, hidden, choice_slot, choice_weight, y, true, out);
}

void moe_combine_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                          std::int64_t slots, const std::int32_t* choice_slot,
                          const float* choice_weight, const float* y, const float* dout,
                          float* dweight, float* dy) {
  const std::size_t h = idx(hidden);
  const std::size_t k = idx(top_k);
  std::fill(dy, dy + slots * hidden, 0.0F);
  for (std::size_t t = 0; t < idx(rows); ++t) {
    const float* g = dout + t * h;
    for (std::size_t j = 0; j < k; ++j) {
      const std::int32_t s = choice_slot[t * k + j];
      if (s < 0) {
        dweight[t * k + j] = 0.0F;
        continue;
      }
      const float w = choice_weight[t * k + j];
      const float* ys = y + idx(s) * h;
      float* d = dy + idx(s) * h;
      double dot = 0.0;
      for (std::size_t i = 0; i < h; ++i) {
        d[i] = w * g[i];
        dot += static_cast<double>(g[i]) * ys[i];
      }
      dweight[t * k + j] = static_cast<float>(dot);
    }
  }
}

void moe_router_backward(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                         const float* probs, const std::int32_t* choice_expert,
                         const float* choice_weight, const float* dweight, float* dlogits) {
  const std::size_t n = idx(experts);
  const std::size_t k = idx(top_k);
  std::vector<double> dp(n);
  for (std::size_t t = 0; t < idx(rows); ++t) {
    const float* p = probs + t * n;
    double z = 0.0;
    double wdw = 0.0;
    for (std::size_t j = 0; j < k; ++j) {
      z += p[idx(choice_expert[t * k + j])];
      wdw += static_cast<double>(choice_weight[t * k + j]) * dweight[t * k + j];
    }
    std::fill(dp.begin(), dp.end(), 0.0);
    for (std::size_t j = 0; j < k; ++j) {
      dp[idx(choice_expert[t * k + j])] = (dweight[t * k + j] - wdw) / z;
    }
    double pdp = 0.0;
    for (std::size_t e = 0; e < n; ++e) {
      pdp += p[e] * dp[e];
    }
    for (std::size_t e = 0; e < n; ++e) {
      dlogits[t * n + e] = static_cast<float>(p[e] * (dp[e] - pdp));
    }
  }
}

}  // namespace fsdp::backend

// SPDX-License-Identifier: Apache-2.0
// Reductions run in double in a fixed order so that the result depends only on the inputs, never
// on a thread count or on the other rows of the batch.
#include "backends/model/kernels.h"

#include "core/base/check.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <mutex>
#include <vector>

namespace fsdp::backend {
namespace {

constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluA = 0.044715;

blasint blas_int(std::int64_t v) {
  FSDP_CHECK(v >= 0 && v <= std::numeric_limits<blasint>::max())
      << "matrix size " << v << " does not fit the BLAS integer";
  return static_cast<blasint>(v);
}

std::size_t idx(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

}  // namespace

void use_single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void matmul(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
            const float* a, const float* b, float beta, float* c) {
  const blasint lda = blas_int(trans_a ? m : k);
  const blasint ldb = blas_int(trans_b ? k : n);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, blas_int(m), blas_int(n), blas_int(k),
              /*alpha=*/1.0F, a, lda, b, ldb, beta, c, blas_int(n));
}

void embedding_forward(std::span<const std::int32_t> tokens, std::int64_t hidden,
                       const float* table, float* out) {
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const float* row = table + idx(tokens[t]) * idx(hidden);
    float* dst = out + t * idx(hidden);
    for (std::size_t j = 0; j < idx(hidden); ++j) {
      dst[j] = row[j];
    }
  }
}

void embedding_backward(std::span<const std::int32_t> tokens, std::int64_t vocab,
                        std::int64_t hidden, const float* dout, float* dtable) {
  const std::size_t h = idx(hidden);
  for (std::size_t i = 0; i < idx(vocab) * h; ++i) {
    dtable[i] = 0.0F;
  }
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    float* row = dtable + idx(tokens[t]) * h;
    const float* src = dout + t * h;
    for (std::size_t j = 0; j < h; ++j) {
      row[j] += src[j];
    }
  }
}

void rmsnorm_forward(std::int64_t rows, std::int64_t dim, const float* x, const float* weight,
                     float* inv_rms, float* out) {
  const std::size_t d = idx(dim);
  for (std::size_t t = 0; t < idx(rows); ++t) {
    const float* xr = x + t * d;
    double sum_sq = 0.0;
    for (std::size_t j = 0; j < d; ++j) {
      sum_sq += static_cast<double>(xr[j]) * xr[j];
    }
    const float inv =
        static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(d) + kRmsNormEps));
    inv_rms[t] = inv;
    for (std::size_t j = 0; j < d; ++j) {
      out[t * d + j] = static_cast<float>(static_cast<double>(xr[j]) * inv * weight[j]);
    }
  }
}

void rmsnorm_backward(std::int64_t rows, std::int64_t dim, const float* x, const float* weight,
                      const float* inv_rms, const float* dout, float* dx, float* dweight) {
  const std::size_t d = idx(dim);
  // dweight sums over rows: accumulate in double, row by row in order, then round once.
  std::vector<double> dw(d, 0.0);
  for (std::size_t t = 0; t < idx(rows); ++t) {
    const float* xr = x + t * d;
    const float* gr = dout + t * d;
    const double inv = inv_rms[t];
    double dot = 0.0;  // sum_j dxhat_j * xhat_j
    for (std::size_t j = 0; j < d; ++j) {
      const double xhat = xr[j] * inv;
      dw[j] += gr[j] * xhat;
      dot += gr[j] * static_cast<double>(weight[j]) * xhat;
    }
    const double mean = dot / static_cast<double>(d);
    for (std::size_t j = 0; j < d; ++j) {
      const double xhat = xr[j] * inv;
      const double dxhat = gr[j] * static_cast<double>(weight[j]);
      dx[t * d + j] = static_cast<float>(inv * (dxhat - xhat * mean));
    }
  }
  for (std::size_t j = 0; j < d; ++j) {
    dweight[j] = static_cast<float>(dw[j]);
  }
}

void gelu_forward(std::int64_t n, const float* u, float* a) {
  for (std::size_t i = 0; i < idx(n); ++i) {
    const double x = u[i];
    a[i] = static_cast<float>(0.5 * x * (1.0 + std::tanh(kGeluC * (x + kGeluA * x * x * x))));
  }
}

void gelu_backward(std::int64_t n, const float* u, const float* da, float* du) {
  for (std::size_t i = 0; i < idx(n); ++i) {
    const double x = u[i];
    const double th = std::tanh(kGeluC * (x + kGeluA * x * x * x));
    const double d =
        0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * kGeluC * (1.0 + 3.0 * kGeluA * x * x);
    du[i] = static_cast<float>(da[i] * d);
  }
}

void softmax_cross_entropy(std::int64_t vocab, std::span<const std::int32_t> targets,
                           const float* logits, float* probs, double* row_loss) {
  const std::size_t v = idx(vocab);
  for (std::size_t t = 0; t < targets.size(); ++t) {
    const float* z = logits + t * v;
    double max = z[0];
    for (std::size_t j = 1; j < v; ++j) {
      max = std::max(max, static_cast<double>(z[j]));
    }
    double sum = 0.0;
    for (std::size_t j = 0; j < v; ++j) {
      sum += std::exp(z[j] - max);
    }
    for (std::size_t j = 0; j < v; ++j) {
      probs[t * v + j] = static_cast<float>(std::exp(z[j] - max) / sum);
    }
    row_loss[t] = std::log(sum) - (z[idx(targets[t])] - max);
  }
}

void softmax_cross_entropy_backward(std::int64_t vocab, std::span<const std::int32_t> targets,
                                    const float* probs, float* dlogits) {
  const std::size_t v = idx(vocab);
  const double scale = 1.0 / static_cast<double>(targets.size());
  for (std::size_t t = 0; t < targets.size(); ++t) {
    for (std::size_t j = 0; j < v; ++j) {
      const double onehot = j == idx(targets[t]) ? 1.0 : 0.0;
      dlogits[t * v + j] = static_cast<float>((probs[t * v + j] - onehot) * scale);
    }
  }
}

}  // namespace fsdp::backend

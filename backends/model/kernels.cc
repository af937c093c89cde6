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
                     float eps, float* inv_rms, float* out) {
  const std::size_t d = idx(dim);
  for (std::size_t t = 0; t < idx(rows); ++t) {
    const float* xr = x + t * d;
    double sum_sq = 0.0;
    for (std::size_t j = 0; j < d; ++j) {
      sum_sq += static_cast<double>(xr[j]) * xr[j];
    }
    const float inv = static_cast<float>(
        1.0 / std::sqrt(sum_sq / static_cast<double>(d) + static_cast<double>(eps)));
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

void add_bias(std::int64_t rows, std::int64_t cols, const float* bias, float* y) {
  const std::size_t c = idx(cols);
  for (std::size_t r = 0; r < idx(rows); ++r) {
    for (std::size_t j = 0; j < c; ++j) {
      y[r * c + j] += bias[j];
    }
  }
}

void bias_backward(std::int64_t rows, std::int64_t cols, const float* dy, float* dbias) {
  const std::size_t c = idx(cols);
  std::vector<double> sum(c, 0.0);
  for (std::size_t r = 0; r < idx(rows); ++r) {
    for (std::size_t j = 0; j < c; ++j) {
      sum[j] += dy[r * c + j];
    }
  }
  for (std::size_t j = 0; j < c; ++j) {
    dbias[j] = static_cast<float>(sum[j]);
  }
}

namespace {

// Rotates every head's pairs (x_i, x_{i+d/2}) of each row by sign * angle(position, i).
void rope_rotate(std::int64_t rows, std::int64_t seq_len, std::int64_t heads, std::int64_t head_dim,
                 double theta, double sign, float* x) {
  const std::size_t half = idx(head_dim / 2);
  const std::size_t d = idx(head_dim);
  std::vector<double> inv_freq(half);
  for (std::size_t i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  for (std::size_t r = 0; r < idx(rows); ++r) {
    const auto pos = static_cast<double>(r % idx(seq_len));
    for (std::size_t i = 0; i < half; ++i) {
      const double a = pos * inv_freq[i];
      const double c = std::cos(a);
      const double sn = sign * std::sin(a);
      for (std::size_t h = 0; h < idx(heads); ++h) {
        float* xh = x + (r * idx(heads) + h) * d;
        const double x1 = xh[i];
        const double x2 = xh[i + half];
        xh[i] = static_cast<float>(x1 * c - x2 * sn);
        xh[i + half] = static_cast<float>(x2 * c + x1 * sn);
      }
    }
  }
}

double dot(const float* a, const float* b, std::size_t n) {
  double s = 0.0;
  for (std::size_t c = 0; c < n; ++c) {
    s += static_cast<double>(a[c]) * b[c];
  }
  return s;
}

// Row strides and offsets of the attention tensors of one (sample, head).
struct AttentionShape {
  std::size_t s;       // seq_len
  std::size_t d;       // head_dim
  std::size_t q_row;   // heads * head_dim
  std::size_t kv_row;  // kv_heads * head_dim
  std::size_t heads;
  std::size_t group;  // heads / kv_heads
  double scale;       // 1 / sqrt(head_dim)

  AttentionShape(std::int64_t seq_len, std::int64_t num_heads, std::int64_t kv_heads,
                 std::int64_t head_dim)
      : s(idx(seq_len)),
        d(idx(head_dim)),
        q_row(idx(num_heads * head_dim)),
        kv_row(idx(kv_heads * head_dim)),
        heads(idx(num_heads)),
        group(idx(num_heads / kv_heads)),
        scale(1.0 / std::sqrt(static_cast<double>(head_dim))) {}
  // Element offsets of token i of sample b, query head h / kv head g.
  std::size_t q(std::size_t b, std::size_t i, std::size_t h) const {
    return (b * s + i) * q_row + h * d;
  }
  std::size_t kv(std::size_t b, std::size_t j, std::size_t g) const {
    return (b * s + j) * kv_row + g * d;
  }
};

}  // namespace

void rope_forward(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                  std::int64_t head_dim, double theta, float* x) {
  rope_rotate(rows, seq_len, heads, head_dim, theta, /*sign=*/1.0, x);
}

void rope_backward(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                   std::int64_t head_dim, double theta, float* dx) {
  rope_rotate(rows, seq_len, heads, head_dim, theta, /*sign=*/-1.0, dx);
}

void attention_forward(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                       std::int64_t kv_heads, std::int64_t head_dim, const float* q, const float* k,
                       const float* v, float* out, float* lse) {
  FSDP_CHECK(kv_heads > 0 && heads % kv_heads == 0)
      << "attention: kv_heads " << kv_heads << " must divide heads " << heads;
  const AttentionShape sh(seq_len, heads, kv_heads, head_dim);
  std::vector<double> score(sh.s);
  std::vector<double> acc(sh.d);
  for (std::size_t b = 0; b < idx(batch); ++b) {
    for (std::size_t h = 0; h < sh.heads; ++h) {
      const std::size_t g = h / sh.group;
      for (std::size_t i = 0; i < sh.s; ++i) {
        const float* qi = q + sh.q(b, i, h);
        double max = -std::numeric_limits<double>::infinity();
        for (std::size_t j = 0; j <= i; ++j) {
          score[j] = dot(qi, k + sh.kv(b, j, g), sh.d) * sh.scale;
          max = std::max(max, score[j]);
        }
        double sum = 0.0;
        for (std::size_t j = 0; j <= i; ++j) {
          sum += std::exp(score[j] - max);
        }
        const double log_sum = max + std::log(sum);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::size_t j = 0; j <= i; ++j) {
          const double p = std::exp(score[j] - log_sum);
          const float* vj = v + sh.kv(b, j, g);
          for (std::size_t c = 0; c < sh.d; ++c) {
            acc[c] += p * vj[c];
          }
        }
        float* oi = out + sh.q(b, i, h);
        for (std::size_t c = 0; c < sh.d; ++c) {
          oi[c] = static_cast<float>(acc[c]);
        }
        lse[(b * sh.s + i) * sh.heads + h] = static_cast<float>(log_sum);
      }
    }
  }
}

void attention_backward(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                        std::int64_t kv_heads, std::int64_t head_dim, const float* q,
                        const float* k, const float* v, const float* out, const float* lse,
                        const float* dout, float* dq, float* dk, float* dv) {
  FSDP_CHECK(kv_heads > 0 && heads % kv_heads == 0)
      << "attention: kv_heads " << kv_heads << " must divide heads " << heads;
  const AttentionShape sh(seq_len, heads, kv_heads, head_dim);
  // P and dS of one query row (keys j <= i).
  std::vector<double> p(sh.s);
  std::vector<double> ds(sh.s);
  std::vector<double> acc(sh.d);
  // dk and dv of one sample, summed in double: over the group's heads (outer, in order), then
  // over the queries in order; rounded once per sample.
  std::vector<double> dk_acc(sh.s * sh.kv_row);
  std::vector<double> dv_acc(sh.s * sh.kv_row);
  for (std::size_t b = 0; b < idx(batch); ++b) {
    std::fill(dk_acc.begin(), dk_acc.end(), 0.0);
    std::fill(dv_acc.begin(), dv_acc.end(), 0.0);
    for (std::size_t h = 0; h < sh.heads; ++h) {
      const std::size_t g = h / sh.group;
      for (std::size_t i = 0; i < sh.s; ++i) {
        const float* qi = q + sh.q(b, i, h);
        const float* gi = dout + sh.q(b, i, h);
        const double l = lse[(b * sh.s + i) * sh.heads + h];
        const double di = dot(gi, out + sh.q(b, i, h), sh.d);
        for (std::size_t j = 0; j <= i; ++j) {
          p[j] = std::exp(dot(qi, k + sh.kv(b, j, g), sh.d) * sh.scale - l);
          ds[j] = p[j] * (dot(gi, v + sh.kv(b, j, g), sh.d) - di);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::size_t j = 0; j <= i; ++j) {
          const float* kj = k + sh.kv(b, j, g);
          double* dkj = dk_acc.data() + j * sh.kv_row + g * sh.d;
          double* dvj = dv_acc.data() + j * sh.kv_row + g * sh.d;
          for (std::size_t c = 0; c < sh.d; ++c) {
            acc[c] += ds[j] * kj[c];
            // For each key j, queries arrive in order i = j, j+1, ... within head h: the order
            // the CUDA set's per-key blocks sum in.
            dkj[c] += ds[j] * qi[c];
            dvj[c] += p[j] * gi[c];
          }
        }
        float* dqi = dq + sh.q(b, i, h);
        for (std::size_t c = 0; c < sh.d; ++c) {
          dqi[c] = static_cast<float>(acc[c] * sh.scale);
        }
      }
    }
    for (std::size_t e = 0; e < sh.s * sh.kv_row; ++e) {
      dk[b * sh.s * sh.kv_row + e] = static_cast<float>(dk_acc[e] * sh.scale);
      dv[b * sh.s * sh.kv_row + e] = static_cast<float>(dv_acc[e]);
    }
  }
}

void swiglu_forward(std::int64_t n, const float* gate, const float* up, float* out) {
  for (std::size_t i = 0; i < idx(n); ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void swiglu_backward(std::int64_t n, const float* gate, const float* up, const float* dout,
                     float* dgate, float* dup) {
  for (std::size_t i = 0; i < idx(n); ++i) {
    const double g = gate[i];
    const double sig = 1.0 / (1.0 + std::exp(-g));
    dup[i] = static_cast<float>(dout[i] * (g * sig));
    dgate[i] =
        static_cast<float>(static_cast<double>(dout[i]) * up[i] * sig * (1.0 + g * (1.0 - sig)));
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

void embedding_slice_forward(std::span<const std::int32_t> tokens, std::int64_t hidden,
                             std::int64_t first, std::int64_t table_rows, const float* table,
                             float* out) {
  const std::size_t h = idx(hidden);
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const std::int64_t row = tokens[t] - first;
    float* dst = out + t * h;
    for (std::size_t j = 0; j < h; ++j) {
      dst[j] = row >= 0 && row < table_rows ? table[idx(row) * h + j] : 0.0F;
    }
  }
}

void embedding_slice_backward(std::span<const std::int32_t> tokens, std::int64_t hidden,
                              std::int64_t first, std::int64_t table_rows, const float* dout,
                              float* dtable) {
  const std::size_t h = idx(hidden);
  for (std::size_t i = 0; i < idx(table_rows) * h; ++i) {
    dtable[i] = 0.0F;
  }
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const std::int64_t row = tokens[t] - first;
    if (row < 0 || row >= table_rows) {
      continue;
    }
    float* dst = dtable + idx(row) * h;
    const float* src = dout + t * h;
    for (std::size_t j = 0; j < h; ++j) {
      dst[j] += src[j];
    }
  }
}

void vocab_parallel_stats(std::int64_t cols, std::int64_t valid, std::int64_t first,
                          std::span<const std::int32_t> targets, const float* logits,
                          float* stats) {
  for (std::size_t t = 0; t < targets.size(); ++t) {
    const float* z = logits + t * idx(cols);
    double max = z[0];
    for (std::size_t j = 1; j < idx(valid); ++j) {
      max = std::max(max, static_cast<double>(z[j]));
    }
    double sum = 0.0;
    for (std::size_t j = 0; j < idx(valid); ++j) {
      sum += std::exp(z[j] - max);
    }
    const std::int64_t target = targets[t] - first;
    stats[3 * t] = static_cast<float>(max);  // exact: max is one of the fp32 logits
    stats[3 * t + 1] = static_cast<float>(sum);
    stats[3 * t + 2] = target >= 0 && target < valid ? z[idx(target)] : 0.0F;
  }
}

void vocab_parallel_softmax(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                            std::int64_t members, const float* all_stats, const float* logits,
                            float* probs, double* row_loss) {
  const std::size_t n = idx(rows);
  for (std::size_t t = 0; t < n; ++t) {
    double max = all_stats[3 * t];
    for (std::size_t r = 1; r < idx(members); ++r) {
      max = std::max(max, static_cast<double>(all_stats[(r * n + t) * 3]));
    }
    double sum = 0.0;
    double target = 0.0;
    for (std::size_t r = 0; r < idx(members); ++r) {
      const float* s = all_stats + (r * n + t) * 3;
      sum += static_cast<double>(s[1]) * std::exp(static_cast<double>(s[0]) - max);
      target += s[2];
    }
    const float* z = logits + t * idx(cols);
    for (std::size_t j = 0; j < idx(cols); ++j) {
      probs[t * idx(cols) + j] =
          j < idx(valid) ? static_cast<float>(std::exp(z[j] - max) / sum) : 0.0F;
    }
    row_loss[t] = std::log(sum) - (target - max);
  }
}

void vocab_parallel_backward(std::int64_t cols, std::int64_t valid, std::int64_t first,
                             std::span<const std::int32_t> targets, const float* probs,
                             float* dlogits) {
  const std::size_t v = idx(cols);
  const double scale = 1.0 / static_cast<double>(targets.size());
  for (std::size_t t = 0; t < targets.size(); ++t) {
    const std::int64_t target = targets[t] - first;
    for (std::size_t j = 0; j < v; ++j) {
      const double onehot = static_cast<std::int64_t>(j) == target ? 1.0 : 0.0;
      dlogits[t * v + j] =
          j < idx(valid) ? static_cast<float>((probs[t * v + j] - onehot) * scale) : 0.0F;
    }
  }
}

}  // namespace fsdp::backend

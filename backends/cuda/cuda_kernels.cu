// SPDX-License-Identifier: Apache-2.0
// Device kernels. Row reductions (rmsnorm, softmax) use one block per row and a block reduction
// in double; sums over rows or tokens (rmsnorm's dweight, the embedding's scatter-add) give each
// column one thread that walks the rows in order, so they are deterministic and follow the host
// kernels' summation order exactly.
#include "backends/cuda/cuda_kernels.h"

#include <algorithm>

namespace fsdp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxMembers = 64;  // members per pack/unpack/reduce launch (kernel parameter size)
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluA = 0.044715;

unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<std::int64_t>(std::max<std::int64_t>(b, 1), 65535));
}

// Grid-stride loop over [0, n).
#define FSDP_GRID_LOOP(i, n)                                                          \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       i < (n); i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)

__device__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}
__device__ double warp_max(double v) {
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_down_sync(0xffffffffu, v, o));
  return v;
}
// Sum (or max) over the block; every thread gets the result. blockDim.x == kThreads.
template <bool kMax>
__device__ double block_reduce(double v) {
  __shared__ double part[kThreads / 32];
  __shared__ double result;
  v = kMax ? warp_max(v) : warp_sum(v);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double w = lane < kThreads / 32 ? part[lane] : (kMax ? -INFINITY : 0.0);
    w = kMax ? warp_max(w) : warp_sum(w);
    if (lane == 0) result = w;
  }
  __syncthreads();
  const double r = result;
  __syncthreads();  // part/result may be reused by the next call
  return r;
}

__global__ void fill_kernel(float* x, std::int64_t n, float value) {
  FSDP_GRID_LOOP(i, n) { x[i] = value; }
}
__global__ void scale_kernel(float* x, std::int64_t n, double alpha) {
  FSDP_GRID_LOOP(i, n) { x[i] = static_cast<float>(alpha * x[i]); }
}
__global__ void add_kernel(float* y, const float* x, std::int64_t n) {
  FSDP_GRID_LOOP(i, n) { y[i] = y[i] + x[i]; }
}

// __fmul_rn/__fadd_rn keep nvcc from contracting into an FMA, which would round differently
// from the host loop.
__global__ void accumulate_kernel(float* dst, const float* src, std::int64_t n, float scale,
                                  bool overwrite) {
  FSDP_GRID_LOOP(i, n) {
    const float v = __fmul_rn(scale, src[i]);
    dst[i] = overwrite ? v : __fadd_rn(dst[i], v);
  }
}

struct MemberPtrs {
  const float* p[kMaxMembers];
};
__global__ void reduce_members_kernel(float* out, MemberPtrs ins, int num, bool accumulate,
                                      std::int64_t n) {
  FSDP_GRID_LOOP(i, n) {
    float acc = accumulate ? out[i] : 0.0F;
    for (int k = 0; k < num; ++k) acc += ins.p[k][i];
    out[i] = acc;
  }
}

struct CopyPlan {
  std::int64_t src[kMaxMembers];
  std::int64_t dst[kMaxMembers];
  std::int64_t len[kMaxMembers];  // in words
};
template <class Word>
__global__ void copy_plan_kernel(char* dst, const char* src, CopyPlan plan) {
  const int k = static_cast<int>(blockIdx.y);
  const Word* s = reinterpret_cast<const Word*>(src + plan.src[k]);
  Word* d = reinterpret_cast<Word*>(dst + plan.dst[k]);
  FSDP_GRID_LOOP(i, plan.len[k]) { d[i] = s[i]; }
}

// One launch per chunk of kMaxMembers; Word = 16 bytes when every offset and length allows it.
cudaError_t copy_members(bool pack, void* padded, void* packed, const std::int64_t* counts,
                         int num, std::int64_t slot, cudaStream_t stream) {
  bool wide = reinterpret_cast<std::uintptr_t>(padded) % 16 == 0 &&
              reinterpret_cast<std::uintptr_t>(packed) % 16 == 0 && slot % 16 == 0;
  std::int64_t max_len = 0;
  for (int k = 0; k < num; ++k) {
    wide = wide && counts[k] % 16 == 0;
    max_len = std::max(max_len, counts[k]);
  }
  if (max_len == 0) return cudaSuccess;
  const std::int64_t word = wide ? 16 : 1;
  std::int64_t packed_off = 0;
  for (int first = 0; first < num; first += kMaxMembers) {
    const int chunk = std::min(kMaxMembers, num - first);
    CopyPlan plan{};
    for (int c = 0; c < chunk; ++c) {
      const int k = first + c;
      const std::int64_t padded_off = static_cast<std::int64_t>(k) * slot;
      plan.src[c] = pack ? packed_off : padded_off;
      plan.dst[c] = pack ? padded_off : packed_off;
      plan.len[c] = counts[k] / word;
      packed_off += counts[k];
    }
    char* dst = static_cast<char*>(pack ? padded : packed);
    const char* src = static_cast<const char*>(pack ? packed : padded);
    const dim3 grid(blocks_for(max_len / word), static_cast<unsigned>(chunk));
    (void)cudaGetLastError();  // a stale error is not this launch's
    if (wide) {
      copy_plan_kernel<uint4><<<grid, kThreads, 0, stream>>>(dst, src, plan);
    } else {
      copy_plan_kernel<char><<<grid, kThreads, 0, stream>>>(dst, src, plan);
    }
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

__global__ void embedding_forward_kernel(const std::int32_t* tokens, std::int64_t rows,
                                         std::int64_t hidden, const float* table, float* out) {
  FSDP_GRID_LOOP(i, rows * hidden) {
    const std::int64_t t = i / hidden;
    const std::int64_t j = i % hidden;
    out[i] = table[static_cast<std::int64_t>(tokens[t]) * hidden + j];
  }
}
__global__ void embedding_backward_kernel(const std::int32_t* tokens, std::int64_t rows,
                                          std::int64_t hidden, const float* dout, float* dtable) {
  FSDP_GRID_LOOP(j, hidden) {
    for (std::int64_t t = 0; t < rows; ++t) {
      float* cell = dtable + static_cast<std::int64_t>(tokens[t]) * hidden + j;
      *cell += dout[t * hidden + j];
    }
  }
}

__global__ void rmsnorm_forward_kernel(std::int64_t dim, const float* x, const float* weight,
                                       float eps, float* inv_rms, float* out) {
  const std::int64_t t = blockIdx.x;
  const float* xr = x + t * dim;
  double sum_sq = 0.0;
  for (std::int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    sum_sq += static_cast<double>(xr[j]) * xr[j];
  }
  sum_sq = block_reduce<false>(sum_sq);
  const float inv =
      static_cast<float>(1.0 / sqrt(sum_sq / static_cast<double>(dim) + static_cast<double>(eps)));
  if (threadIdx.x == 0) inv_rms[t] = inv;
  for (std::int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    out[t * dim + j] = static_cast<float>(static_cast<double>(xr[j]) * inv * weight[j]);
  }
}
__global__ void rmsnorm_backward_dx_kernel(std::int64_t dim, const float* x, const float* weight,
                                           const float* inv_rms, const float* dout, float* dx) {
  const std::int64_t t = blockIdx.x;
  const float* xr = x + t * dim;
  const float* gr = dout + t * dim;
  const double inv = inv_rms[t];
  double dot = 0.0;
  for (std::int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    dot += gr[j] * static_cast<double>(weight[j]) * (xr[j] * inv);
  }
  dot = block_reduce<false>(dot);
  const double mean = dot / static_cast<double>(dim);
  for (std::int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    const double xhat = xr[j] * inv;
    const double dxhat = gr[j] * static_cast<double>(weight[j]);
    dx[t * dim + j] = static_cast<float>(inv * (dxhat - xhat * mean));
  }
}
__global__ void rmsnorm_backward_dw_kernel(std::int64_t rows, std::int64_t dim, const float* x,
                                           const float* inv_rms, const float* dout,
                                           float* dweight) {
  FSDP_GRID_LOOP(j, dim) {
    double dw = 0.0;
    for (std::int64_t t = 0; t < rows; ++t) {
      const double xhat = x[t * dim + j] * static_cast<double>(inv_rms[t]);
      dw += dout[t * dim + j] * xhat;
    }
    dweight[j] = static_cast<float>(dw);
  }
}

__global__ void gelu_forward_kernel(std::int64_t n, const float* u, float* a) {
  FSDP_GRID_LOOP(i, n) {
    const double x = u[i];
    a[i] = static_cast<float>(0.5 * x * (1.0 + tanh(kGeluC * (x + kGeluA * x * x * x))));
  }
}
__global__ void gelu_backward_kernel(std::int64_t n, const float* u, const float* da, float* du) {
  FSDP_GRID_LOOP(i, n) {
    const double x = u[i];
    const double th = tanh(kGeluC * (x + kGeluA * x * x * x));
    const double d =
        0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * kGeluC * (1.0 + 3.0 * kGeluA * x * x);
    du[i] = static_cast<float>(da[i] * d);
  }
}

__global__ void add_bias_kernel(std::int64_t rows, std::int64_t cols, const float* bias, float* y) {
  FSDP_GRID_LOOP(i, rows * cols) { y[i] = y[i] + bias[i % cols]; }
}
__global__ void bias_backward_kernel(std::int64_t rows, std::int64_t cols, const float* dy,
                                     float* dbias) {
  FSDP_GRID_LOOP(c, cols) {
    double sum = 0.0;
    for (std::int64_t r = 0; r < rows; ++r) sum += dy[r * cols + c];
    dbias[c] = static_cast<float>(sum);
  }
}

// One thread per (row, head, pair i < head_dim / 2); sign = +1 forward, -1 backward.
__global__ void rope_kernel(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                            std::int64_t head_dim, double theta, double sign, float* x) {
  const std::int64_t half = head_dim / 2;
  FSDP_GRID_LOOP(e, rows * heads * half) {
    const std::int64_t i = e % half;
    const std::int64_t rh = e / half;  // row * heads + head
    const std::int64_t r = rh / heads;
    const double inv_freq =
        pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double a = static_cast<double>(r % seq_len) * inv_freq;
    const double c = cos(a);
    const double sn = sign * sin(a);
    float* xh = x + rh * head_dim;
    const double x1 = xh[i];
    const double x2 = xh[i + half];
    xh[i] = static_cast<float>(x1 * c - x2 * sn);
    xh[i + half] = static_cast<float>(x2 * c + x1 * sn);
  }
}

__device__ double dot_d(const float* a, const float* b, std::int64_t n) {
  double s = 0.0;
  for (std::int64_t c = 0; c < n; ++c) s += static_cast<double>(a[c]) * b[c];
  return s;
}

// The attention tensors' layout (backends/model/kernels.h): token row r = b * seq + i; query
// head h of row r at (r * heads + h) * d, kv head g at (r * kv_heads + g) * d.
struct AttnShape {
  std::int64_t seq;
  std::int64_t heads;
  std::int64_t kv_heads;
  std::int64_t d;
  double scale;  // 1 / sqrt(d)
};

// One block per (query row, head): the scores are recomputed in each pass (max, sum, output)
// rather than kept, so no pass depends on the sequence length fitting in shared memory; the
// output pass handles kThreads keys at a time: their probabilities in shared memory, then each
// thread sums one output column over them, in key order.
__global__ void attention_forward_kernel(AttnShape sh, const float* q, const float* k,
                                         const float* v, float* out, float* lse) {
  __shared__ double p[kThreads];
  const std::int64_t rh = blockIdx.x;  // row * heads + h
  const std::int64_t row = rh / sh.heads;
  const std::int64_t h = rh % sh.heads;
  const std::int64_t g = h / (sh.heads / sh.kv_heads);
  const std::int64_t i = row % sh.seq;
  const std::int64_t first = row - i;  // row of key 0 of this sample
  const float* qi = q + rh * sh.d;
  auto score = [&](std::int64_t j) {
    return dot_d(qi, k + ((first + j) * sh.kv_heads + g) * sh.d, sh.d) * sh.scale;
  };
  double m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j <= i; j += blockDim.x) m = fmax(m, score(j));
  m = block_reduce<true>(m);
  double sum = 0.0;
  for (std::int64_t j = threadIdx.x; j <= i; j += blockDim.x) sum += exp(score(j) - m);
  sum = block_reduce<false>(sum);
  const double log_sum = m + log(sum);
  if (threadIdx.x == 0) lse[rh] = static_cast<float>(log_sum);
  for (std::int64_t c0 = 0; c0 < sh.d; c0 += blockDim.x) {
    const std::int64_t c = c0 + threadIdx.x;
    double acc = 0.0;
    for (std::int64_t j0 = 0; j0 <= i; j0 += blockDim.x) {
      const std::int64_t j = j0 + threadIdx.x;
      p[threadIdx.x] = j <= i ? exp(score(j) - log_sum) : 0.0;
      __syncthreads();
      const std::int64_t n = min(static_cast<std::int64_t>(blockDim.x), i + 1 - j0);
      if (c < sh.d) {
        for (std::int64_t t = 0; t < n; ++t) {
          acc += p[t] * v[((first + j0 + t) * sh.kv_heads + g) * sh.d + c];
        }
      }
      __syncthreads();
    }
    if (c < sh.d) out[rh * sh.d + c] = static_cast<float>(acc);
  }
}

// dq: one block per (query row, head); dS of kThreads keys at a time in shared memory.
__global__ void attention_backward_dq_kernel(AttnShape sh, const float* q, const float* k,
                                             const float* v, const float* out, const float* lse,
                                             const float* dout, float* dq) {
  __shared__ double ds[kThreads];
  const std::int64_t rh = blockIdx.x;
  const std::int64_t row = rh / sh.heads;
  const std::int64_t h = rh % sh.heads;
  const std::int64_t g = h / (sh.heads / sh.kv_heads);
  const std::int64_t i = row % sh.seq;
  const std::int64_t first = row - i;
  const float* qi = q + rh * sh.d;
  const float* gi = dout + rh * sh.d;
  const double l = lse[rh];
  const double di = dot_d(gi, out + rh * sh.d, sh.d);
  for (std::int64_t c0 = 0; c0 < sh.d; c0 += blockDim.x) {
    const std::int64_t c = c0 + threadIdx.x;
    double acc = 0.0;
    for (std::int64_t j0 = 0; j0 <= i; j0 += blockDim.x) {
      const std::int64_t j = j0 + threadIdx.x;
      double dsj = 0.0;
      if (j <= i) {
        const std::int64_t kv = ((first + j) * sh.kv_heads + g) * sh.d;
        const double pij = exp(dot_d(qi, k + kv, sh.d) * sh.scale - l);
        dsj = pij * (dot_d(gi, v + kv, sh.d) - di);
      }
      ds[threadIdx.x] = dsj;
      __syncthreads();
      const std::int64_t n = min(static_cast<std::int64_t>(blockDim.x), i + 1 - j0);
      if (c < sh.d) {
        for (std::int64_t t = 0; t < n; ++t) {
          acc += ds[t] * k[((first + j0 + t) * sh.kv_heads + g) * sh.d + c];
        }
      }
      __syncthreads();
    }
    if (c < sh.d) dq[rh * sh.d + c] = static_cast<float>(acc * sh.scale);
  }
}

// dk, dv: one block per (key row, kv head): over the group's query heads in order, then over the
// sample's queries i >= j in order (the host's order), kThreads queries at a time in shared
// memory. No atomics: each block owns its outputs.
__global__ void attention_backward_dkv_kernel(AttnShape sh, const float* q, const float* k,
                                              const float* v, const float* out, const float* lse,
                                              const float* dout, float* dk, float* dv) {
  __shared__ double p[kThreads];
  __shared__ double ds[kThreads];
  const std::int64_t rg = blockIdx.x;  // row * kv_heads + g
  const std::int64_t row = rg / sh.kv_heads;
  const std::int64_t g = rg % sh.kv_heads;
  const std::int64_t j = row % sh.seq;
  const std::int64_t first = row - j;
  const std::int64_t group = sh.heads / sh.kv_heads;
  const float* kj = k + rg * sh.d;
  const float* vj = v + rg * sh.d;
  for (std::int64_t c0 = 0; c0 < sh.d; c0 += blockDim.x) {
    const std::int64_t c = c0 + threadIdx.x;
    double dk_acc = 0.0;
    double dv_acc = 0.0;
    for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
      for (std::int64_t i0 = j; i0 < sh.seq; i0 += blockDim.x) {
        const std::int64_t i = i0 + threadIdx.x;
        double pij = 0.0;
        double dsij = 0.0;
        if (i < sh.seq) {
          const std::int64_t qh = ((first + i) * sh.heads + h);
          const float* gi = dout + qh * sh.d;
          pij = exp(dot_d(q + qh * sh.d, kj, sh.d) * sh.scale - static_cast<double>(lse[qh]));
          dsij = pij * (dot_d(gi, vj, sh.d) - dot_d(gi, out + qh * sh.d, sh.d));
        }
        p[threadIdx.x] = pij;
        ds[threadIdx.x] = dsij;
        __syncthreads();
        const std::int64_t n = min(static_cast<std::int64_t>(blockDim.x), sh.seq - i0);
        if (c < sh.d) {
          for (std::int64_t t = 0; t < n; ++t) {
            const std::int64_t qh = ((first + i0 + t) * sh.heads + h) * sh.d + c;
            dk_acc += ds[t] * q[qh];
            dv_acc += p[t] * dout[qh];
          }
        }
        __syncthreads();
      }
    }
    if (c < sh.d) {
      dk[rg * sh.d + c] = static_cast<float>(dk_acc * sh.scale);
      dv[rg * sh.d + c] = static_cast<float>(dv_acc);
    }
  }
}

__global__ void swiglu_forward_kernel(std::int64_t n, const float* gate, const float* up,
                                      float* out) {
  FSDP_GRID_LOOP(i, n) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + exp(-g)) * up[i]);
  }
}
__global__ void swiglu_backward_kernel(std::int64_t n, const float* gate, const float* up,
                                       const float* dout, float* dgate, float* dup) {
  FSDP_GRID_LOOP(i, n) {
    const double g = gate[i];
    const double sig = 1.0 / (1.0 + exp(-g));
    dup[i] = static_cast<float>(dout[i] * (g * sig));
    dgate[i] =
        static_cast<float>(static_cast<double>(dout[i]) * up[i] * sig * (1.0 + g * (1.0 - sig)));
  }
}

__global__ void softmax_xent_kernel(std::int64_t vocab, const std::int32_t* targets,
                                    const float* logits, float* probs, double* row_loss) {
  const std::int64_t t = blockIdx.x;
  const float* z = logits + t * vocab;
  double m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) m = fmax(m, static_cast<double>(z[j]));
  m = block_reduce<true>(m);
  double sum = 0.0;
  for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) sum += exp(z[j] - m);
  sum = block_reduce<false>(sum);
  for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    probs[t * vocab + j] = static_cast<float>(exp(z[j] - m) / sum);
  }
  if (threadIdx.x == 0) row_loss[t] = log(sum) - (z[targets[t]] - m);
}
__global__ void softmax_xent_backward_kernel(std::int64_t rows, std::int64_t vocab,
                                             const std::int32_t* targets, const float* probs,
                                             float* dlogits) {
  const double scale = 1.0 / static_cast<double>(rows);
  FSDP_GRID_LOOP(i, rows * vocab) {
    const std::int64_t t = i / vocab;
    const double onehot = (i % vocab) == targets[t] ? 1.0 : 0.0;
    dlogits[i] = static_cast<float>((probs[i] - onehot) * scale);
  }
}

__global__ void embedding_slice_forward_kernel(const std::int32_t* tokens, std::int64_t rows,
                                               std::int64_t hidden, std::int64_t first,
                                               std::int64_t table_rows, const float* table,
                                               float* out) {
  FSDP_GRID_LOOP(i, rows * hidden) {
    const std::int64_t row = static_cast<std::int64_t>(tokens[i / hidden]) - first;
    out[i] = row >= 0 && row < table_rows ? table[row * hidden + i % hidden] : 0.0F;
  }
}
__global__ void embedding_slice_backward_kernel(const std::int32_t* tokens, std::int64_t rows,
                                                std::int64_t hidden, std::int64_t first,
                                                std::int64_t table_rows, const float* dout,
                                                float* dtable) {
  FSDP_GRID_LOOP(j, hidden) {
    for (std::int64_t t = 0; t < rows; ++t) {
      const std::int64_t row = static_cast<std::int64_t>(tokens[t]) - first;
      if (row >= 0 && row < table_rows)
        dtable[row * hidden + j] += dout[t * hidden + j];
    }
  }
}
// One block per row: the slice's maximum and sum of exponentials over the valid columns, and
// the target's logit when the slice holds it.
__global__ void vocab_parallel_stats_kernel(std::int64_t cols, std::int64_t valid,
                                            std::int64_t first, const std::int32_t* targets,
                                            const float* logits, float* stats) {
  const std::int64_t t = blockIdx.x;
  const float* z = logits + t * cols;
  double m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < valid; j += blockDim.x)
    m = fmax(m, static_cast<double>(z[j]));
  m = block_reduce<true>(m);
  double sum = 0.0;
  for (std::int64_t j = threadIdx.x; j < valid; j += blockDim.x) sum += exp(z[j] - m);
  sum = block_reduce<false>(sum);
  if (threadIdx.x == 0) {
    const std::int64_t target = static_cast<std::int64_t>(targets[t]) - first;
    stats[3 * t] = static_cast<float>(m);
    stats[3 * t + 1] = static_cast<float>(sum);
    stats[3 * t + 2] = target >= 0 && target < valid ? z[target] : 0.0F;
  }
}
// One block per row: the whole softmax's normaliser from every member's stats (member order),
// then this slice's probabilities.
__global__ void vocab_parallel_softmax_kernel(std::int64_t rows, std::int64_t cols,
                                              std::int64_t valid, std::int64_t members,
                                              const float* all_stats, const float* logits,
                                              float* probs, double* row_loss) {
  const std::int64_t t = blockIdx.x;
  double m = all_stats[3 * t];
  for (std::int64_t r = 1; r < members; ++r)
    m = fmax(m, static_cast<double>(all_stats[(r * rows + t) * 3]));
  double sum = 0.0;
  double target = 0.0;
  for (std::int64_t r = 0; r < members; ++r) {
    const float* s = all_stats + (r * rows + t) * 3;
    sum += static_cast<double>(s[1]) * exp(static_cast<double>(s[0]) - m);
    target += s[2];
  }
  const float* z = logits + t * cols;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    probs[t * cols + j] = j < valid ? static_cast<float>(exp(z[j] - m) / sum) : 0.0F;
  }
  if (threadIdx.x == 0)
    row_loss[t] = log(sum) - (target - m);
}
__global__ void vocab_parallel_backward_kernel(std::int64_t rows, std::int64_t cols,
                                               std::int64_t valid, std::int64_t first,
                                               const std::int32_t* targets, const float* probs,
                                               float* dlogits) {
  const double scale = 1.0 / static_cast<double>(rows);
  FSDP_GRID_LOOP(i, rows * cols) {
    const std::int64_t t = i / cols;
    const std::int64_t j = i % cols;
    const double onehot = j == static_cast<std::int64_t>(targets[t]) - first ? 1.0 : 0.0;
    dlogits[i] = j < valid ? static_cast<float>((probs[i] - onehot) * scale) : 0.0F;
  }
}

// --- mixture of experts (as backend::moe_kernels.h; the same orders of summation) ---------------
// One thread per row: max, then the sum of exponentials in double, in column order.
__global__ void softmax_rows_kernel(std::int64_t rows, std::int64_t cols, const float* x,
                                    float* probs) {
  FSDP_GRID_LOOP(t, rows) {
    const float* row = x + t * cols;
    float m = row[0];
    for (std::int64_t e = 1; e < cols; ++e) m = fmaxf(m, row[e]);
    double sum = 0.0;
    for (std::int64_t e = 0; e < cols; ++e) sum += exp(static_cast<double>(row[e]) - m);
    for (std::int64_t e = 0; e < cols; ++e)
      probs[t * cols + e] = static_cast<float>(exp(static_cast<double>(row[e]) - m) / sum);
  }
}
// One thread per row: its top_k experts (ties: the lower) and their renormalised weights.
__global__ void moe_choose_kernel(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                                  const float* probs, std::int32_t* choice_expert,
                                  float* choice_weight) {
  FSDP_GRID_LOOP(t, rows) {
    const float* p = probs + t * experts;
    double z = 0.0;
    for (std::int64_t j = 0; j < top_k; ++j) {
      std::int64_t best = -1;
      for (std::int64_t e = 0; e < experts; ++e) {
        bool taken = false;
        for (std::int64_t i = 0; i < j; ++i) taken = taken || choice_expert[t * top_k + i] == e;
        if (!taken && (best < 0 || p[e] > p[best]))
          best = e;
      }
      choice_expert[t * top_k + j] = static_cast<std::int32_t>(best);
      z += p[best];
    }
    for (std::int64_t j = 0; j < top_k; ++j)
      choice_weight[t * top_k + j] = static_cast<float>(p[choice_expert[t * top_k + j]] / z);
  }
}
// One thread per expert: its copies take its slots in (token, choice) order.
__global__ void moe_slots_kernel(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                                 std::int64_t capacity, const std::int32_t* choice_expert,
                                 std::int32_t* choice_slot, std::int32_t* slot_token) {
  FSDP_GRID_LOOP(e, experts) {
    std::int64_t taken = 0;
    for (std::int64_t c = 0; c < capacity; ++c) slot_token[e * capacity + c] = -1;
    for (std::int64_t i = 0; i < rows * top_k; ++i) {
      if (choice_expert[i] != e)
        continue;
      if (taken < capacity) {
        const std::int64_t s = e * capacity + taken++;
        choice_slot[i] = static_cast<std::int32_t>(s);
        slot_token[s] = static_cast<std::int32_t>(i / top_k);
      } else {
        choice_slot[i] = -1;
      }
    }
  }
}
__global__ void moe_dispatch_kernel(std::int64_t slots, std::int64_t hidden,
                                    const std::int32_t* slot_token, const float* x, float* out) {
  FSDP_GRID_LOOP(i, slots * hidden) {
    const std::int32_t t = slot_token[i / hidden];
    out[i] = t < 0 ? 0.0F : x[static_cast<std::int64_t>(t) * hidden + i % hidden];
  }
}
// Per token, the sum over its kept copies of (weight x) the slot's row: the combine (weights,
// added to out) and the dispatch's backward (no weights, out overwritten).
__global__ void moe_gather_kernel(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                                  const std::int32_t* choice_slot, const float* choice_weight,
                                  const float* slots, bool add, float* out) {
  FSDP_GRID_LOOP(i, rows * hidden) {
    const std::int64_t t = i / hidden;
    float sum = 0.0F;
    for (std::int64_t j = 0; j < top_k; ++j) {
      const std::int32_t s = choice_slot[t * top_k + j];
      if (s < 0)
        continue;
      const float v = slots[static_cast<std::int64_t>(s) * hidden + i % hidden];
      sum += choice_weight == nullptr ? v : choice_weight[t * top_k + j] * v;
    }
    out[i] = add ? out[i] + sum : sum;
  }
}
// One thread per copy (t, j): its slot's gradient and its weight's.
__global__ void moe_combine_backward_kernel(std::int64_t rows, std::int64_t top_k,
                                            std::int64_t hidden, const std::int32_t* choice_slot,
                                            const float* choice_weight, const float* y,
                                            const float* dout, float* dweight, float* dy) {
  FSDP_GRID_LOOP(c, rows * top_k) {
    const std::int32_t s = choice_slot[c];
    if (s < 0) {
      dweight[c] = 0.0F;
      continue;
    }
    const float* g = dout + (c / top_k) * hidden;
    const float* ys = y + static_cast<std::int64_t>(s) * hidden;
    float* d = dy + static_cast<std::int64_t>(s) * hidden;
    const float w = choice_weight[c];
    double dot = 0.0;
    for (std::int64_t i = 0; i < hidden; ++i) {
      d[i] = w * g[i];
      dot += static_cast<double>(g[i]) * ys[i];
    }
    dweight[c] = static_cast<float>(dot);
  }
}
__global__ void moe_router_backward_kernel(std::int64_t rows, std::int64_t experts,
                                           std::int64_t top_k, const float* probs,
                                           const std::int32_t* choice_expert,
                                           const float* choice_weight, const float* dweight,
                                           float* dlogits) {
  FSDP_GRID_LOOP(t, rows) {
    const float* p = probs + t * experts;
    double z = 0.0;
    double wdw = 0.0;
    for (std::int64_t j = 0; j < top_k; ++j) {
      z += p[choice_expert[t * top_k + j]];
      wdw += static_cast<double>(choice_weight[t * top_k + j]) * dweight[t * top_k + j];
    }
    // dp is nonzero on the chosen experts only: sum_e p_e dp_e over them.
    double pdp = 0.0;
    for (std::int64_t j = 0; j < top_k; ++j) {
      const std::int32_t e = choice_expert[t * top_k + j];
      pdp += p[e] * ((dweight[t * top_k + j] - wdw) / z);
    }
    for (std::int64_t e = 0; e < experts; ++e) {
      double dp = 0.0;
      for (std::int64_t j = 0; j < top_k; ++j)
        if (choice_expert[t * top_k + j] == e)
          dp = (dweight[t * top_k + j] - wdw) / z;
      dlogits[t * experts + e] = static_cast<float>(p[e] * (dp - pdp));
    }
  }
}

__global__ void optimizer_kernel(OptimizerArgs a, std::int64_t n, float* w, const float* g,
                                 float* state) {
  FSDP_GRID_LOOP(i, n) {
    if (a.kind == 0) {
      w[i] = static_cast<float>(w[i] - a.lr * g[i]);
    } else if (a.kind == 1) {
      state[i] = static_cast<float>(a.momentum * state[i] + g[i]);
      w[i] = static_cast<float>(w[i] - a.lr * state[i]);
    } else {
      const double gi = g[i];
      float* m = state;
      float* v = state + n;
      m[i] = static_cast<float>(a.beta1 * m[i] + (1.0 - a.beta1) * gi);
      v[i] = static_cast<float>(a.beta2 * v[i] + (1.0 - a.beta2) * gi * gi);
      const double m_hat = m[i] / a.bias1;
      const double v_hat = v[i] / a.bias2;
      w[i] = static_cast<float>(w[i] - a.lr * m_hat / (sqrt(v_hat) + a.eps));
    }
  }
}

}  // namespace

#define FSDP_LAUNCH(n, kernel, ...)                               \
  do {                                                            \
    if ((n) <= 0) return cudaSuccess;                             \
    (void)cudaGetLastError(); /* a stale error is not ours */    \
    kernel<<<blocks_for(n), kThreads, 0, stream>>>(__VA_ARGS__);  \
    return cudaGetLastError();                                    \
  } while (false)

#define FSDP_LAUNCH_ROWS(rows, kernel, ...)                                          \
  do {                                                                               \
    if ((rows) <= 0) return cudaSuccess;                                             \
    (void)cudaGetLastError(); /* a stale error is not ours */                        \
    kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(__VA_ARGS__);        \
    return cudaGetLastError();                                                       \
  } while (false)

cudaError_t launch_fill(float* x, std::int64_t n, float value, cudaStream_t stream) {
  FSDP_LAUNCH(n, fill_kernel, x, n, value);
}
cudaError_t launch_scale(float* x, std::int64_t n, double alpha, cudaStream_t stream) {
  FSDP_LAUNCH(n, scale_kernel, x, n, alpha);
}
cudaError_t launch_add(float* y, const float* x, std::int64_t n, cudaStream_t stream) {
  FSDP_LAUNCH(n, add_kernel, y, x, n);
}

cudaError_t launch_accumulate(float* dst, const float* src, std::int64_t n, float scale,
                              bool overwrite, cudaStream_t stream) {
  FSDP_LAUNCH(n, accumulate_kernel, dst, src, n, scale, overwrite);
}

cudaError_t launch_reduce_members(float* out, const float* const* ins, int num_members,
                                  std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (num_members == 0) return launch_fill(out, n, 0.0F, stream);
  for (int first = 0; first < num_members; first += kMaxMembers) {
    MemberPtrs p{};
    const int chunk = std::min(kMaxMembers, num_members - first);
    for (int c = 0; c < chunk; ++c) p.p[c] = ins[first + c];
    (void)cudaGetLastError();  // a stale error is not this launch's
    reduce_members_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, p, chunk, first > 0, n);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t launch_pack_padded(void* padded, const void* packed, const std::int64_t* counts_bytes,
                               int num_members, std::int64_t slot_bytes, cudaStream_t stream) {
  return copy_members(/*pack=*/true, padded, const_cast<void*>(packed), counts_bytes, num_members,
                      slot_bytes, stream);
}
cudaError_t launch_unpack_padded(void* packed, const void* padded,
                                 const std::int64_t* counts_bytes, int num_members,
                                 std::int64_t slot_bytes, cudaStream_t stream) {
  return copy_members(/*pack=*/false, const_cast<void*>(padded), packed, counts_bytes,
                      num_members, slot_bytes, stream);
}

cudaError_t launch_embedding_forward(const std::int32_t* tokens, std::int64_t rows,
                                     std::int64_t hidden, const float* table, float* out,
                                     cudaStream_t stream) {
  FSDP_LAUNCH(rows * hidden, embedding_forward_kernel, tokens, rows, hidden, table, out);
}
cudaError_t launch_embedding_backward(const std::int32_t* tokens, std::int64_t rows,
                                      std::int64_t vocab, std::int64_t hidden, const float* dout,
                                      float* dtable, cudaStream_t stream) {
  if (const cudaError_t e = launch_fill(dtable, vocab * hidden, 0.0F, stream); e != cudaSuccess) {
    return e;
  }
  FSDP_LAUNCH(hidden, embedding_backward_kernel, tokens, rows, hidden, dout, dtable);
}
cudaError_t launch_rmsnorm_forward(std::int64_t rows, std::int64_t dim, const float* x,
                                   const float* weight, float eps, float* inv_rms, float* out,
                                   cudaStream_t stream) {
  FSDP_LAUNCH_ROWS(rows, rmsnorm_forward_kernel, dim, x, weight, eps, inv_rms, out);
}
cudaError_t launch_rmsnorm_backward(std::int64_t rows, std::int64_t dim, const float* x,
                                    const float* weight, const float* inv_rms, const float* dout,
                                    float* dx, float* dweight, cudaStream_t stream) {
  if (rows > 0) {
    (void)cudaGetLastError();  // a stale error is not this launch's
    rmsnorm_backward_dx_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        dim, x, weight, inv_rms, dout, dx);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  FSDP_LAUNCH(dim, rmsnorm_backward_dw_kernel, rows, dim, x, inv_rms, dout, dweight);
}
cudaError_t launch_gelu_forward(std::int64_t n, const float* u, float* a, cudaStream_t stream) {
  FSDP_LAUNCH(n, gelu_forward_kernel, n, u, a);
}
cudaError_t launch_gelu_backward(std::int64_t n, const float* u, const float* da, float* du,
                                 cudaStream_t stream) {
  FSDP_LAUNCH(n, gelu_backward_kernel, n, u, da, du);
}
cudaError_t launch_add_bias(std::int64_t rows, std::int64_t cols, const float* bias, float* y,
                            cudaStream_t stream) {
  FSDP_LAUNCH(rows * cols, add_bias_kernel, rows, cols, bias, y);
}
cudaError_t launch_bias_backward(std::int64_t rows, std::int64_t cols, const float* dy,
                                 float* dbias, cudaStream_t stream) {
  FSDP_LAUNCH(cols, bias_backward_kernel, rows, cols, dy, dbias);
}
cudaError_t launch_rope(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                        std::int64_t head_dim, double theta, bool backward, float* x,
                        cudaStream_t stream) {
  FSDP_LAUNCH(rows * heads * (head_dim / 2), rope_kernel, rows, seq_len, heads, head_dim, theta,
              backward ? -1.0 : 1.0, x);
}

namespace {

// Grid of one block per (row, head): bounded by the x dimension's 2^31 - 1.
cudaError_t attention_grid(std::int64_t blocks, unsigned* grid) {
  if (blocks > 2147483647) return cudaErrorInvalidConfiguration;
  *grid = static_cast<unsigned>(blocks);
  return cudaSuccess;
}

AttnShape attn_shape(std::int64_t seq_len, std::int64_t heads, std::int64_t kv_heads,
                     std::int64_t head_dim) {
  return AttnShape{seq_len, heads, kv_heads, head_dim,
                   1.0 / sqrt(static_cast<double>(head_dim))};
}

}  // namespace

cudaError_t launch_attention_forward(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                                     std::int64_t kv_heads, std::int64_t head_dim, const float* q,
                                     const float* k, const float* v, float* out, float* lse,
                                     cudaStream_t stream) {
  if (kv_heads <= 0 || heads % kv_heads != 0) return cudaErrorInvalidValue;
  if (batch * seq_len * heads <= 0 || head_dim <= 0) return cudaSuccess;
  unsigned grid = 0;
  if (const cudaError_t e = attention_grid(batch * seq_len * heads, &grid); e != cudaSuccess) {
    return e;
  }
  (void)cudaGetLastError();  // a stale error is not this launch's
  attention_forward_kernel<<<grid, kThreads, 0, stream>>>(
      attn_shape(seq_len, heads, kv_heads, head_dim), q, k, v, out, lse);
  return cudaGetLastError();
}
cudaError_t launch_attention_backward(std::int64_t batch, std::int64_t seq_len,
                                      std::int64_t heads, std::int64_t kv_heads,
                                      std::int64_t head_dim, const float* q, const float* k,
                                      const float* v, const float* out, const float* lse,
                                      const float* dout, float* dq, float* dk, float* dv,
                                      cudaStream_t stream) {
  if (kv_heads <= 0 || heads % kv_heads != 0) return cudaErrorInvalidValue;
  if (batch * seq_len * heads <= 0 || head_dim <= 0) return cudaSuccess;
  const AttnShape sh = attn_shape(seq_len, heads, kv_heads, head_dim);
  unsigned grid = 0;
  if (const cudaError_t e = attention_grid(batch * seq_len * heads, &grid); e != cudaSuccess) {
    return e;
  }
  (void)cudaGetLastError();  // a stale error is not this launch's
  attention_backward_dq_kernel<<<grid, kThreads, 0, stream>>>(sh, q, k, v, out, lse, dout, dq);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (const cudaError_t e = attention_grid(batch * seq_len * kv_heads, &grid); e != cudaSuccess) {
    return e;
  }
  attention_backward_dkv_kernel<<<grid, kThreads, 0, stream>>>(sh, q, k, v, out, lse, dout, dk,
                                                                dv);
  return cudaGetLastError();
}
cudaError_t launch_swiglu_forward(std::int64_t n, const float* gate, const float* up, float* out,
                                  cudaStream_t stream) {
  FSDP_LAUNCH(n, swiglu_forward_kernel, n, gate, up, out);
}
cudaError_t launch_swiglu_backward(std::int64_t n, const float* gate, const float* up,
                                   const float* dout, float* dgate, float* dup,
                                   cudaStream_t stream) {
  FSDP_LAUNCH(n, swiglu_backward_kernel, n, gate, up, dout, dgate, dup);
}
cudaError_t launch_softmax_cross_entropy(std::int64_t rows, std::int64_t vocab,
                                         const std::int32_t* targets, const float* logits,
                                         float* probs, double* row_loss, cudaStream_t stream) {
  FSDP_LAUNCH_ROWS(rows, softmax_xent_kernel, vocab, targets, logits, probs, row_loss);
}
cudaError_t launch_softmax_cross_entropy_backward(std::int64_t rows, std::int64_t vocab,
                                                  const std::int32_t* targets, const float* probs,
                                                  float* dlogits, cudaStream_t stream) {
  FSDP_LAUNCH(rows * vocab, softmax_xent_backward_kernel, rows, vocab, targets, probs, dlogits);
}
cudaError_t launch_embedding_slice_forward(const std::int32_t* tokens, std::int64_t rows,
                                           std::int64_t hidden, std::int64_t first,
                                           std::int64_t table_rows, const float* table, float* out,
                                           cudaStream_t stream) {
  FSDP_LAUNCH(rows * hidden, embedding_slice_forward_kernel, tokens, rows, hidden, first,
              table_rows, table, out);
}
cudaError_t launch_embedding_slice_backward(const std::int32_t* tokens, std::int64_t rows,
                                            std::int64_t hidden, std::int64_t first,
                                            std::int64_t table_rows, const float* dout,
                                            float* dtable, cudaStream_t stream) {
  if (const cudaError_t e = launch_fill(dtable, table_rows * hidden, 0.0F, stream);
      e != cudaSuccess) {
    return e;
  }
  FSDP_LAUNCH(hidden, embedding_slice_backward_kernel, tokens, rows, hidden, first, table_rows,
              dout, dtable);
}
cudaError_t launch_vocab_parallel_stats(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                                        std::int64_t first, const std::int32_t* targets,
                                        const float* logits, float* stats, cudaStream_t stream) {
  FSDP_LAUNCH_ROWS(rows, vocab_parallel_stats_kernel, cols, valid, first, targets, logits, stats);
}
cudaError_t launch_vocab_parallel_softmax(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                                          std::int64_t members, const float* all_stats,
                                          const float* logits, float* probs, double* row_loss,
                                          cudaStream_t stream) {
  FSDP_LAUNCH_ROWS(rows, vocab_parallel_softmax_kernel, rows, cols, valid, members, all_stats,
                   logits, probs, row_loss);
}
cudaError_t launch_vocab_parallel_backward(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                                           std::int64_t first, const std::int32_t* targets,
                                           const float* probs, float* dlogits,
                                           cudaStream_t stream) {
  FSDP_LAUNCH(rows * cols, vocab_parallel_backward_kernel, rows, cols, valid, first, targets, probs,
              dlogits);
}
cudaError_t launch_softmax_rows(std::int64_t rows, std::int64_t cols, const float* x, float* probs,
                                cudaStream_t stream) {
  FSDP_LAUNCH(rows, softmax_rows_kernel, rows, cols, x, probs);
}
cudaError_t launch_moe_route(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                             std::int64_t capacity, const float* probs, std::int32_t* choice_expert,
                             float* choice_weight, std::int32_t* choice_slot,
                             std::int32_t* slot_token, cudaStream_t stream) {
  if (rows <= 0 || experts <= 0)
    return cudaSuccess;
  (void)cudaGetLastError();
  moe_choose_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(rows, experts, top_k, probs,
                                                               choice_expert, choice_weight);
  moe_slots_kernel<<<blocks_for(experts), kThreads, 0, stream>>>(
      rows, experts, top_k, capacity, choice_expert, choice_slot, slot_token);
  return cudaGetLastError();
}
cudaError_t launch_moe_dispatch(std::int64_t slots, std::int64_t hidden,
                                const std::int32_t* slot_token, const float* x, float* out,
                                cudaStream_t stream) {
  FSDP_LAUNCH(slots * hidden, moe_dispatch_kernel, slots, hidden, slot_token, x, out);
}
cudaError_t launch_moe_dispatch_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                                         const std::int32_t* choice_slot, const float* dslots,
                                         float* dx, cudaStream_t stream) {
  FSDP_LAUNCH(rows * hidden, moe_gather_kernel, rows, top_k, hidden, choice_slot, nullptr, dslots,
              false, dx);
}
cudaError_t launch_moe_combine(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                               const std::int32_t* choice_slot, const float* choice_weight,
                               const float* y, float* out, cudaStream_t stream) {
  FSDP_LAUNCH(rows * hidden, moe_gather_kernel, rows, top_k, hidden, choice_slot, choice_weight, y,
              true, out);
}
cudaError_t launch_moe_combine_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                                        std::int64_t slots, const std::int32_t* choice_slot,
                                        const float* choice_weight, const float* y,
                                        const float* dout, float* dweight, float* dy,
                                        cudaStream_t stream) {
  if (rows <= 0)
    return cudaSuccess;
  (void)cudaGetLastError();
  // Empty slots keep the zeros.
  const cudaError_t fill = launch_fill(dy, slots * hidden, 0.0F, stream);
  if (fill != cudaSuccess)
    return fill;
  moe_combine_backward_kernel<<<blocks_for(rows * top_k), kThreads, 0, stream>>>(
      rows, top_k, hidden, choice_slot, choice_weight, y, dout, dweight, dy);
  return cudaGetLastError();
}
cudaError_t launch_moe_router_backward(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                                       const float* probs, const std::int32_t* choice_expert,
                                       const float* choice_weight, const float* dweight,
                                       float* dlogits, cudaStream_t stream) {
  FSDP_LAUNCH(rows, moe_router_backward_kernel, rows, experts, top_k, probs, choice_expert,
              choice_weight, dweight, dlogits);
}
cudaError_t launch_optimizer_update(const OptimizerArgs& args, std::int64_t n, float* weights,
                                    const float* grads, float* state, cudaStream_t stream) {
  FSDP_LAUNCH(n, optimizer_kernel, args, n, weights, grads, state);
}

}  // namespace fsdp::cuda

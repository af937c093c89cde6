// SPDX-License-Identifier: Apache-2.0
// Host math kernels of the decoder (docs/design/backends.md, "The training model"): row-major
// fp32 tensors, matmuls through CBLAS sgemm, elementwise and row reductions in double with the
// result rounded to fp32 once. Every kernel is deterministic: a fixed loop order, no threads of its
// own, and OpenBLAS pinned to one thread (see use_single_threaded_blas).
#pragma once

#include <cstdint>
#include <span>

namespace fsdp::backend {

inline constexpr double kRmsNormEps = 1e-5;

// Pins OpenBLAS to one thread for the whole process (idempotent, thread-safe). OpenBLAS may
// choose a different blocking, hence different rounding, for another thread count; one thread per
// rank also keeps MPI ranks and stream threads from oversubscribing the cores.
void use_single_threaded_blas();

// C (m x n) = op(A) (m x k) * op(B) (k x n) + beta * C, all row-major and densely packed: A is
// stored m x k (k x m when trans_a), B is stored k x n (n x k when trans_b). FSDP_CHECKs that
// every size fits the BLAS integer.
void matmul(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
            const float* a, const float* b, float beta, float* c);

// out[t] = table[tokens[t]] for each of the tokens.size() rows of `hidden` values.
void embedding_forward(std::span<const std::int32_t> tokens, std::int64_t hidden,
                       const float* table, float* out);
// dtable (vocab x hidden) = sum over t of dout[t] scattered to row tokens[t], in token order.
void embedding_backward(std::span<const std::int32_t> tokens, std::int64_t vocab,
                        std::int64_t hidden, const float* dout, float* dtable);

// out = x * inv_rms[t] * weight, inv_rms[t] = 1 / sqrt(mean_j x[t,j]^2 + kRmsNormEps).
void rmsnorm_forward(std::int64_t rows, std::int64_t dim, const float* x, const float* weight,
                     float* inv_rms, float* out);
// dx = inv_rms * (dxhat - xhat * mean_j(dxhat * xhat)) with xhat = x * inv_rms and
// dxhat = dout * weight; dweight (overwritten) = sum over rows of dout * xhat.
void rmsnorm_backward(std::int64_t rows, std::int64_t dim, const float* x, const float* weight,
                      const float* inv_rms, const float* dout, float* dx, float* dweight);

// gelu with the tanh approximation: a = u/2 * (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))).
void gelu_forward(std::int64_t n, const float* u, float* a);
// du = da * gelu'(u).
void gelu_backward(std::int64_t n, const float* u, const float* da, float* du);

// probs = softmax of each logits row; row_loss[t] = -log probs[t, targets[t]] in double
// (computed from the logits by log-sum-exp). The local loss is the mean of the rows, summed in
// row order (DecoderDriver::step_loss).
void softmax_cross_entropy(std::int64_t vocab, std::span<const std::int32_t> targets,
                           const float* logits, float* probs, double* row_loss);
// dlogits = (probs - onehot(targets)) / rows: the gradient of the mean loss.
void softmax_cross_entropy_backward(std::int64_t vocab, std::span<const std::int32_t> targets,
                                    const float* probs, float* dlogits);

}  // namespace fsdp::backend

// SPDX-License-Identifier: Apache-2.0
// Host math kernels of the decoder (docs/design/backends.md, "The training model"): row-major
// fp32 tensors, matmuls through CBLAS sgemm, elementwise and row reductions in double with the
// result rounded to fp32 once. Every kernel is deterministic: a fixed loop order, no threads of its
// own, and OpenBLAS pinned to one thread (see use_single_threaded_blas).
#pragma once

#include <cstdint>
#include <span>

namespace fsdp::backend {

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

// out = x * inv_rms[t] * weight, inv_rms[t] = 1 / sqrt(mean_j x[t,j]^2 + eps) (eps taken to
// double; the decoder passes kRmsNormEps, decoder_kernels.h).
void rmsnorm_forward(std::int64_t rows, std::int64_t dim, const float* x, const float* weight,
                     float eps, float* inv_rms, float* out);
// dx = inv_rms * (dxhat - xhat * mean_j(dxhat * xhat)) with xhat = x * inv_rms and
// dxhat = dout * weight; dweight (overwritten) = sum over rows of dout * xhat.
void rmsnorm_backward(std::int64_t rows, std::int64_t dim, const float* x, const float* weight,
                      const float* inv_rms, const float* dout, float* dx, float* dweight);

// gelu with the tanh approximation: a = u/2 * (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))).
void gelu_forward(std::int64_t n, const float* u, float* a);
// du = da * gelu'(u).
void gelu_backward(std::int64_t n, const float* u, const float* da, float* du);

// y[r,c] += bias[c] (fp32 add), r < rows, c < cols.
void add_bias(std::int64_t rows, std::int64_t cols, const float* bias, float* y);
// dbias[c] (overwritten) = sum_r dy[r,c], summed in row order in double and rounded once.
void bias_backward(std::int64_t rows, std::int64_t cols, const float* dy, float* dbias);

// Rotary position embedding in place on x (rows x heads*head_dim), HF Llama's rotate_half
// convention: row r is at position p = r % seq_len; for each head and i < head_dim/2, with
// inv_freq_i = theta^(-2i/head_dim) and a = p * inv_freq_i (all in double):
//   (x_i, x_{i+d/2}) <- (x_i cos a - x_{i+d/2} sin a, x_{i+d/2} cos a + x_i sin a).
// head_dim must be even (the driver checks; an odd last element is left as it is).
void rope_forward(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                  std::int64_t head_dim, double theta, float* x);
// In place: the transpose of rope_forward (the rotation by -a), i.e. the gradient at rope's
// input given dx, the gradient at its output.
void rope_backward(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                   std::int64_t head_dim, double theta, float* dx);

// Causal grouped-query self-attention. rows = batch * seq_len; q, out: rows x heads*head_dim;
// k, v: rows x kv_heads*head_dim; query head h reads kv head h / (heads / kv_heads) (heads is a
// multiple of kv_heads). Within each sample, query i sees keys j <= i:
//   s_ij = (q_i . k_j) / sqrt(head_dim),  lse[i,h] = log sum_{j<=i} exp(s_ij) (max-shifted),
//   out_i = sum_{j<=i} exp(s_ij - lse_i) v_j.
// lse is rows x heads. Dot products, the softmax and the weighted sums run in double, each result
// rounded to fp32 once.
void attention_forward(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                       std::int64_t kv_heads, std::int64_t head_dim, const float* q, const float* k,
                       const float* v, float* out, float* lse);
// The gradients of attention_forward (dq, dk, dv overwritten), with P_ij = exp(s_ij - lse_i)
// recomputed from q, k and lse:
//   D_i = dout_i . out_i,  dP_ij = dout_i . v_j,  dS_ij = P_ij (dP_ij - D_i),
//   dq_i = sum_j dS_ij k_j / sqrt(d),  dk_j = sum_i dS_ij q_i / sqrt(d),  dv_j = sum_i P_ij dout_i,
// dk and dv also summed over the query heads that share the kv head. Sums run in double in a
// fixed order: for dk/dv over the group's heads in order, then over queries i >= j in order.
void attention_backward(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                        std::int64_t kv_heads, std::int64_t head_dim, const float* q,
                        const float* k, const float* v, const float* out, const float* lse,
                        const float* dout, float* dq, float* dk, float* dv);

// SwiGLU's gating: out = silu(gate) * up, silu(x) = x * sig(x), sig(x) = 1 / (1 + exp(-x)).
void swiglu_forward(std::int64_t n, const float* gate, const float* up, float* out);
// dup = dout * silu(gate); dgate = dout * up * sig(gate) * (1 + gate * (1 - sig(gate))).
void swiglu_backward(std::int64_t n, const float* gate, const float* up, const float* dout,
                     float* dgate, float* dup);

// probs = softmax of each logits row; row_loss[t] = -log probs[t, targets[t]] in double
// (computed from the logits by log-sum-exp). The local loss is the mean of the rows, summed in
// row order (DecoderDriver::step_loss).
void softmax_cross_entropy(std::int64_t vocab, std::span<const std::int32_t> targets,
                           const float* logits, float* probs, double* row_loss);
// dlogits = (probs - onehot(targets)) / rows: the gradient of the mean loss.
void softmax_cross_entropy_backward(std::int64_t vocab, std::span<const std::int32_t> targets,
                                    const float* probs, float* dlogits);

// Tensor parallelism: the vocabulary-parallel embedding and cross entropy (the equations of
// DecoderKernels' methods of the same names, decoder_kernels.h).
void embedding_slice_forward(std::span<const std::int32_t> tokens, std::int64_t hidden,
                             std::int64_t first, std::int64_t table_rows, const float* table,
                             float* out);
void embedding_slice_backward(std::span<const std::int32_t> tokens, std::int64_t hidden,
                              std::int64_t first, std::int64_t table_rows, const float* dout,
                              float* dtable);
void vocab_parallel_stats(std::int64_t cols, std::int64_t valid, std::int64_t first,
                          std::span<const std::int32_t> targets, const float* logits, float* stats);
void vocab_parallel_softmax(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                            std::int64_t members, const float* all_stats, const float* logits,
                            float* probs, double* row_loss);
void vocab_parallel_backward(std::int64_t cols, std::int64_t valid, std::int64_t first,
                             std::span<const std::int32_t> targets, const float* probs,
                             float* dlogits);

}  // namespace fsdp::backend

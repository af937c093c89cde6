// SPDX-License-Identifier: Apache-2.0
// Device kernels of the CUDA backend behind host launchers: the decoder's math (the same
// equations as backends/model/kernels.h, reductions in double, results rounded to fp32 once),
// the optimizer update (as backend::optimizer_update), elementwise copy/scale/add helpers for the
// executor, the rank-ordered reduction of the in-process device communicator and the pack/unpack
// of padded collective transport. Every launcher only enqueues on `stream`, clears a stale error
// left by an earlier call (e.g. cudaErrorNotReady from a query) and returns the launch
// status (cudaGetLastError); n = 0 launches nothing. Header kept C++17 for nvcc.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace fsdp::cuda {

// --- elementwise ---------------------------------------------------------------------------------
// x[i] = value.
cudaError_t launch_fill(float* x, std::int64_t n, float value, cudaStream_t stream);
// x[i] = alpha * x[i] (alpha in double, result rounded once).
cudaError_t launch_scale(float* x, std::int64_t n, double alpha, cudaStream_t stream);
// y[i] = y[i] + x[i] (fp32 add, as the host loops do).
cudaError_t launch_add(float* y, const float* x, std::int64_t n, cudaStream_t stream);
// The executor's gradient accumulation, bit for bit (fp32, no fused multiply-add):
// dst[i] = scale * src[i] when overwrite, else dst[i] += scale * src[i].
cudaError_t launch_accumulate(float* dst, const float* src, std::int64_t n, float scale,
                              bool overwrite, cudaStream_t stream);

// --- collectives support -------------------------------------------------------------------------
// out[j] = ((ins[0][j] + ins[1][j]) + ...) in fp32, members in order (the host in-process
// reduction's order, so results match it bit for bit); `ins` is a host array of device pointers.
cudaError_t launch_reduce_members(float* out, const float* const* ins, int num_members,
                                  std::int64_t n, cudaStream_t stream);
// Padded transport: slot k of `padded` starts at k * slot_bytes; member k's bytes sit in `packed`
// at sum_{i<k} counts_bytes[i]. pack copies packed -> padded, unpack padded -> packed. The
// counts are a host array (passed to the kernel by value, 64 members per launch).
cudaError_t launch_pack_padded(void* padded, const void* packed, const std::int64_t* counts_bytes,
                               int num_members, std::int64_t slot_bytes, cudaStream_t stream);
cudaError_t launch_unpack_padded(void* packed, const void* padded,
                                 const std::int64_t* counts_bytes, int num_members,
                                 std::int64_t slot_bytes, cudaStream_t stream);

// --- decoder (see backends/model/kernels.h for each equation) -----------------------------------
cudaError_t launch_embedding_forward(const std::int32_t* tokens, std::int64_t rows,
                                     std::int64_t hidden, const float* table, float* out,
                                     cudaStream_t stream);
// dtable (vocab x hidden) is overwritten; each column sums its tokens in token order.
cudaError_t launch_embedding_backward(const std::int32_t* tokens, std::int64_t rows,
                                      std::int64_t vocab, std::int64_t hidden, const float* dout,
                                      float* dtable, cudaStream_t stream);
cudaError_t launch_rmsnorm_forward(std::int64_t rows, std::int64_t dim, const float* x,
                                   const float* weight, float eps, float* inv_rms, float* out,
                                   cudaStream_t stream);
cudaError_t launch_rmsnorm_backward(std::int64_t rows, std::int64_t dim, const float* x,
                                    const float* weight, const float* inv_rms, const float* dout,
                                    float* dx, float* dweight, cudaStream_t stream);
cudaError_t launch_gelu_forward(std::int64_t n, const float* u, float* a, cudaStream_t stream);
cudaError_t launch_gelu_backward(std::int64_t n, const float* u, const float* da, float* du,
                                 cudaStream_t stream);
// y[r,c] += bias[c]; dbias[c] = sum_r dy[r,c] (overwritten; one thread per column walks the
// rows in order in double, as the host does).
cudaError_t launch_add_bias(std::int64_t rows, std::int64_t cols, const float* bias, float* y,
                            cudaStream_t stream);
cudaError_t launch_bias_backward(std::int64_t rows, std::int64_t cols, const float* dy,
                                 float* dbias, cudaStream_t stream);
// RoPE in place (rotate_half convention); backward rotates by the negative angle.
cudaError_t launch_rope(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                        std::int64_t head_dim, double theta, bool backward, float* x,
                        cudaStream_t stream);
// Causal grouped-query attention and its gradients (dq, dk, dv overwritten). Deterministic: one
// block per (query row, head) for out, lse and dq, one per (key row, kv head) for dk and dv, no
// atomics. cudaErrorInvalidValue when kv_heads does not divide heads.
cudaError_t launch_attention_forward(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                                     std::int64_t kv_heads, std::int64_t head_dim, const float* q,
                                     const float* k, const float* v, float* out, float* lse,
                                     cudaStream_t stream);
cudaError_t launch_attention_backward(std::int64_t batch, std::int64_t seq_len,
                                      std::int64_t heads, std::int64_t kv_heads,
                                      std::int64_t head_dim, const float* q, const float* k,
                                      const float* v, const float* out, const float* lse,
                                      const float* dout, float* dq, float* dk, float* dv,
                                      cudaStream_t stream);
cudaError_t launch_swiglu_forward(std::int64_t n, const float* gate, const float* up, float* out,
                                  cudaStream_t stream);
cudaError_t launch_swiglu_backward(std::int64_t n, const float* gate, const float* up,
                                   const float* dout, float* dgate, float* dup,
                                   cudaStream_t stream);
// probs = softmax(logits) per row; row_loss[t] = log-sum-exp - (z[target] - max), in double (the
// decoder driver averages the rows in order, for the host kernel set as for this one).
cudaError_t launch_softmax_cross_entropy(std::int64_t rows, std::int64_t vocab,
                                         const std::int32_t* targets, const float* logits,
                                         float* probs, double* row_loss, cudaStream_t stream);
cudaError_t launch_softmax_cross_entropy_backward(std::int64_t rows, std::int64_t vocab,
                                                  const std::int32_t* targets, const float* probs,
                                                  float* dlogits, cudaStream_t stream);
// Tensor parallelism: the vocabulary-parallel embedding and cross entropy (the equations of
// DecoderKernels' methods of the same names, backends/model/decoder_kernels.h).
cudaError_t launch_embedding_slice_forward(const std::int32_t* tokens, std::int64_t rows,
                                           std::int64_t hidden, std::int64_t first,
                                           std::int64_t table_rows, const float* table, float* out,
                                           cudaStream_t stream);
cudaError_t launch_embedding_slice_backward(const std::int32_t* tokens, std::int64_t rows,
                                            std::int64_t hidden, std::int64_t first,
                                            std::int64_t table_rows, const float* dout,
                                            float* dtable, cudaStream_t stream);
cudaError_t launch_vocab_parallel_stats(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                                        std::int64_t first, const std::int32_t* targets,
                                        const float* logits, float* stats, cudaStream_t stream);
cudaError_t launch_vocab_parallel_softmax(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                                          std::int64_t members, const float* all_stats,
                                          const float* logits, float* probs, double* row_loss,
                                          cudaStream_t stream);
cudaError_t launch_vocab_parallel_backward(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                                           std::int64_t first, const std::int32_t* targets,
                                           const float* probs, float* dlogits, cudaStream_t stream);

// --- mixture of experts (as backend::moe_kernels.h) -------------------------------------------
cudaError_t launch_softmax_rows(std::int64_t rows, std::int64_t cols, const float* x, float* probs,
                                cudaStream_t stream);
cudaError_t launch_moe_route(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                             std::int64_t capacity, const float* probs, std::int32_t* choice_expert,
                             float* choice_weight, std::int32_t* choice_slot,
                             std::int32_t* slot_token, cudaStream_t stream);
cudaError_t launch_moe_dispatch(std::int64_t slots, std::int64_t hidden,
                                const std::int32_t* slot_token, const float* x, float* out,
                                cudaStream_t stream);
cudaError_t launch_moe_dispatch_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                                         const std::int32_t* choice_slot, const float* dslots,
                                         float* dx, cudaStream_t stream);
cudaError_t launch_moe_combine(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                               const std::int32_t* choice_slot, const float* choice_weight,
                               const float* y, float* out, cudaStream_t stream);
cudaError_t launch_moe_combine_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                                        std::int64_t slots, const std::int32_t* choice_slot,
                                        const float* choice_weight, const float* y,
                                        const float* dout, float* dweight, float* dy,
                                        cudaStream_t stream);
cudaError_t launch_moe_router_backward(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                                       const float* probs, const std::int32_t* choice_expert,
                                       const float* choice_weight, const float* dweight,
                                       float* dlogits, cudaStream_t stream);

// --- optimizer (as backend::optimizer_update; 0 = SGD, 1 = SGD momentum, 2 = Adam) -------------
struct OptimizerArgs {
  int kind = 0;
  double lr = 0.0;
  double momentum = 0.0;
  double beta1 = 0.0;
  double beta2 = 0.0;
  double eps = 0.0;
  double bias1 = 1.0;  // 1 - beta1^step, computed on the host in double
  double bias2 = 1.0;
};
// state: nothing (SGD), the momentum buffer (n), or exp_avg then exp_avg_sq (2n).
cudaError_t launch_optimizer_update(const OptimizerArgs& args, std::int64_t n, float* weights,
                                    const float* grads, float* state, cudaStream_t stream);

}  // namespace fsdp::cuda

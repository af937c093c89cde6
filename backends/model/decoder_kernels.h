// SPDX-License-Identifier: Apache-2.0
// The kernel seam of the decoder (docs/design/backends.md, "The driver and its kernel seam"): the
// operations the one decoder driver (decoder_driver.h) runs, on the memory of one device. Two
// kernel sets implement it: the host set (make_host_kernels(): kernels.h, CBLAS sgemm) and the
// CUDA set (backends/cuda/cuda_decoder.cc: cuBLAS and cuda_kernels.cu), which follow the same
// equations. Adding an operation to the model means adding a method here and to both sets.
//
// Contract of every kernel set:
// * Pointers are memory of the set's device: the driver's own arrays (array()) and the
//   parameter and gradient buffers the executor passes. All tensors are row-major, densely
//   packed fp32 (token ids int32, row losses double).
// * Calls may be asynchronous (enqueued in order on one stream); only download() waits. A call
//   sees the effects of every earlier call.
// * Methods return nothing: the first failure (a vendor error, an allocation) is kept as
//   status(), and every later call of the set is a no-op (allocate() returns null). The driver
//   checks status() before each of its own calls.
// * Not thread-safe: one compute stream's issuer calls it.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "core/base/expected.h"

namespace fsdp::backend {

// The epsilon of the decoder's rmsnorms (HF Llama's default rms_norm_eps is 1e-5 too).
inline constexpr float kRmsNormEps = 1e-5F;

class DecoderKernels;

// Owning handle of `bytes` of device memory from a kernel set (move-only). The kernel set must
// outlive it. Contents are unspecified when allocated (the host set zeroes them).
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() { reset(); }
  DeviceArray(DeviceArray&& other) noexcept { *this = std::move(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::int64_t bytes() const { return bytes_; }
  bool empty() const { return ptr_ == nullptr; }
  // Releases the memory (after every earlier call of the set that uses it) and becomes empty.
  void reset() noexcept;

 private:
  friend class DecoderKernels;
  DeviceArray(DecoderKernels* owner, void* ptr, std::int64_t bytes)
      : owner_(owner), ptr_(ptr), bytes_(bytes) {}

  DecoderKernels* owner_ = nullptr;
  void* ptr_ = nullptr;
  std::int64_t bytes_ = 0;
};

class DecoderKernels {
 public:
  virtual ~DecoderKernels() = default;

  // The first failure of any call so far.
  Status status() const { return status_; }
  bool ok() const { return status_.ok(); }

  // `n` elements of T (n >= 0) of device memory; empty when n is 0 or the set has failed.
  template <class T>
  DeviceArray array(std::int64_t n) {
    const std::int64_t bytes = n * static_cast<std::int64_t>(sizeof(T));
    void* ptr = bytes > 0 ? allocate(bytes) : nullptr;
    return ptr == nullptr ? DeviceArray() : DeviceArray(this, ptr, bytes);
  }

  // --- memory -------------------------------------------------------------------------------
  // `bytes` (> 0) of device memory, or null after a failure. Freed by release() (DeviceArray).
  virtual void* allocate(std::int64_t bytes) = 0;
  virtual void release(void* ptr, std::int64_t bytes) noexcept = 0;
  // Host -> device; the host source may change once the call returns.
  virtual void upload(void* dst, const void* host_src, std::int64_t bytes) = 0;
  // Device -> host, waiting for every earlier call (the only blocking method).
  virtual void download(void* host_dst, const void* src, std::int64_t bytes) = 0;
  // dst[i] = src[i], i < n (device to device).
  virtual void copy(float* dst, const float* src, std::int64_t n) = 0;

  // --- linear algebra and elementwise -------------------------------------------------------
  // C (m x n) = op(A) (m x k) * op(B) (k x n) + beta * C: A is stored m x k (k x m when
  // trans_a), B is stored k x n (n x k when trans_b); fp32 with fp32 accumulation (no TF32).
  virtual void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    const float* a, const float* b, float beta, float* c) = 0;
  // y[i] = y[i] + x[i] in fp32.
  virtual void add(float* y, const float* x, std::int64_t n) = 0;

  // --- the model's operations (equations: backends/model/kernels.h) -------------------------
  // out[t] = table[tokens[t]], t < rows (rows of `hidden` values).
  virtual void embedding_forward(const std::int32_t* tokens, std::int64_t rows, std::int64_t hidden,
                                 const float* table, float* out) = 0;
  // dtable (vocab x hidden) = scatter-add of dout's rows to rows tokens[t], in token order
  // (overwrites dtable).
  virtual void embedding_backward(const std::int32_t* tokens, std::int64_t rows, std::int64_t vocab,
                                  std::int64_t hidden, const float* dout, float* dtable) = 0;
  // out = x * inv_rms[t] * weight; inv_rms[t] = 1 / sqrt(mean_j x[t,j]^2 + eps) (the decoder
  // passes kRmsNormEps).
  virtual void rmsnorm_forward(std::int64_t rows, std::int64_t dim, const float* x,
                               const float* weight, float eps, float* inv_rms, float* out) = 0;
  // dx and dweight (both overwritten) from dout at the norm's output.
  virtual void rmsnorm_backward(std::int64_t rows, std::int64_t dim, const float* x,
                                const float* weight, const float* inv_rms, const float* dout,
                                float* dx, float* dweight) = 0;
  // a = gelu(u) (tanh approximation); du = da * gelu'(u).
  virtual void gelu_forward(std::int64_t n, const float* u, float* a) = 0;
  virtual void gelu_backward(std::int64_t n, const float* u, const float* da, float* du) = 0;
  // y[r,c] += bias[c], r < rows, c < cols (fp32 add).
  virtual void add_bias(std::int64_t rows, std::int64_t cols, const float* bias, float* y) = 0;
  // dbias[c] = sum_r dy[r,c] (overwrites; summed in row order in double, rounded once).
  virtual void bias_backward(std::int64_t rows, std::int64_t cols, const float* dy,
                             float* dbias) = 0;
  // RoPE in place on x (rows x heads*head_dim), HF Llama's rotate_half convention: row r is at
  // position p = r % seq_len; for each head and i < head_dim/2, a = p * theta^(-2i/head_dim) in
  // double: (x_i, x_{i+d/2}) <- (x_i cos a - x_{i+d/2} sin a, x_{i+d/2} cos a + x_i sin a).
  // head_dim is even (the driver checks).
  virtual void rope_forward(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                            std::int64_t head_dim, double theta, float* x) = 0;
  // In place: the transpose of rope_forward (rotation by -a), the gradient at its input.
  virtual void rope_backward(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                             std::int64_t head_dim, double theta, float* dx) = 0;
  // Causal grouped-query attention over rows = batch * seq_len tokens (sample b's token i is row
  // b*seq_len + i). q, out: rows x heads*head_dim; k, v: rows x kv_heads*head_dim; query head h
  // reads kv head h / (heads / kv_heads). s_ij = (q_i . k_j) / sqrt(head_dim) for keys j <= i of
  // the same sample; out_i = sum_j softmax_j(s_i) v_j; lse (rows x heads) = log sum_{j<=i}
  // exp(s_ij), computed stably.
  virtual void attention_forward(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                                 std::int64_t kv_heads, std::int64_t head_dim, const float* q,
                                 const float* k, const float* v, float* out, float* lse) = 0;
  // dq, dk, dv (overwritten; dk and dv summed over the query heads that share a kv head) from
  // dout: P = exp(s - lse) recomputed, D_i = dout_i . out_i, dP = dout v^T,
  // dS = P * (dP - D), dq = dS k / sqrt(d), dk = dS^T q / sqrt(d), dv = P^T dout. Deterministic.
  virtual void attention_backward(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                                  std::int64_t kv_heads, std::int64_t head_dim, const float* q,
                                  const float* k, const float* v, const float* out,
                                  const float* lse, const float* dout, float* dq, float* dk,
                                  float* dv) = 0;
  // out = silu(gate) * up, silu(x) = x / (1 + exp(-x)).
  virtual void swiglu_forward(std::int64_t n, const float* gate, const float* up, float* out) = 0;
  // dup = dout * silu(gate); dgate = dout * up * sig(gate) * (1 + gate * (1 - sig(gate))).
  virtual void swiglu_backward(std::int64_t n, const float* gate, const float* up,
                               const float* dout, float* dgate, float* dup) = 0;
  // probs = softmax of each logits row; row_loss[t] = -log probs[t, targets[t]] in double (by
  // log-sum-exp). The driver averages the rows in order.
  virtual void softmax_cross_entropy(std::int64_t rows, std::int64_t vocab,
                                     const std::int32_t* targets, const float* logits, float* probs,
                                     double* row_loss) = 0;
  // dlogits = (probs - onehot(targets)) / rows: the gradient of the mean loss.
  virtual void softmax_cross_entropy_backward(std::int64_t rows, std::int64_t vocab,
                                              const std::int32_t* targets, const float* probs,
                                              float* dlogits) = 0;

  // --- tensor parallelism (docs/design/parallelism.md, "Training it for real") ----------------
  // A vocabulary-parallel embedding: `table` holds rows [first, first + table_rows) of the whole
  // table. out[t] = table[tokens[t] - first] for a token in that range, else 0 (the group's
  // all-reduce then sums the one rank's row).
  virtual void embedding_slice_forward(const std::int32_t* tokens, std::int64_t rows,
                                       std::int64_t hidden, std::int64_t first,
                                       std::int64_t table_rows, const float* table, float* out) = 0;
  // dtable (table_rows x hidden, overwritten) = scatter-add of dout's rows whose token is in the
  // slice, in token order.
  virtual void embedding_slice_backward(const std::int32_t* tokens, std::int64_t rows,
                                        std::int64_t hidden, std::int64_t first,
                                        std::int64_t table_rows, const float* dout,
                                        float* dtable) = 0;
  // Vocabulary-parallel cross entropy over logits (rows x cols) of vocabulary [first, first +
  // cols), of which the first `valid` columns are real (the rest padding, ignored). stats (rows x
  // 3): m = the row's maximum over valid columns, s = sum_j exp(z_j - m) (in double, rounded
  // once), and z[target - first] when the target is in the slice, else 0.
  virtual void vocab_parallel_stats(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                                    std::int64_t first, const std::int32_t* targets,
                                    const float* logits, float* stats) = 0;
  // From every member's stats (members x rows x 3, member-major): M = max_r m_r,
  // S = sum_r s_r exp(m_r - M) and T = sum_r target_r (in double); row_loss[t] = log S - (T - M);
  // probs = exp(z - M) / S over the valid columns, 0 over the padding.
  virtual void vocab_parallel_softmax(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                                      std::int64_t members, const float* all_stats,
                                      const float* logits, float* probs, double* row_loss) = 0;
  // dlogits = (probs - onehot(targets - first)) / rows over the valid columns, 0 over padding.
  virtual void vocab_parallel_backward(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                                       std::int64_t first, const std::int32_t* targets,
                                       const float* probs, float* dlogits) = 0;

  // --- mixture of experts (docs/design/parallelism.md, "Experts for real") -------------------
  // Routed copies are indexed (t, j): token t's j-th choice, j < top_k. Slots are indexed
  // s = e x capacity + c: expert e's c-th slot.
  // probs = the softmax of each row of x (rows x cols), computed stably (max subtracted).
  virtual void softmax_rows(std::int64_t rows, std::int64_t cols, const float* x, float* probs) = 0;
  // Mixtral's top-k routing with capacity slots, from the router probabilities (rows x experts).
  // choice_expert[t, j]: the j-th largest probability of row t (ties: the lower expert);
  // choice_weight[t, j] = p[t, e] / sum of the row's chosen p. The copies take their expert's
  // slots in order of (t, j); once an expert's `capacity` slots are taken the later copies are
  // dropped: choice_slot[t, j] = the slot, or -1 when dropped; slot_token[s] = the token of slot
  // s, or -1 when no copy took it. All four outputs are overwritten.
  virtual void moe_route(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                         std::int64_t capacity, const float* probs, std::int32_t* choice_expert,
                         float* choice_weight, std::int32_t* choice_slot,
                         std::int32_t* slot_token) = 0;
  // out[s] (slots x hidden) = x[slot_token[s]], or 0 for an empty slot.
  virtual void moe_dispatch(std::int64_t slots, std::int64_t hidden, const std::int32_t* slot_token,
                            const float* x, float* out) = 0;
  // dx[t] (rows x hidden, overwritten) = sum over j of dslots[choice_slot[t, j]] (kept copies, in
  // order of j).
  virtual void moe_dispatch_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                                     const std::int32_t* choice_slot, const float* dslots,
                                     float* dx) = 0;
  // out[t] += sum over j of choice_weight[t, j] x y[choice_slot[t, j]] (kept copies, in order
  // of j; the sum formed first, then added).
  virtual void moe_combine(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                           const std::int32_t* choice_slot, const float* choice_weight,
                           const float* y, float* out) = 0;
  // The combine's gradients from dout (rows x hidden): dy[s] (slots x hidden, overwritten) =
  // choice_weight[t, j] x dout[t] for the copy (t, j) in slot s, 0 for an empty slot;
  // dweight[t, j] = dout[t] . y[slot] (in double, rounded once), 0 for a dropped copy.
  virtual void moe_combine_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                                    std::int64_t slots, const std::int32_t* choice_slot,
                                    const float* choice_weight, const float* y, const float* dout,
                                    float* dweight, float* dy) = 0;
  // The router's gradient at its logits (rows x experts, overwritten) from dweight: with Z the
  // row's sum of chosen p and w = p / Z, dp[e] = (dweight[e] - sum_j w_j dweight_j) / Z for a
  // chosen e, else 0; dlogits = p * (dp - sum_e p_e dp_e) (the softmax's backward; in double).
  virtual void moe_router_backward(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                                   const float* probs, const std::int32_t* choice_expert,
                                   const float* choice_weight, const float* dweight,
                                   float* dlogits) = 0;

 protected:
  // Keeps the first failure; later ones are consequences of it.
  void fail(Error error) {
    if (status_.ok()) {
      status_ = std::move(error);
    }
  }

 private:
  Status status_;
};

// The host kernel set: host memory, backends/model/kernels.h (CBLAS sgemm, OpenBLAS pinned to
// one thread). It never fails.
std::unique_ptr<DecoderKernels> make_host_kernels();

}  // namespace fsdp::backend

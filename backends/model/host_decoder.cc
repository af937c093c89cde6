// SPDX-License-Identifier: Apache-2.0
// The host kernel set (decoder_kernels.h) over host memory and kernels.h, and HostDecoder::make:
// the decoder driver on it.
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <span>

#include "backends/model/decoder.h"
#include "backends/model/decoder_driver.h"
#include "backends/model/decoder_kernels.h"
#include "backends/model/kernels.h"
#include "backends/model/moe_kernels.h"

namespace fsdp::backend {
namespace {

std::size_t idx(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

constexpr std::align_val_t kAlignment{64};

std::span<const std::int32_t> ids(const std::int32_t* tokens, std::int64_t rows) {
  return {tokens, idx(rows)};
}

// Every call runs to completion before it returns, so download() needs no wait.
class HostKernels final : public DecoderKernels {
 public:
  void* allocate(std::int64_t bytes) override {
    void* ptr = ::operator new(idx(bytes), kAlignment);
    std::memset(ptr, 0, idx(bytes));  // what the vectors of the host decoder held
    return ptr;
  }
  void release(void* ptr, std::int64_t /*bytes*/) noexcept override {
    ::operator delete(ptr, kAlignment);
  }
  void upload(void* dst, const void* host_src, std::int64_t bytes) override {
    std::memcpy(dst, host_src, idx(bytes));
  }
  void download(void* host_dst, const void* src, std::int64_t bytes) override {
    std::memcpy(host_dst, src, idx(bytes));
  }
  void copy(float* dst, const float* src, std::int64_t n) override {
    std::memcpy(dst, src, idx(n) * sizeof(float));
  }

  void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
            const float* a, const float* b, float beta, float* c) override {
    matmul(trans_a, trans_b, m, n, k, a, b, beta, c);
  }
  void add(float* y, const float* x, std::int64_t n) override {
    for (std::size_t i = 0; i < idx(n); ++i) {
      y[i] += x[i];
    }
  }

  void embedding_forward(const std::int32_t* tokens, std::int64_t rows, std::int64_t hidden,
                         const float* table, float* out) override {
    backend::embedding_forward(ids(tokens, rows), hidden, table, out);
  }
  void embedding_backward(const std::int32_t* tokens, std::int64_t rows, std::int64_t vocab,
                          std::int64_t hidden, const float* dout, float* dtable) override {
    backend::embedding_backward(ids(tokens, rows), vocab, hidden, dout, dtable);
  }
  void rmsnorm_forward(std::int64_t rows, std::int64_t dim, const float* x, const float* weight,
                       float eps, float* inv_rms, float* out) override {
    backend::rmsnorm_forward(rows, dim, x, weight, eps, inv_rms, out);
  }
  void rmsnorm_backward(std::int64_t rows, std::int64_t dim, const float* x, const float* weight,
                        const float* inv_rms, const float* dout, float* dx,
                        float* dweight) override {
    backend::rmsnorm_backward(rows, dim, x, weight, inv_rms, dout, dx, dweight);
  }
  void gelu_forward(std::int64_t n, const float* u, float* a) override {
    backend::gelu_forward(n, u, a);
  }
  void gelu_backward(std::int64_t n, const float* u, const float* da, float* du) override {
    backend::gelu_backward(n, u, da, du);
  }
  void add_bias(std::int64_t rows, std::int64_t cols, const float* bias, float* y) override {
    backend::add_bias(rows, cols, bias, y);
  }
  void bias_backward(std::int64_t rows, std::int64_t cols, const float* dy, float* dbias) override {
    backend::bias_backward(rows, cols, dy, dbias);
  }
  void rope_forward(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                    std::int64_t head_dim, double theta, float* x) override {
    backend::rope_forward(rows, seq_len, heads, head_dim, theta, x);
  }
  void rope_backward(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                     std::int64_t head_dim, double theta, float* dx) override {
    backend::rope_backward(rows, seq_len, heads, head_dim, theta, dx);
  }
  void attention_forward(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                         std::int64_t kv_heads, std::int64_t head_dim, const float* q,
                         const float* k, const float* v, float* out, float* lse) override {
    backend::attention_forward(batch, seq_len, heads, kv_heads, head_dim, q, k, v, out, lse);
  }
  void attention_backward(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                          std::int64_t kv_heads, std::int64_t head_dim, const float* q,
                          const float* k, const float* v, const float* out, const float* lse,
                          const float* dout, float* dq, float* dk, float* dv) override {
    backend::attention_backward(batch, seq_len, heads, kv_heads, head_dim, q, k, v, out, lse, dout,
                                dq, dk, dv);
  }
  void swiglu_forward(std::int64_t n, const float* gate, const float* up, float* out) override {
    backend::swiglu_forward(n, gate, up, out);
  }
  void swiglu_backward(std::int64_t n, const float* gate, const float* up, const float* dout,
                       float* dgate, float* dup) override {
    backend::swiglu_backward(n, gate, up, dout, dgate, dup);
  }
  void softmax_cross_entropy(std::int64_t rows, std::int64_t vocab, const std::int32_t* targets,
                             const float* logits, float* probs, double* row_loss) override {
    backend::softmax_cross_entropy(vocab, ids(targets, rows), logits, probs, row_loss);
  }
  void softmax_cross_entropy_backward(std::int64_t rows, std::int64_t vocab,
                                      const std::int32_t* targets, const float* probs,
                                      float* dlogits) override {
    backend::softmax_cross_entropy_backward(vocab, ids(targets, rows), probs, dlogits);
  }
  void embedding_slice_forward(const std::int32_t* tokens, std::int64_t rows, std::int64_t hidden,
                               std::int64_t first, std::int64_t table_rows, const float* table,
                               float* out) override {
    backend::embedding_slice_forward(ids(tokens, rows), hidden, first, table_rows, table, out);
  }
  void embedding_slice_backward(const std::int32_t* tokens, std::int64_t rows, std::int64_t hidden,
                                std::int64_t first, std::int64_t table_rows, const float* dout,
                                float* dtable) override {
    backend::embedding_slice_backward(ids(tokens, rows), hidden, first, table_rows, dout, dtable);
  }
  void vocab_parallel_stats(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                            std::int64_t first, const std::int32_t* targets, const float* logits,
                            float* stats) override {
    backend::vocab_parallel_stats(cols, valid, first, ids(targets, rows), logits, stats);
  }
  void vocab_parallel_softmax(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                              std::int64_t members, const float* all_stats, const float* logits,
                              float* probs, double* row_loss) override {
    backend::vocab_parallel_softmax(rows, cols, valid, members, all_stats, logits, probs, row_loss);
  }
  void vocab_parallel_backward(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                               std::int64_t first, const std::int32_t* targets, const float* probs,
                               float* dlogits) override {
    backend::vocab_parallel_backward(cols, valid, first, ids(targets, rows), probs, dlogits);
  }
  void softmax_rows(std::int64_t rows, std::int64_t cols, const float* x, float* probs) override {
    backend::softmax_rows(rows, cols, x, probs);
  }
  void moe_route(std::int64_t rows, std::int64_t experts, std::int64_t top_k, std::int64_t capacity,
                 const float* probs, std::int32_t* choice_expert, float* choice_weight,
                 std::int32_t* choice_slot, std::int32_t* slot_token) override {
    backend::moe_route(rows, experts, top_k, capacity, probs, choice_expert, choice_weight,
                       choice_slot, slot_token);
  }
  void moe_dispatch(std::int64_t slots, std::int64_t hidden, const std::int32_t* slot_token,
                    const float* x, float* out) override {
    backend::moe_dispatch(slots, hidden, slot_token, x, out);
  }
  void moe_dispatch_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                             const std::int32_t* choice_slot, const float* dslots,
                             float* dx) override {
    backend::moe_dispatch_backward(rows, top_k, hidden, choice_slot, dslots, dx);
  }
  void moe_combine(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                   const std::int32_t* choice_slot, const float* choice_weight, const float* y,
                   float* out) override {
    backend::moe_combine(rows, top_k, hidden, choice_slot, choice_weight, y, out);
  }
  void moe_combine_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                            std::int64_t slots, const std::int32_t* choice_slot,
                            const float* choice_weight, const float* y, const float* dout,
                            float* dweight, float* dy) override {
    backend::moe_combine_backward(rows, top_k, hidden, slots, choice_slot, choice_weight, y, dout,
                                  dweight, dy);
  }
  void moe_router_backward(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                           const float* probs, const std::int32_t* choice_expert,
                           const float* choice_weight, const float* dweight,
                           float* dlogits) override {
    backend::moe_router_backward(rows, experts, top_k, probs, choice_expert, choice_weight, dweight,
                                 dlogits);
  }
};

}  // namespace

std::unique_ptr<DecoderKernels> make_host_kernels() {
  use_single_threaded_blas();
  return std::make_unique<HostKernels>();
}

Expected<std::unique_ptr<HostDecoder>> HostDecoder::make(const DecoderConfig& config,
                                                         std::int64_t num_microbatches,
                                                         std::int64_t data_rank,
                                                         std::int64_t data_world) {
  FSDP_RETURN_IF_ERROR(
      validate_decoder_args("host decoder", config, num_microbatches, data_rank, data_world));
  return std::unique_ptr<HostDecoder>(std::make_unique<DecoderDriver>(
      config, num_microbatches, data_rank, data_world, make_host_kernels()));
}

}  // namespace fsdp::backend

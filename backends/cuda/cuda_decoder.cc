// SPDX-License-Identifier: Apache-2.0
// The CUDA kernel set (backends/model/decoder_kernels.h) on one device and stream: cuBLAS for the
// gemm, cuda_kernels.cu for the rest, stream-ordered allocations; and CudaDecoder::make, the
// decoder driver on it. Row-major products go to column-major cuBLAS as C^T = op(B)^T op(A)^T.
#include "backends/cuda/cuda_decoder.h"

#include <cublas_v2.h>

#include <cstddef>
#include <limits>
#include <utility>

#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/model/decoder_kernels.h"
#include "core/base/check.h"
#include "core/base/strings.h"

namespace fsdp::cuda {
namespace {

std::size_t idx(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

Error cublas_error(cublasStatus_t code, const char* call) {
  return Error(ErrorCode::kUnavailable, str_cat(call, " failed: ", cublasGetStatusName(code), ": ",
                                                cublasGetStatusString(code)));
}

#define FSDP_CUBLAS_TRY(call)                           \
  do {                                                  \
    if (const cublasStatus_t fsdp_cublas_err_ = (call); \
        fsdp_cublas_err_ != CUBLAS_STATUS_SUCCESS) {    \
      return cublas_error(fsdp_cublas_err_, #call);     \
    }                                                   \
  } while (false)

// Runs `call` (a cudaError_t) unless the set has failed or the device cannot be made current,
// and keeps its failure.
#define FSDP_CUDA_ENQUEUE(call)                  \
  do {                                           \
    if (ready()) {                               \
      record((call), #call, __FILE__, __LINE__); \
    }                                            \
  } while (false)

class CudaKernels final : public backend::DecoderKernels {
 public:
  CudaKernels(int ordinal, cudaStream_t stream) : ordinal_(ordinal), stream_(stream) {}

  // After the driver's arrays went back (cudaFreeAsync): wait for them, then drop the handle.
  ~CudaKernels() override {
    (void)cudaSetDevice(ordinal_);
    (void)cudaStreamSynchronize(stream_);
    if (handle_ != nullptr) {
      (void)cublasDestroy(handle_);
    }
  }

  Status init() {
    FSDP_CUDA_TRY(cudaSetDevice(ordinal_));
    FSDP_CUBLAS_TRY(cublasCreate(&handle_));
    FSDP_CUBLAS_TRY(cublasSetStream(handle_, stream_));
    FSDP_CUBLAS_TRY(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));
    return ok_status();
  }

  void* allocate(std::int64_t bytes) override {
    void* ptr = nullptr;
    FSDP_CUDA_ENQUEUE(cudaMallocAsync(&ptr, idx(bytes), stream_));
    return ok() ? ptr : nullptr;
  }
  void release(void* ptr, std::int64_t /*bytes*/) noexcept override {
    // Also after a failure: the memory is ours either way.
    (void)cudaSetDevice(ordinal_);
    (void)cudaFreeAsync(ptr, stream_);
  }
  void upload(void* dst, const void* host_src, std::int64_t bytes) override {
    // A pageable source: the copy returns once the data is staged; the wait makes it certain
    // that the caller may reuse the source.
    FSDP_CUDA_ENQUEUE(cudaMemcpyAsync(dst, host_src, idx(bytes), cudaMemcpyHostToDevice, stream_));
    FSDP_CUDA_ENQUEUE(cudaStreamSynchronize(stream_));
  }
  void download(void* host_dst, const void* src, std::int64_t bytes) override {
    FSDP_CUDA_ENQUEUE(cudaMemcpyAsync(host_dst, src, idx(bytes), cudaMemcpyDeviceToHost, stream_));
    FSDP_CUDA_ENQUEUE(cudaStreamSynchronize(stream_));
  }
  void copy(float* dst, const float* src, std::int64_t n) override {
    FSDP_CUDA_ENQUEUE(
        cudaMemcpyAsync(dst, src, idx(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  }

  void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
            const float* a, const float* b, float beta, float* c) override {
    for (std::int64_t v : {m, n, k}) {
      FSDP_CHECK(v >= 0 && v <= std::numeric_limits<int>::max())
          << "matrix size " << v << " does not fit cuBLAS's int";
    }
    if (!ready()) {
      return;
    }
    const float alpha = 1.0F;
    const int lda = static_cast<int>(trans_a ? m : k);
    const int ldb = static_cast<int>(trans_b ? k : n);
    const cublasStatus_t code =
        cublasSgemm(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                    trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                    static_cast<int>(k), &alpha, b, ldb, a, lda, &beta, c, static_cast<int>(n));
    if (code != CUBLAS_STATUS_SUCCESS) {
      fail(cublas_error(code, "cublasSgemm"));
    }
  }
  void add(float* y, const float* x, std::int64_t n) override {
    FSDP_CUDA_ENQUEUE(launch_add(y, x, n, stream_));
  }

  void embedding_forward(const std::int32_t* tokens, std::int64_t rows, std::int64_t hidden,
                         const float* table, float* out) override {
    FSDP_CUDA_ENQUEUE(launch_embedding_forward(tokens, rows, hidden, table, out, stream_));
  }
  void embedding_backward(const std::int32_t* tokens, std::int64_t rows, std::int64_t vocab,
                          std::int64_t hidden, const float* dout, float* dtable) override {
    FSDP_CUDA_ENQUEUE(
        launch_embedding_backward(tokens, rows, vocab, hidden, dout, dtable, stream_));
  }
  void rmsnorm_forward(std::int64_t rows, std::int64_t dim, const float* x, const float* weight,
                       float eps, float* inv_rms, float* out) override {
    FSDP_CUDA_ENQUEUE(launch_rmsnorm_forward(rows, dim, x, weight, eps, inv_rms, out, stream_));
  }
  void rmsnorm_backward(std::int64_t rows, std::int64_t dim, const float* x, const float* weight,
                        const float* inv_rms, const float* dout, float* dx,
                        float* dweight) override {
    FSDP_CUDA_ENQUEUE(
        launch_rmsnorm_backward(rows, dim, x, weight, inv_rms, dout, dx, dweight, stream_));
  }
  void gelu_forward(std::int64_t n, const float* u, float* a) override {
    FSDP_CUDA_ENQUEUE(launch_gelu_forward(n, u, a, stream_));
  }
  void gelu_backward(std::int64_t n, const float* u, const float* da, float* du) override {
    FSDP_CUDA_ENQUEUE(launch_gelu_backward(n, u, da, du, stream_));
  }
  void add_bias(std::int64_t rows, std::int64_t cols, const float* bias, float* y) override {
    FSDP_CUDA_ENQUEUE(launch_add_bias(rows, cols, bias, y, stream_));
  }
  void bias_backward(std::int64_t rows, std::int64_t cols, const float* dy, float* dbias) override {
    FSDP_CUDA_ENQUEUE(launch_bias_backward(rows, cols, dy, dbias, stream_));
  }
  void rope_forward(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                    std::int64_t head_dim, double theta, float* x) override {
    FSDP_CUDA_ENQUEUE(
        launch_rope(rows, seq_len, heads, head_dim, theta, /*backward=*/false, x, stream_));
  }
  void rope_backward(std::int64_t rows, std::int64_t seq_len, std::int64_t heads,
                     std::int64_t head_dim, double theta, float* dx) override {
    FSDP_CUDA_ENQUEUE(
        launch_rope(rows, seq_len, heads, head_dim, theta, /*backward=*/true, dx, stream_));
  }
  void attention_forward(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                         std::int64_t kv_heads, std::int64_t head_dim, const float* q,
                         const float* k, const float* v, float* out, float* lse) override {
    FSDP_CUDA_ENQUEUE(launch_attention_forward(batch, seq_len, heads, kv_heads, head_dim, q, k, v,
                                               out, lse, stream_));
  }
  void attention_backward(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                          std::int64_t kv_heads, std::int64_t head_dim, const float* q,
                          const float* k, const float* v, const float* out, const float* lse,
                          const float* dout, float* dq, float* dk, float* dv) override {
    FSDP_CUDA_ENQUEUE(launch_attention_backward(batch, seq_len, heads, kv_heads, head_dim, q, k, v,
                                                out, lse, dout, dq, dk, dv, stream_));
  }
  void swiglu_forward(std::int64_t n, const float* gate, const float* up, float* out) override {
    FSDP_CUDA_ENQUEUE(launch_swiglu_forward(n, gate, up, out, stream_));
  }
  void swiglu_backward(std::int64_t n, const float* gate, const float* up, const float* dout,
                       float* dgate, float* dup) override {
    FSDP_CUDA_ENQUEUE(launch_swiglu_backward(n, gate, up, dout, dgate, dup, stream_));
  }
  void softmax_cross_entropy(std::int64_t rows, std::int64_t vocab, const std::int32_t* targets,
                             const float* logits, float* probs, double* row_loss) override {
    FSDP_CUDA_ENQUEUE(
        launch_softmax_cross_entropy(rows, vocab, targets, logits, probs, row_loss, stream_));
  }
  void softmax_cross_entropy_backward(std::int64_t rows, std::int64_t vocab,
                                      const std::int32_t* targets, const float* probs,
                                      float* dlogits) override {
    FSDP_CUDA_ENQUEUE(
        launch_softmax_cross_entropy_backward(rows, vocab, targets, probs, dlogits, stream_));
  }
  void embedding_slice_forward(const std::int32_t* tokens, std::int64_t rows, std::int64_t hidden,
                               std::int64_t first, std::int64_t table_rows, const float* table,
                               float* out) override {
    FSDP_CUDA_ENQUEUE(launch_embedding_slice_forward(tokens, rows, hidden, first, table_rows, table,
                                                     out, stream_));
  }
  void embedding_slice_backward(const std::int32_t* tokens, std::int64_t rows, std::int64_t hidden,
                                std::int64_t first, std::int64_t table_rows, const float* dout,
                                float* dtable) override {
    FSDP_CUDA_ENQUEUE(launch_embedding_slice_backward(tokens, rows, hidden, first, table_rows, dout,
                                                      dtable, stream_));
  }
  void vocab_parallel_stats(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                            std::int64_t first, const std::int32_t* targets, const float* logits,
                            float* stats) override {
    FSDP_CUDA_ENQUEUE(
        launch_vocab_parallel_stats(rows, cols, valid, first, targets, logits, stats, stream_));
  }
  void vocab_parallel_softmax(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                              std::int64_t members, const float* all_stats, const float* logits,
                              float* probs, double* row_loss) override {
    FSDP_CUDA_ENQUEUE(launch_vocab_parallel_softmax(rows, cols, valid, members, all_stats, logits,
                                                    probs, row_loss, stream_));
  }
  void vocab_parallel_backward(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                               std::int64_t first, const std::int32_t* targets, const float* probs,
                               float* dlogits) override {
    FSDP_CUDA_ENQUEUE(
        launch_vocab_parallel_backward(rows, cols, valid, first, targets, probs, dlogits, stream_));
  }

  void softmax_rows(std::int64_t rows, std::int64_t cols, const float* x, float* probs) override {
    FSDP_CUDA_ENQUEUE(launch_softmax_rows(rows, cols, x, probs, stream_));
  }
  void moe_route(std::int64_t rows, std::int64_t experts, std::int64_t top_k, std::int64_t capacity,
                 const float* probs, std::int32_t* choice_expert, float* choice_weight,
                 std::int32_t* choice_slot, std::int32_t* slot_token) override {
    FSDP_CUDA_ENQUEUE(launch_moe_route(rows, experts, top_k, capacity, probs, choice_expert,
                                       choice_weight, choice_slot, slot_token, stream_));
  }
  void moe_dispatch(std::int64_t slots, std::int64_t hidden, const std::int32_t* slot_token,
                    const float* x, float* out) override {
    FSDP_CUDA_ENQUEUE(launch_moe_dispatch(slots, hidden, slot_token, x, out, stream_));
  }
  void moe_dispatch_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                             const std::int32_t* choice_slot, const float* dslots,
                             float* dx) override {
    FSDP_CUDA_ENQUEUE(
        launch_moe_dispatch_backward(rows, top_k, hidden, choice_slot, dslots, dx, stream_));
  }
  void moe_combine(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                   const std::int32_t* choice_slot, const float* choice_weight, const float* y,
                   float* out) override {
    FSDP_CUDA_ENQUEUE(
        launch_moe_combine(rows, top_k, hidden, choice_slot, choice_weight, y, out, stream_));
  }
  void moe_combine_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                            std::int64_t slots, const std::int32_t* choice_slot,
                            const float* choice_weight, const float* y, const float* dout,
                            float* dweight, float* dy) override {
    FSDP_CUDA_ENQUEUE(launch_moe_combine_backward(rows, top_k, hidden, slots, choice_slot,
                                                  choice_weight, y, dout, dweight, dy, stream_));
  }
  void moe_router_backward(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                           const float* probs, const std::int32_t* choice_expert,
                           const float* choice_weight, const float* dweight,
                           float* dlogits) override {
    FSDP_CUDA_ENQUEUE(launch_moe_router_backward(rows, experts, top_k, probs, choice_expert,
                                                 choice_weight, dweight, dlogits, stream_));
  }

 private:
  // False once the set has failed; otherwise makes the device current (the caller may be any
  // thread that issues on the compute stream).
  bool ready() {
    if (!ok()) {
      return false;
    }
    record(cudaSetDevice(ordinal_), "cudaSetDevice", __FILE__, __LINE__);
    return ok();
  }
  void record(cudaError_t code, const char* call, const char* file, int line) {
    if (code != cudaSuccess) {
      fail(cuda_error(code, call, file, line));
    }
  }

  int ordinal_;
  cudaStream_t stream_;
  cublasHandle_t handle_ = nullptr;
};

}  // namespace

Expected<std::unique_ptr<backend::DecoderKernels>> make_cuda_kernels(int ordinal,
                                                                     cudaStream_t stream) {
  auto kernels = std::make_unique<CudaKernels>(ordinal, stream);
  FSDP_RETURN_IF_ERROR(kernels->init());
  return std::unique_ptr<backend::DecoderKernels>(std::move(kernels));
}

Expected<std::unique_ptr<CudaDecoder>> CudaDecoder::make(const backend::DecoderConfig& config,
                                                         std::int64_t num_microbatches,
                                                         std::int64_t data_rank,
                                                         std::int64_t data_world, int ordinal,
                                                         cudaStream_t stream) {
  FSDP_RETURN_IF_ERROR(backend::validate_decoder_args("cuda decoder", config, num_microbatches,
                                                      data_rank, data_world));
  auto kernels = std::make_unique<CudaKernels>(ordinal, stream);
  FSDP_RETURN_IF_ERROR(kernels->init());
  return std::unique_ptr<CudaDecoder>(
      new CudaDecoder(config, num_microbatches, data_rank, data_world, std::move(kernels)));
}

}  // namespace fsdp::cuda

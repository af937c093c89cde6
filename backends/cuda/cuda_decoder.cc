// SPDX-License-Identifier: Apache-2.0
// CudaDecoder: the host decoder's control flow (backends/model/host_decoder.cc) over device
// buffers. Row-major products go to column-major cuBLAS as C^T = op(B)^T op(A)^T.
#include "backends/cuda/cuda_decoder.h"

#include <cublas_v2.h>

#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_error.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_buffer.h"
#include "core/base/check.h"
#include "core/base/strings.h"

namespace fsdp::cuda {
namespace {

std::size_t idx(std::int64_t v) { return static_cast<std::size_t>(v); }

Error cublas_error(cublasStatus_t code, const char* call) {
  return Error(ErrorCode::kUnavailable, str_cat(call, " failed: ", cublasGetStatusName(code), ": ",
                                                cublasGetStatusString(code)));
}

#define FSDP_CUBLAS_TRY(call)                                                          \
  do {                                                                                 \
    if (const cublasStatus_t fsdp_cublas_err_ = (call);                                \
        fsdp_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                                   \
      return cublas_error(fsdp_cublas_err_, #call);                                    \
    }                                                                                  \
  } while (false)

struct Saved {  // as the host decoder's Saved, on the device
  DeviceBuffer x, inv_rms, normed, u, a, probs;
  bool has_intermediates() const { return !inv_rms.empty(); }
  void drop_intermediates() {
    inv_rms.reset();
    normed.reset();
    u.reset();
    a.reset();
    probs.reset();
  }
  std::int64_t bytes() const {
    return x.bytes() + inv_rms.bytes() + normed.bytes() + u.bytes() + a.bytes() + probs.bytes();
  }
};

class CudaDecoderImpl final : public CudaDecoder {
 public:
  CudaDecoderImpl(const backend::DecoderConfig& config, std::int64_t num_mb, std::int64_t rank,
                  std::int64_t world, int ordinal, cudaStream_t stream)
      : config_(config),
        num_mb_(num_mb),
        rank_(rank),
        world_(world),
        ordinal_(ordinal),
        stream_(stream),
        tokens_(config.micro_batch_size * config.seq_len),
        num_units_(static_cast<std::int32_t>(config.layers + 2)),
        inputs_(idx(num_mb)),
        targets_(idx(num_mb)),
        hidden_(idx(num_mb)),
        grad_(idx(num_mb)),
        row_loss_(idx(num_mb)),
        has_loss_(idx(num_mb), false),
        saved_(idx(num_units_) * idx(num_mb)),
        recompute_(idx(num_units_), false) {}

  ~CudaDecoderImpl() override {
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

  Status status() const override { return status_; }

  void begin_step(std::int64_t step) override {
    FSDP_CHECK(step >= 0) << "begin_step(" << step << ")";
    guard([&]() -> Status {
      const auto seq = idx(config_.seq_len);
      std::vector<std::int32_t> in(idx(tokens_));
      std::vector<std::int32_t> tg(idx(tokens_));
      for (std::int64_t mb = 0; mb < num_mb_; ++mb) {
        for (std::int64_t i = 0; i < config_.micro_batch_size; ++i) {
          const std::vector<std::int32_t> sample = backend::sample_tokens(
              config_, backend::global_sample_index(config_, num_mb_, world_, step, mb, rank_, i));
          for (std::size_t j = 0; j < seq; ++j) {
            in[idx(i) * seq + j] = sample[j];
            tg[idx(i) * seq + j] = sample[j + 1];
          }
        }
        const auto bytes = static_cast<std::int64_t>(in.size() * sizeof(std::int32_t));
        FSDP_TRY(inputs_[idx(mb)], DeviceBuffer::make(bytes, stream_));
        FSDP_TRY(targets_[idx(mb)], DeviceBuffer::make(bytes, stream_));
        // Pageable sources: the copy returns once the data is staged, so the vectors may change.
        FSDP_CUDA_TRY(cudaMemcpyAsync(inputs_[idx(mb)].data(), in.data(), idx(bytes),
                                      cudaMemcpyHostToDevice, stream_));
        FSDP_CUDA_TRY(cudaMemcpyAsync(targets_[idx(mb)].data(), tg.data(), idx(bytes),
                                      cudaMemcpyHostToDevice, stream_));
        FSDP_CUDA_TRY(cudaStreamSynchronize(stream_));
        hidden_[idx(mb)].reset();
        grad_[idx(mb)].reset();
        row_loss_[idx(mb)].reset();
        has_loss_[idx(mb)] = false;
      }
      for (Saved& s : saved_) {
        s = Saved{};
      }
      return ok_status();
    });
  }

  void forward(std::int32_t unit, std::int32_t mb, std::span<const float* const> params) override {
    check_call("forward", unit, mb, params.size());
    guard([&]() -> Status {
      DeviceBuffer& h = hidden_[idx(mb)];
      const std::int64_t hid = config_.hidden;
      if (unit == 0) {
        FSDP_TRY(h, floats(tokens_ * hid));
        FSDP_CUDA_TRY(launch_embedding_forward(inputs_[idx(mb)].as<std::int32_t>(), tokens_, hid,
                                               params[0], h.as<float>(), stream_));
        return ok_status();
      }
      FSDP_CHECK(h.bytes() == tokens_ * hid * 4)
          << "forward of unit " << unit << " microbatch " << mb << " before its input";
      Saved& s = saved(unit, mb);
      s.x = std::move(h);
      FSDP_RETURN_IF_ERROR(compute_intermediates(unit, mb, params, s));
      if (unit == num_units_ - 1) {
        has_loss_[idx(mb)] = true;
      } else {
        FSDP_TRY(h, floats(tokens_ * hid));
        FSDP_CUDA_TRY(cudaMemcpyAsync(h.data(), s.x.data(), idx(s.x.bytes()),
                                      cudaMemcpyDeviceToDevice, stream_));
        FSDP_RETURN_IF_ERROR(matmul(false, true, tokens_, hid, config_.ffn, s.a.as<float>(),
                                    params[2], 1.0F, h.as<float>()));
      }
      if (recompute_[idx(unit)]) {
        s.drop_intermediates();
      }
      return ok_status();
    });
  }

  void recompute(std::int32_t unit, std::int32_t mb,
                 std::span<const float* const> params) override {
    check_call("recompute", unit, mb, params.size());
    if (unit == 0) {
      return;
    }
    Saved& s = saved(unit, mb);
    FSDP_CHECK(!s.x.empty()) << "recompute of unit " << unit << " microbatch " << mb
                             << " without its forward";
    guard([&] { return compute_intermediates(unit, mb, params, s); });
  }

  void backward(std::int32_t unit, std::int32_t mb, std::span<const float* const> params,
                std::span<float* const> grads) override {
    check_call("backward", unit, mb, params.size());
    FSDP_CHECK(grads.size() == params.size())
        << "backward of unit " << unit << ": " << grads.size() << " gradient buffers for "
        << params.size() << " parameters";
    guard([&]() -> Status { return backward_impl(unit, mb, params, grads); });
  }

  double step_loss() const override {
    std::vector<double> rows(idx(tokens_));
    double sum = 0.0;
    for (std::int64_t mb = 0; mb < num_mb_; ++mb) {
      FSDP_CHECK(has_loss_[idx(mb)]) << "step_loss before the head's forward of microbatch " << mb;
      if (!status_.ok()) {
        return std::numeric_limits<double>::quiet_NaN();
      }
      const cudaError_t e = cudaMemcpyAsync(rows.data(), row_loss_[idx(mb)].data(),
                                            rows.size() * sizeof(double), cudaMemcpyDeviceToHost,
                                            stream_);
      if (e != cudaSuccess || cudaStreamSynchronize(stream_) != cudaSuccess) {
        status_ = cuda_error(e != cudaSuccess ? e : cudaGetLastError(), "step_loss copy",
                             __FILE__, __LINE__);
        return std::numeric_limits<double>::quiet_NaN();
      }
      double total = 0.0;  // rows in order, as backend::softmax_cross_entropy sums them
      for (double r : rows) {
        total += r;
      }
      sum += total / static_cast<double>(rows.size());
    }
    return sum / static_cast<double>(num_mb_);
  }

  void set_recompute(std::int32_t unit, bool on) override {
    FSDP_CHECK(unit >= 0 && unit < num_units_) << "set_recompute of unit " << unit;
    recompute_[idx(unit)] = on;
  }

  std::int64_t activation_bytes() const override {
    std::int64_t bytes = 0;
    for (const Saved& s : saved_) {
      bytes += s.bytes();
    }
    return bytes;
  }

 private:
  template <class F>
  void guard(F&& f) {
    if (!status_.ok()) {
      return;
    }
    if (const cudaError_t e = cudaSetDevice(ordinal_); e != cudaSuccess) {
      status_ = cuda_error(e, "cudaSetDevice", __FILE__, __LINE__);
      return;
    }
    status_ = f();
  }

  Expected<DeviceBuffer> floats(std::int64_t n) const {
    return DeviceBuffer::make(n * static_cast<std::int64_t>(sizeof(float)), stream_);
  }

  Saved& saved(std::int32_t unit, std::int32_t mb) {
    return saved_[idx(unit) * idx(num_mb_) + idx(mb)];
  }

  void check_call(const char* what, std::int32_t unit, std::int32_t mb,
                  std::size_t num_params) const {
    FSDP_CHECK(unit >= 0 && unit < num_units_ && mb >= 0 && mb < num_mb_)
        << what << " of unit " << unit << " microbatch " << mb << " (units: " << num_units_
        << ", microbatches: " << num_mb_ << ")";
    const std::size_t expected = unit == 0 ? 1 : (unit == num_units_ - 1 ? 2 : 3);
    FSDP_CHECK(num_params == expected) << what << " of unit " << unit << ": " << num_params
                                       << " parameters, expected " << expected;
  }

  // Row-major C (m x n) = op(A) op(B) + beta C, as backend::matmul.
  Status matmul(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                const float* a, const float* b, float beta, float* c) {
    for (std::int64_t v : {m, n, k}) {
      FSDP_CHECK(v >= 0 && v <= std::numeric_limits<int>::max())
          << "matrix size " << v << " does not fit cuBLAS's int";
    }
    const float alpha = 1.0F;
    const int lda = static_cast<int>(trans_a ? m : k);
    const int ldb = static_cast<int>(trans_b ? k : n);
    FSDP_CUBLAS_TRY(cublasSgemm(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                static_cast<int>(m), static_cast<int>(k), &alpha, b, ldb, a, lda,
                                &beta, c, static_cast<int>(n)));
    return ok_status();
  }

  Status compute_intermediates(std::int32_t unit, std::int32_t mb,
                               std::span<const float* const> params, Saved& s) {
    const std::int64_t h = config_.hidden;
    FSDP_TRY(s.inv_rms, floats(tokens_));
    FSDP_TRY(s.normed, floats(tokens_ * h));
    FSDP_CUDA_TRY(launch_rmsnorm_forward(tokens_, h, s.x.as<float>(), params[0],
                                         s.inv_rms.as<float>(), s.normed.as<float>(), stream_));
    if (unit == num_units_ - 1) {
      const std::int64_t v = config_.vocab;
      FSDP_TRY(DeviceBuffer logits, floats(tokens_ * v));
      FSDP_RETURN_IF_ERROR(matmul(false, true, tokens_, v, h, s.normed.as<float>(), params[1],
                                  0.0F, logits.as<float>()));
      FSDP_TRY(s.probs, floats(tokens_ * v));
      FSDP_TRY(row_loss_[idx(mb)],
               DeviceBuffer::make(tokens_ * static_cast<std::int64_t>(sizeof(double)), stream_));
      FSDP_CUDA_TRY(launch_softmax_cross_entropy(tokens_, v, targets_[idx(mb)].as<std::int32_t>(),
                                                 logits.as<float>(), s.probs.as<float>(),
                                                 row_loss_[idx(mb)].as<double>(), stream_));
      return ok_status();
    }
    const std::int64_t f = config_.ffn;
    FSDP_TRY(s.u, floats(tokens_ * f));
    FSDP_TRY(s.a, floats(tokens_ * f));
    FSDP_RETURN_IF_ERROR(
        matmul(false, true, tokens_, f, h, s.normed.as<float>(), params[1], 0.0F, s.u.as<float>()));
    FSDP_CUDA_TRY(launch_gelu_forward(tokens_ * f, s.u.as<float>(), s.a.as<float>(), stream_));
    return ok_status();
  }

  Status backward_impl(std::int32_t unit, std::int32_t mb, std::span<const float* const> params,
                       std::span<float* const> grads) {
    const std::int64_t h = config_.hidden;
    DeviceBuffer& dh = grad_[idx(mb)];
    if (unit == 0) {
      FSDP_CHECK(dh.bytes() == tokens_ * h * 4)
          << "backward of the embedding, microbatch " << mb << ", before layers.0's";
      FSDP_CUDA_TRY(launch_embedding_backward(inputs_[idx(mb)].as<std::int32_t>(), tokens_,
                                              config_.vocab, h, dh.as<float>(), grads[0],
                                              stream_));
      dh.reset();
      return ok_status();
    }
    Saved& s = saved(unit, mb);
    FSDP_CHECK(!s.x.empty()) << "backward of unit " << unit << " microbatch " << mb
                             << " without its forward";
    if (!s.has_intermediates()) {
      FSDP_RETURN_IF_ERROR(compute_intermediates(unit, mb, params, s));
    }
    FSDP_TRY(DeviceBuffer dnormed, floats(tokens_ * h));
    FSDP_TRY(DeviceBuffer dx, floats(tokens_ * h));
    if (unit == num_units_ - 1) {
      const std::int64_t v = config_.vocab;
      FSDP_TRY(DeviceBuffer dlogits, floats(tokens_ * v));
      FSDP_CUDA_TRY(launch_softmax_cross_entropy_backward(
          tokens_, v, targets_[idx(mb)].as<std::int32_t>(), s.probs.as<float>(),
          dlogits.as<float>(), stream_));
      FSDP_RETURN_IF_ERROR(matmul(true, false, v, h, tokens_, dlogits.as<float>(),
                                  s.normed.as<float>(), 0.0F, grads[1]));
      FSDP_RETURN_IF_ERROR(matmul(false, false, tokens_, h, v, dlogits.as<float>(), params[1],
                                  0.0F, dnormed.as<float>()));
      FSDP_CUDA_TRY(launch_rmsnorm_backward(tokens_, h, s.x.as<float>(), params[0],
                                            s.inv_rms.as<float>(), dnormed.as<float>(),
                                            dx.as<float>(), grads[0], stream_));
      dh = std::move(dx);
    } else {
      FSDP_CHECK(dh.bytes() == tokens_ * h * 4)
          << "backward of unit " << unit << " microbatch " << mb << " before the next unit's";
      const std::int64_t f = config_.ffn;
      FSDP_TRY(DeviceBuffer da, floats(tokens_ * f));
      FSDP_TRY(DeviceBuffer du, floats(tokens_ * f));
      FSDP_RETURN_IF_ERROR(matmul(true, false, h, f, tokens_, dh.as<float>(), s.a.as<float>(),
                                  0.0F, grads[2]));
      FSDP_RETURN_IF_ERROR(matmul(false, false, tokens_, f, h, dh.as<float>(), params[2], 0.0F,
                                  da.as<float>()));
      FSDP_CUDA_TRY(launch_gelu_backward(tokens_ * f, s.u.as<float>(), da.as<float>(),
                                         du.as<float>(), stream_));
      FSDP_RETURN_IF_ERROR(matmul(true, false, f, h, tokens_, du.as<float>(),
                                  s.normed.as<float>(), 0.0F, grads[1]));
      FSDP_RETURN_IF_ERROR(matmul(false, false, tokens_, h, f, du.as<float>(), params[1], 0.0F,
                                  dnormed.as<float>()));
      FSDP_CUDA_TRY(launch_rmsnorm_backward(tokens_, h, s.x.as<float>(), params[0],
                                            s.inv_rms.as<float>(), dnormed.as<float>(),
                                            dx.as<float>(), grads[0], stream_));
      FSDP_CUDA_TRY(launch_add(dh.as<float>(), dx.as<float>(), tokens_ * h, stream_));
    }
    s = Saved{};
    return ok_status();
  }

  backend::DecoderConfig config_;
  std::int64_t num_mb_;
  std::int64_t rank_;
  std::int64_t world_;
  int ordinal_;
  cudaStream_t stream_;
  std::int64_t tokens_;
  std::int32_t num_units_;
  cublasHandle_t handle_ = nullptr;
  mutable Status status_;
  std::vector<DeviceBuffer> inputs_;    // [mb] int32 tokens
  std::vector<DeviceBuffer> targets_;   // [mb]
  std::vector<DeviceBuffer> hidden_;    // [mb] output of the last unit run forward
  std::vector<DeviceBuffer> grad_;      // [mb] d loss / d that unit's input
  std::vector<DeviceBuffer> row_loss_;  // [mb] doubles per token
  std::vector<bool> has_loss_;
  std::vector<Saved> saved_;
  std::vector<bool> recompute_;
};

}  // namespace

Expected<std::unique_ptr<CudaDecoder>> CudaDecoder::make(const backend::DecoderConfig& config,
                                                         std::int64_t num_microbatches,
                                                         std::int64_t data_rank,
                                                         std::int64_t data_world, int ordinal,
                                                         cudaStream_t stream) {
  FSDP_RETURN_IF_ERROR(backend::validate(config));
  if (num_microbatches < 1 || num_microbatches > std::numeric_limits<std::int32_t>::max() ||
      data_world < 1 || data_rank < 0 || data_rank >= data_world) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("cuda decoder: expected num_microbatches in [1, 2^31), data_world >= 1 "
                         "and data_rank in [0, data_world); got ",
                         num_microbatches, ", ", data_world, ", ", data_rank));
  }
  auto impl = std::make_unique<CudaDecoderImpl>(config, num_microbatches, data_rank, data_world,
                                                ordinal, stream);
  FSDP_RETURN_IF_ERROR(impl->init());
  return std::unique_ptr<CudaDecoder>(std::move(impl));
}

}  // namespace fsdp::cuda

// SPDX-License-Identifier: Apache-2.0
// DecoderDriver over the kernel seam: the host kernel set seen through a forwarding set gives the
// host decoder's results bit for bit, every array goes back to the set, and a failing set (what a
// CUDA error is to the CUDA set) becomes status() and turns every later call into a no-op.
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "backends/model/decoder.h"
#include "backends/model/decoder_driver.h"
#include "backends/model/decoder_kernels.h"
#include "tests/backends/model/decoder_test_util.h"

#include <gtest/gtest.h>

namespace fsdp::backend {
namespace {

using testing::tiny_config;

// What the forwarding set saw; outlives it (the driver owns the set).
struct Ledger {
  std::int64_t calls = 0;       // every method but release
  std::int64_t live_bytes = 0;  // allocated and not yet released
  std::int64_t fail_at = -1;    // the call (1-based) that fails, or -1
};

// The host kernel set behind a counter that can inject a failure.
class ForwardingKernels final : public DecoderKernels {
 public:
  explicit ForwardingKernels(Ledger* ledger) : ledger_(ledger), inner_(make_host_kernels()) {}

  void* allocate(std::int64_t bytes) override {
    if (!next()) {
      return nullptr;
    }
    ledger_->live_bytes += bytes;
    return inner_->allocate(bytes);
  }
  void release(void* ptr, std::int64_t bytes) noexcept override {
    ledger_->live_bytes -= bytes;
    inner_->release(ptr, bytes);
  }
  void upload(void* dst, const void* src, std::int64_t bytes) override {
    if (next()) {
      inner_->upload(dst, src, bytes);
    }
  }
  void download(void* dst, const void* src, std::int64_t bytes) override {
    if (next()) {
      inner_->download(dst, src, bytes);
    }
  }
  void copy(float* dst, const float* src, std::int64_t n) override {
    if (next()) {
      inner_->copy(dst, src, n);
    }
  }
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
            const float* b, float beta, float* c) override {
    if (next()) {
      inner_->gemm(ta, tb, m, n, k, a, b, beta, c);
    }
  }
  void add(float* y, const float* x, std::int64_t n) override {
    if (next()) {
      inner_->add(y, x, n);
    }
  }
  void embedding_forward(const std::int32_t* t, std::int64_t rows, std::int64_t h,
                         const float* table, float* out) override {
    if (next()) {
      inner_->embedding_forward(t, rows, h, table, out);
    }
  }
  void embedding_backward(const std::int32_t* t, std::int64_t rows, std::int64_t v, std::int64_t h,
                          const float* dout, float* dtable) override {
    if (next()) {
      inner_->embedding_backward(t, rows, v, h, dout, dtable);
    }
  }
  void rmsnorm_forward(std::int64_t rows, std::int64_t dim, const float* x, const float* w,
                       float eps, float* inv, float* out) override {
    if (next()) {
      inner_->rmsnorm_forward(rows, dim, x, w, eps, inv, out);
    }
  }
  void rmsnorm_backward(std::int64_t rows, std::int64_t dim, const float* x, const float* w,
                        const float* inv, const float* dout, float* dx, float* dw) override {
    if (next()) {
      inner_->rmsnorm_backward(rows, dim, x, w, inv, dout, dx, dw);
    }
  }
  void gelu_forward(std::int64_t n, const float* u, float* a) override {
    if (next()) {
      inner_->gelu_forward(n, u, a);
    }
  }
  void gelu_backward(std::int64_t n, const float* u, const float* da, float* du) override {
    if (next()) {
      inner_->gelu_backward(n, u, da, du);
    }
  }
  void add_bias(std::int64_t rows, std::int64_t cols, const float* bias, float* y) override {
    if (next()) {
      inner_->add_bias(rows, cols, bias, y);
    }
  }
  void bias_backward(std::int64_t rows, std::int64_t cols, const float* dy, float* dbias) override {
    if (next()) {
      inner_->bias_backward(rows, cols, dy, dbias);
    }
  }
  void rope_forward(std::int64_t rows, std::int64_t s, std::int64_t heads, std::int64_t d,
                    double theta, float* x) override {
    if (next()) {
      inner_->rope_forward(rows, s, heads, d, theta, x);
    }
  }
  void rope_backward(std::int64_t rows, std::int64_t s, std::int64_t heads, std::int64_t d,
                     double theta, float* dx) override {
    if (next()) {
      inner_->rope_backward(rows, s, heads, d, theta, dx);
    }
  }
  void attention_forward(std::int64_t b, std::int64_t s, std::int64_t heads, std::int64_t kv,
                         std::int64_t d, const float* q, const float* k, const float* v, float* out,
                         float* lse) override {
    if (next()) {
      inner_->attention_forward(b, s, heads, kv, d, q, k, v, out, lse);
    }
  }
  void attention_backward(std::int64_t b, std::int64_t s, std::int64_t heads, std::int64_t kv,
                          std::int64_t d, const float* q, const float* k, const float* v,
                          const float* out, const float* lse, const float* dout, float* dq,
                          float* dk, float* dv) override {
    if (next()) {
      inner_->attention_backward(b, s, heads, kv, d, q, k, v, out, lse, dout, dq, dk, dv);
    }
  }
  void swiglu_forward(std::int64_t n, const float* gate, const float* up, float* out) override {
    if (next()) {
      inner_->swiglu_forward(n, gate, up, out);
    }
  }
  void swiglu_backward(std::int64_t n, const float* gate, const float* up, const float* dout,
                       float* dgate, float* dup) override {
    if (next()) {
      inner_->swiglu_backward(n, gate, up, dout, dgate, dup);
    }
  }
  void softmax_cross_entropy(std::int64_t rows, std::int64_t v, const std::int32_t* t,
                             const float* z, float* p, double* loss) override {
    if (next()) {
      inner_->softmax_cross_entropy(rows, v, t, z, p, loss);
    }
  }
  void softmax_cross_entropy_backward(std::int64_t rows, std::int64_t v, const std::int32_t* t,
                                      const float* p, float* dz) override {
    if (next()) {
      inner_->softmax_cross_entropy_backward(rows, v, t, p, dz);
    }
  }
  void embedding_slice_forward(const std::int32_t* t, std::int64_t rows, std::int64_t h,
                               std::int64_t first, std::int64_t n, const float* table,
                               float* out) override {
    if (next()) {
      inner_->embedding_slice_forward(t, rows, h, first, n, table, out);
    }
  }
  void embedding_slice_backward(const std::int32_t* t, std::int64_t rows, std::int64_t h,
                                std::int64_t first, std::int64_t n, const float* dout,
                                float* dtable) override {
    if (next()) {
      inner_->embedding_slice_backward(t, rows, h, first, n, dout, dtable);
    }
  }
  void vocab_parallel_stats(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                            std::int64_t first, const std::int32_t* t, const float* z,
                            float* stats) override {
    if (next()) {
      inner_->vocab_parallel_stats(rows, cols, valid, first, t, z, stats);
    }
  }
  void vocab_parallel_softmax(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                              std::int64_t members, const float* all, const float* z, float* p,
                              double* loss) override {
    if (next()) {
      inner_->vocab_parallel_softmax(rows, cols, valid, members, all, z, p, loss);
    }
  }
  void vocab_parallel_backward(std::int64_t rows, std::int64_t cols, std::int64_t valid,
                               std::int64_t first, const std::int32_t* t, const float* p,
                               float* dz) override {
    if (next()) {
      inner_->vocab_parallel_backward(rows, cols, valid, first, t, p, dz);
    }
  }

  void softmax_rows(std::int64_t rows, std::int64_t cols, const float* x, float* probs) override {
    if (next()) {
      inner_->softmax_rows(rows, cols, x, probs);
    }
  }
  void moe_route(std::int64_t rows, std::int64_t experts, std::int64_t top_k, std::int64_t cap,
                 const float* probs, std::int32_t* ce, float* cw, std::int32_t* cs,
                 std::int32_t* st) override {
    if (next()) {
      inner_->moe_route(rows, experts, top_k, cap, probs, ce, cw, cs, st);
    }
  }
  void moe_dispatch(std::int64_t slots, std::int64_t hidden, const std::int32_t* st, const float* x,
                    float* out) override {
    if (next()) {
      inner_->moe_dispatch(slots, hidden, st, x, out);
    }
  }
  void moe_dispatch_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                             const std::int32_t* cs, const float* ds, float* dx) override {
    if (next()) {
      inner_->moe_dispatch_backward(rows, top_k, hidden, cs, ds, dx);
    }
  }
  void moe_combine(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                   const std::int32_t* cs, const float* cw, const float* y, float* out) override {
    if (next()) {
      inner_->moe_combine(rows, top_k, hidden, cs, cw, y, out);
    }
  }
  void moe_combine_backward(std::int64_t rows, std::int64_t top_k, std::int64_t hidden,
                            std::int64_t slots, const std::int32_t* cs, const float* cw,
                            const float* y, const float* dout, float* dw, float* dy) override {
    if (next()) {
      inner_->moe_combine_backward(rows, top_k, hidden, slots, cs, cw, y, dout, dw, dy);
    }
  }
  void moe_router_backward(std::int64_t rows, std::int64_t experts, std::int64_t top_k,
                           const float* probs, const std::int32_t* ce, const float* cw,
                           const float* dw, float* dl) override {
    if (next()) {
      inner_->moe_router_backward(rows, experts, top_k, probs, ce, cw, dw, dl);
    }
  }

 private:
  // Counts the call; false once the set has failed (the injected call fails it).
  bool next() {
    if (!ok()) {
      return false;
    }
    if (++ledger_->calls == ledger_->fail_at) {
      fail(Error(ErrorCode::kUnavailable, "injected kernel failure"));
    }
    return ok();
  }

  Ledger* ledger_;
  std::unique_ptr<DecoderKernels> inner_;
};

std::unique_ptr<HostDecoder> forwarding_decoder(const DecoderConfig& config, std::int64_t num_mb,
                                                Ledger* ledger) {
  EXPECT_TRUE(validate_decoder_args("test decoder", config, num_mb, 0, 1).ok());
  return std::make_unique<DecoderDriver>(config, num_mb, 0, 1,
                                         std::make_unique<ForwardingKernels>(ledger));
}

TEST(DecoderDriverTest, HostKernelsThroughTheSeamMatchTheHostDecoder) {
  const DecoderConfig config = tiny_config();
  const ParamValues params = initial_parameters(config);
  Ledger ledger;
  auto seam = forwarding_decoder(config, 2, &ledger);
  auto host = HostDecoder::make(config, 2, 0, 1).value();
  for (HostDecoder* d : {seam.get(), host.get()}) {
    d->set_recompute(1, true);
    d->begin_step(1);
  }
  for (std::int32_t mb = 0; mb < 2; ++mb) {
    ParamValues g_seam;
    ParamValues g_host;
    testing::run_microbatch(*seam, params, mb, &g_seam);
    testing::run_microbatch(*host, params, mb, &g_host);
    EXPECT_EQ(g_seam, g_host) << "microbatch " << mb;
  }
  EXPECT_EQ(seam->step_loss(), host->step_loss());
  EXPECT_TRUE(seam->status().ok());
  EXPECT_GT(ledger.calls, 0);
}

TEST(DecoderDriverTest, EveryArrayGoesBackToTheKernelSet) {
  const DecoderConfig config = tiny_config();
  const ParamValues params = initial_parameters(config);
  const std::int64_t tokens = config.micro_batch_size * config.seq_len;
  Ledger ledger;
  {
    auto decoder = forwarding_decoder(config, 2, &ledger);
    decoder->begin_step(0);
    // Token ids and targets of both microbatches live all step.
    const std::int64_t ids = 2 * 2 * tokens * static_cast<std::int64_t>(sizeof(std::int32_t));
    EXPECT_EQ(ledger.live_bytes, ids);
    ParamValues grads;
    testing::run_microbatch(*decoder, params, 0, &grads);
    // After backward only the head's row losses of microbatch 0 remain.
    EXPECT_EQ(decoder->activation_bytes(), 0);
    EXPECT_EQ(ledger.live_bytes, ids + tokens * static_cast<std::int64_t>(sizeof(double)));
    testing::run_microbatch(*decoder, params, 1, nullptr);  // forward only: activations kept
    EXPECT_EQ(ledger.live_bytes, ids + 2 * tokens * static_cast<std::int64_t>(sizeof(double)) +
                                     decoder->activation_bytes());
  }
  EXPECT_EQ(ledger.live_bytes, 0);
}

TEST(DecoderDriverTest, AFailingKernelSetTurnsLaterCallsIntoNoOps) {
  const DecoderConfig config = tiny_config();
  const ParamValues params = initial_parameters(config);
  // Count the calls of one clean microbatch, then fail each of a spread of them in turn.
  Ledger clean;
  {
    auto decoder = forwarding_decoder(config, 1, &clean);
    decoder->begin_step(0);
    ParamValues grads;
    testing::run_microbatch(*decoder, params, 0, &grads);
    EXPECT_TRUE(std::isfinite(decoder->step_loss()));
  }
  ASSERT_GT(clean.calls, 10);
  for (std::int64_t fail_at = 1; fail_at <= clean.calls + 1; fail_at += 7) {
    SCOPED_TRACE(fail_at);
    Ledger ledger;
    ledger.fail_at = fail_at;
    {
      auto decoder = forwarding_decoder(config, 1, &ledger);
      decoder->begin_step(0);
      ParamValues grads;
      testing::run_microbatch(*decoder, params, 0, &grads);
      const double loss = decoder->step_loss();
      if (fail_at > clean.calls) {  // past the last call: nothing failed
        EXPECT_TRUE(decoder->status().ok());
        EXPECT_TRUE(std::isfinite(loss));
        continue;
      }
      EXPECT_TRUE(std::isnan(loss));
      ASSERT_FALSE(decoder->status().ok());
      EXPECT_EQ(decoder->status().error().message(), "injected kernel failure");
      EXPECT_EQ(ledger.calls, fail_at);  // nothing ran after the failure
      // Later steps are no-ops too.
      decoder->begin_step(1);
      testing::run_microbatch(*decoder, params, 0, &grads);
      EXPECT_EQ(ledger.calls, fail_at);
    }
    EXPECT_EQ(ledger.live_bytes, 0);
  }
}

TEST(DecoderDriverTest, ArgumentChecksNameTheDecoder) {
  const Status bad = validate_decoder_args("cuda decoder", tiny_config(), 1, 0, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message(), "cuda decoder: data_world must be >= 1, got 0");
}

}  // namespace
}  // namespace fsdp::backend

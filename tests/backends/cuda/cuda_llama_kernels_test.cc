// SPDX-License-Identifier: Apache-2.0
// The Llama operations of the CUDA kernel set (bias, RoPE, grouped-query attention, SwiGLU and
// rmsnorm with its eps) against the host kernel set on the same inputs: both compute in double and
// round once, so the whole-tensor relative error stays within 1e-5; attention's backward is also
// bit-identical from run to run (no atomics). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_decoder.h"
#include "backends/cuda/cuda_device.h"
#include "backends/model/decoder_kernels.h"
#include "tests/backends/cuda/cuda_test_util.h"

namespace fsdp::cuda {
namespace {

using backend::DecoderKernels;
using backend::DeviceArray;
using testing::rel_error;

constexpr double kMaxRelError = 1e-5;

std::vector<float> random_vector(std::size_t n, std::uint32_t seed, float lo = -1.0F,
                                 float hi = 1.0F) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) {
    x = dist(gen);
  }
  return v;
}

// The same tensors in both kernel sets' memory.
class Pair {
 public:
  Pair(DecoderKernels& host, DecoderKernels& dev, const std::vector<float>& values)
      : dev_set_(&dev), n_(static_cast<std::int64_t>(values.size())) {
    h_ = host.array<float>(n_);
    d_ = dev.array<float>(n_);
    host.upload(h_.as<void>(), values.data(), n_ * static_cast<std::int64_t>(sizeof(float)));
    dev.upload(d_.as<void>(), values.data(), n_ * static_cast<std::int64_t>(sizeof(float)));
  }
  float* h() const { return h_.as<float>(); }
  float* d() const { return d_.as<float>(); }
  std::vector<float> host_values() const { return {h(), h() + n_}; }
  std::vector<float> device_values() const {
    std::vector<float> out(static_cast<std::size_t>(n_));
    dev_set_->download(out.data(), d(), n_ * static_cast<std::int64_t>(sizeof(float)));
    return out;
  }

 private:
  DecoderKernels* dev_set_;
  std::int64_t n_;
  DeviceArray h_;
  DeviceArray d_;
};

class CudaLlamaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) {
      GTEST_SKIP() << "no CUDA device";
    }
    auto dev = CudaDevice::make(0, "rank 0");
    ASSERT_TRUE(dev.has_value()) << dev.error().message();
    device_ = std::move(*dev);
    auto set = make_cuda_kernels(0, device_->stream(StreamKind::kCompute));
    ASSERT_TRUE(set.has_value()) << set.error().message();
    dev_ = std::move(*set);
    host_ = backend::make_host_kernels();
  }
  void TearDown() override {
    if (dev_ != nullptr && !expect_failure_) {
      EXPECT_TRUE(dev_->ok()) << dev_->status().error().message();
    }
  }
  Pair pair(const std::vector<float>& values) { return Pair(*host_, *dev_, values); }
  Pair zeros(std::size_t n) { return pair(std::vector<float>(n, 0.0F)); }
  void expect_close(const std::string& what, const Pair& p) {
    ASSERT_TRUE(dev_->ok()) << what << ": " << dev_->status().error().message();
    const std::vector<float> gpu = p.device_values();
    const std::vector<float> cpu = p.host_values();
    EXPECT_LE(rel_error(gpu, cpu), kMaxRelError) << what;
  }

  // Declared first: the device outlives the kernel set on its stream.
  std::unique_ptr<CudaDevice> device_;
  std::unique_ptr<DecoderKernels> dev_;
  std::unique_ptr<DecoderKernels> host_;
  bool expect_failure_ = false;
};

TEST_F(CudaLlamaKernelsTest, BiasMatchesHost) {
  const std::int64_t rows = 300;
  const std::int64_t cols = 37;
  Pair y = pair(random_vector(static_cast<std::size_t>(rows * cols), 1));
  Pair bias = pair(random_vector(static_cast<std::size_t>(cols), 2));
  Pair dbias = zeros(static_cast<std::size_t>(cols));
  for (DecoderKernels* k : {host_.get(), dev_.get()}) {
    const bool h = k == host_.get();
    k->add_bias(rows, cols, h ? bias.h() : bias.d(), h ? y.h() : y.d());
    k->bias_backward(rows, cols, h ? y.h() : y.d(), h ? dbias.h() : dbias.d());
  }
  expect_close("add_bias", y);
  expect_close("bias_backward", dbias);
}

TEST_F(CudaLlamaKernelsTest, RopeMatchesHost) {
  const std::int64_t seq = 257;
  const std::int64_t rows = 2 * seq;
  const std::int64_t heads = 3;
  const std::int64_t head_dim = 16;
  const auto n = static_cast<std::size_t>(rows * heads * head_dim);
  Pair x = pair(random_vector(n, 3));
  Pair dx = pair(random_vector(n, 4));
  for (DecoderKernels* k : {host_.get(), dev_.get()}) {
    const bool h = k == host_.get();
    k->rope_forward(rows, seq, heads, head_dim, 10000.0, h ? x.h() : x.d());
    k->rope_backward(rows, seq, heads, head_dim, 500000.0, h ? dx.h() : dx.d());
  }
  expect_close("rope_forward", x);
  expect_close("rope_backward", dx);
}

TEST_F(CudaLlamaKernelsTest, SwiGluAndRmsNormMatchHost) {
  const std::int64_t n = 1000;
  Pair gate = pair(random_vector(static_cast<std::size_t>(n), 5, -6.0F, 6.0F));
  Pair up = pair(random_vector(static_cast<std::size_t>(n), 6));
  Pair dout = pair(random_vector(static_cast<std::size_t>(n), 7));
  Pair out = zeros(static_cast<std::size_t>(n));
  Pair dgate = zeros(static_cast<std::size_t>(n));
  Pair dup = zeros(static_cast<std::size_t>(n));
  const std::int64_t rows = 4;
  const std::int64_t dim = n / rows;  // 250: below one row block's 256 threads
  Pair weight = pair(random_vector(static_cast<std::size_t>(dim), 8, 0.5F, 1.5F));
  Pair inv = zeros(static_cast<std::size_t>(rows));
  Pair normed = zeros(static_cast<std::size_t>(n));
  for (DecoderKernels* k : {host_.get(), dev_.get()}) {
    const bool h = k == host_.get();
    k->swiglu_forward(n, h ? gate.h() : gate.d(), h ? up.h() : up.d(), h ? out.h() : out.d());
    k->swiglu_backward(n, h ? gate.h() : gate.d(), h ? up.h() : up.d(), h ? dout.h() : dout.d(),
                       h ? dgate.h() : dgate.d(), h ? dup.h() : dup.d());
    k->rmsnorm_forward(rows, dim, h ? up.h() : up.d(), h ? weight.h() : weight.d(), 1e-2F,
                       h ? inv.h() : inv.d(), h ? normed.h() : normed.d());
  }
  expect_close("swiglu_forward", out);
  expect_close("swiglu_backward dgate", dgate);
  expect_close("swiglu_backward dup", dup);
  expect_close("rmsnorm_forward inv_rms (eps 1e-2)", inv);
  expect_close("rmsnorm_forward out (eps 1e-2)", normed);
}

struct AttentionShapeCase {
  std::int64_t batch;
  std::int64_t seq;
  std::int64_t heads;
  std::int64_t kv_heads;
  std::int64_t head_dim;
};

// seq 300 spans two 256-key (and 256-query) tiles; head_dim 264 spans two column chunks.
const AttentionShapeCase kAttentionCases[] = {
    {2, 5, 4, 2, 4},     // the host gradient check's GQA case
    {2, 300, 4, 2, 16},  // GQA over tiles
    {1, 300, 3, 3, 8},   // MHA over tiles
    {1, 6, 2, 1, 264},   // multi-query, wide heads
};

TEST_F(CudaLlamaKernelsTest, AttentionMatchesHost) {
  for (const AttentionShapeCase& c : kAttentionCases) {
    const std::string tag = "batch " + std::to_string(c.batch) + " seq " + std::to_string(c.seq) +
                            " heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                            " head_dim " + std::to_string(c.head_dim);
    const std::int64_t rows = c.batch * c.seq;
    const auto nq = static_cast<std::size_t>(rows * c.heads * c.head_dim);
    const auto nkv = static_cast<std::size_t>(rows * c.kv_heads * c.head_dim);
    // Scores of a few units: the softmax is neither flat nor one-hot.
    const float scale = 2.0F;
    Pair q = pair(random_vector(nq, 9, -scale, scale));
    Pair k = pair(random_vector(nkv, 10, -scale, scale));
    Pair v = pair(random_vector(nkv, 11));
    Pair dout = pair(random_vector(nq, 12));
    Pair out = zeros(nq);
    Pair lse = zeros(static_cast<std::size_t>(rows * c.heads));
    Pair dq = zeros(nq);
    Pair dk = zeros(nkv);
    Pair dv = zeros(nkv);
    // Each set's backward runs on its own forward's out and lse.
    for (DecoderKernels* set : {host_.get(), dev_.get()}) {
      const bool h = set == host_.get();
      set->attention_forward(c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, h ? q.h() : q.d(),
                             h ? k.h() : k.d(), h ? v.h() : v.d(), h ? out.h() : out.d(),
                             h ? lse.h() : lse.d());
      set->attention_backward(c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, h ? q.h() : q.d(),
                              h ? k.h() : k.d(), h ? v.h() : v.d(), h ? out.h() : out.d(),
                              h ? lse.h() : lse.d(), h ? dout.h() : dout.d(), h ? dq.h() : dq.d(),
                              h ? dk.h() : dk.d(), h ? dv.h() : dv.d());
    }
    expect_close("attention out " + tag, out);
    expect_close("attention lse " + tag, lse);
    expect_close("attention dq " + tag, dq);
    expect_close("attention dk " + tag, dk);
    expect_close("attention dv " + tag, dv);
    // Run to run: the same bits.
    const std::vector<float> dk_first = dk.device_values();
    const std::vector<float> dq_first = dq.device_values();
    dev_->attention_backward(c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, q.d(), k.d(), v.d(),
                             out.d(), lse.d(), dout.d(), dq.d(), dk.d(), dv.d());
    EXPECT_EQ(dk.device_values(), dk_first) << tag;
    EXPECT_EQ(dq.device_values(), dq_first) << tag;
  }
}

// Tensor parallelism's vocabulary-parallel kernels (docs/design/parallelism.md): a slice of 300
// columns of which 257 are real, first column 600, targets inside and outside the slice.
TEST_F(CudaLlamaKernelsTest, VocabularyParallelKernelsMatchHost) {
  const std::int64_t rows = 37;
  const std::int64_t cols = 300;
  const std::int64_t valid = 257;
  const std::int64_t first = 600;
  const std::int64_t members = 2;
  const std::int64_t hidden = 19;
  std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
  for (std::size_t t = 0; t < targets.size(); ++t) {
    targets[t] = static_cast<std::int32_t>((t * 97) % 1100);  // some in [600, 857), most not
  }
  const auto int_bytes = static_cast<std::int64_t>(targets.size() * sizeof(std::int32_t));
  DeviceArray h_targets = host_->array<std::int32_t>(rows);
  DeviceArray d_targets = dev_->array<std::int32_t>(rows);
  host_->upload(h_targets.as<void>(), targets.data(), int_bytes);
  dev_->upload(d_targets.as<void>(), targets.data(), int_bytes);
  const auto n = static_cast<std::size_t>(rows * cols);
  Pair logits = pair(random_vector(n, 21, -8.0F, 8.0F));
  Pair stats = zeros(static_cast<std::size_t>(rows * 3));
  // The other member's stats: a larger maximum on some rows, so M comes from either side.
  std::vector<float> other(static_cast<std::size_t>(rows * 3));
  for (std::size_t t = 0; t < static_cast<std::size_t>(rows); ++t) {
    other[3 * t] = t % 2 == 0 ? 9.0F : 1.0F;
    other[3 * t + 1] = 3.5F;
    other[3 * t + 2] = t % 3 == 0 ? 0.25F : 0.0F;
  }
  Pair all_stats = zeros(static_cast<std::size_t>(members * rows * 3));
  Pair probs = zeros(n);
  Pair dlogits = zeros(n);
  const auto loss_bytes = rows * static_cast<std::int64_t>(sizeof(double));
  DeviceArray h_loss = host_->array<double>(rows);
  DeviceArray d_loss = dev_->array<double>(rows);
  std::vector<float> gathered(static_cast<std::size_t>(members * rows * 3));
  for (DecoderKernels* k : {host_.get(), dev_.get()}) {
    const bool h = k == host_.get();
    const auto* tg = (h ? h_targets : d_targets).as<std::int32_t>();
    k->vocab_parallel_stats(rows, cols, valid, first, tg, h ? logits.h() : logits.d(),
                            h ? stats.h() : stats.d());
    // Member 0 is this slice, member 1 the fixed stats above.
    k->download(gathered.data(), h ? stats.h() : stats.d(), rows * 3 * 4);
    std::copy(other.begin(), other.end(), gathered.begin() + rows * 3);
    k->upload(h ? all_stats.h() : all_stats.d(), gathered.data(),
              static_cast<std::int64_t>(gathered.size() * sizeof(float)));
    k->vocab_parallel_softmax(rows, cols, valid, members, h ? all_stats.h() : all_stats.d(),
                              h ? logits.h() : logits.d(), h ? probs.h() : probs.d(),
                              (h ? h_loss : d_loss).as<double>());
    k->vocab_parallel_backward(rows, cols, valid, first, tg, h ? probs.h() : probs.d(),
                               h ? dlogits.h() : dlogits.d());
  }
  expect_close("vocab_parallel_stats", stats);
  expect_close("vocab_parallel_softmax probs", probs);
  expect_close("vocab_parallel_backward", dlogits);
  std::vector<double> host_loss(static_cast<std::size_t>(rows));
  std::vector<double> gpu_loss(static_cast<std::size_t>(rows));
  host_->download(host_loss.data(), h_loss.as<void>(), loss_bytes);
  dev_->download(gpu_loss.data(), d_loss.as<void>(), loss_bytes);
  for (std::size_t t = 0; t < host_loss.size(); ++t) {
    EXPECT_NEAR(gpu_loss[t], host_loss[t], 1e-9 * std::max(1.0, std::abs(host_loss[t]))) << t;
  }
  // The embedding's slice of rows [600, 900) of a vocabulary the targets index.
  Pair table = pair(random_vector(static_cast<std::size_t>(cols * hidden), 22));
  Pair out = zeros(static_cast<std::size_t>(rows * hidden));
  Pair dout = pair(random_vector(static_cast<std::size_t>(rows * hidden), 23));
  Pair dtable = zeros(static_cast<std::size_t>(cols * hidden));
  for (DecoderKernels* k : {host_.get(), dev_.get()}) {
    const bool h = k == host_.get();
    const auto* tg = (h ? h_targets : d_targets).as<std::int32_t>();
    k->embedding_slice_forward(tg, rows, hidden, first, cols, h ? table.h() : table.d(),
                               h ? out.h() : out.d());
    k->embedding_slice_backward(tg, rows, hidden, first, cols, h ? dout.h() : dout.d(),
                                h ? dtable.h() : dtable.d());
  }
  expect_close("embedding_slice_forward", out);
  expect_close("embedding_slice_backward", dtable);
}

TEST_F(CudaLlamaKernelsTest, MixtureOfExpertsKernelsMatchHost) {
  // 37 tokens, 2 of 8 experts each, 9 slots per expert: some copies are dropped.
  const std::int64_t rows = 37;
  const std::int64_t experts = 8;
  const std::int64_t top_k = 2;
  const std::int64_t capacity = 9;
  const std::int64_t hidden = 19;
  const std::int64_t slots = experts * capacity;
  Pair logits = pair(random_vector(static_cast<std::size_t>(rows * experts), 31, -3.0F, 3.0F));
  Pair probs = zeros(static_cast<std::size_t>(rows * experts));
  host_->softmax_rows(rows, experts, logits.h(), probs.h());
  dev_->softmax_rows(rows, experts, logits.d(), probs.d());
  expect_close("softmax_rows", probs);
  // Both sets route the host's probabilities, so that their choices can be compared exactly.
  const std::vector<float> p = probs.host_values();
  dev_->upload(probs.d(), p.data(), static_cast<std::int64_t>(p.size() * sizeof(float)));
  const auto ints = [&](DecoderKernels& k, std::int64_t n) { return k.array<std::int32_t>(n); };
  DeviceArray h_expert = ints(*host_, rows * top_k), d_expert = ints(*dev_, rows * top_k);
  DeviceArray h_slot = ints(*host_, rows * top_k), d_slot = ints(*dev_, rows * top_k);
  DeviceArray h_token = ints(*host_, slots), d_token = ints(*dev_, slots);
  Pair weight = zeros(static_cast<std::size_t>(rows * top_k));
  Pair x = pair(random_vector(static_cast<std::size_t>(rows * hidden), 32));
  Pair dispatched = zeros(static_cast<std::size_t>(slots * hidden));
  Pair y = pair(random_vector(static_cast<std::size_t>(slots * hidden), 33));
  Pair out = pair(random_vector(static_cast<std::size_t>(rows * hidden), 34));
  Pair dout = pair(random_vector(static_cast<std::size_t>(rows * hidden), 35));
  Pair dweight = zeros(static_cast<std::size_t>(rows * top_k));
  Pair dy = zeros(static_cast<std::size_t>(slots * hidden));
  Pair dx = zeros(static_cast<std::size_t>(rows * hidden));
  Pair dlogits = zeros(static_cast<std::size_t>(rows * experts));
  for (DecoderKernels* k : {host_.get(), dev_.get()}) {
    const bool h = k == host_.get();
    const auto sel = [h](const Pair& v) { return h ? v.h() : v.d(); };
    auto* e = (h ? h_expert : d_expert).as<std::int32_t>();
    auto* s = (h ? h_slot : d_slot).as<std::int32_t>();
    auto* t = (h ? h_token : d_token).as<std::int32_t>();
    k->moe_route(rows, experts, top_k, capacity, sel(probs), e, sel(weight), s, t);
    k->moe_dispatch(slots, hidden, t, sel(x), sel(dispatched));
    k->moe_combine(rows, top_k, hidden, s, sel(weight), sel(y), sel(out));
    k->moe_combine_backward(rows, top_k, hidden, slots, s, sel(weight), sel(y), sel(dout),
                            sel(dweight), sel(dy));
    k->moe_dispatch_backward(rows, top_k, hidden, s, sel(dy), sel(dx));
    k->moe_router_backward(rows, experts, top_k, sel(probs), e, sel(weight), sel(dweight),
                           sel(dlogits));
  }
  ASSERT_TRUE(dev_->ok()) << dev_->status().error().message();
  const auto same_ints = [&](const char* what, const DeviceArray& hd, const DeviceArray& dd,
                             std::int64_t n) {
    std::vector<std::int32_t> a(static_cast<std::size_t>(n));
    std::vector<std::int32_t> b(static_cast<std::size_t>(n));
    host_->download(a.data(), hd.as<void>(), n * 4);
    dev_->download(b.data(), dd.as<void>(), n * 4);
    EXPECT_EQ(a, b) << what;
    return a;
  };
  same_ints("choice_expert", h_expert, d_expert, rows * top_k);
  const std::vector<std::int32_t> kept = same_ints("choice_slot", h_slot, d_slot, rows * top_k);
  same_ints("slot_token", h_token, d_token, slots);
  EXPECT_NE(std::find(kept.begin(), kept.end(), -1), kept.end()) << "no copy was dropped";
  expect_close("moe_route weights", weight);
  expect_close("moe_dispatch", dispatched);
  expect_close("moe_combine", out);
  expect_close("moe_combine_backward dweight", dweight);
  expect_close("moe_combine_backward dy", dy);
  expect_close("moe_dispatch_backward", dx);
  expect_close("moe_router_backward", dlogits);
}

TEST_F(CudaLlamaKernelsTest, AttentionRejectsKvHeadsThatDoNotDivideHeads) {
  Pair x = zeros(64);
  Pair lse = zeros(8);
  ASSERT_TRUE(dev_->ok());
  dev_->attention_forward(1, 2, 3, 2, 4, x.d(), x.d(), x.d(), x.d(), lse.d());
  ASSERT_FALSE(dev_->ok());
  EXPECT_NE(dev_->status().error().message().find("launch_attention_forward"), std::string::npos)
      << dev_->status().error().message();
  expect_failure_ = true;
}

}  // namespace
}  // namespace fsdp::cuda

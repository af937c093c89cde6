// SPDX-License-Identifier: Apache-2.0
// Every host kernel with a backward (backends/model/kernels.h) against central finite differences
// of a scalar objective L = sum(w .* output) with a fixed random w (for the cross-entropy, L is the
// mean row loss the backward differentiates), plus exact properties that a gradient check cannot
// see: RoPE's convention and inverse, attention's causal mask, its first row and its head grouping.
#include "backends/model/kernels.h"

#include "backends/model/decoder_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace fsdp::backend {
namespace {

std::size_t idx(std::int64_t v) {
  return static_cast<std::size_t>(v);
}

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

double weighted_sum(const std::vector<float>& w, const std::vector<float>& out) {
  double s = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    s += static_cast<double>(w[i]) * out[i];
  }
  return s;
}

// Compares analytic[e] with the central difference (L(x + h e) - L(x - h e)) / (2h) for every
// element of x, or a deterministic spread of >= 64 of them when x is large; `loss` reads x.
//
// Tolerance: the forward runs in double and rounds each output to fp32 (relative error 6e-8), so
// L carries an absolute error of about 1e-6 for the ~100 unit-size terms here; divided by 2h =
// 2e-2 that is ~1e-4. The truncation error of a central difference is h^2/6 |L'''|, ~2e-5 for
// these smooth functions of O(1) inputs. 2e-3 + 2e-2 |analytic| leaves a margin of 10 over both,
// while a wrong term in a backward (a missing factor, a dropped sum) is off by O(|analytic|).
void check_gradient(const std::string& what, std::vector<float>& x,
                    const std::vector<float>& analytic, const std::function<double()>& loss,
                    float h = 1e-2F) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const std::size_t n = x.size();
  const std::size_t stride = n <= 128 ? 1 : n / 64;
  std::size_t checked = 0;
  for (std::size_t e = 0; e < n; e += stride) {
    const float x0 = x[e];
    x[e] = x0 + h;
    const float up = x[e];
    const double l_up = loss();
    x[e] = x0 - h;
    const float down = x[e];
    const double l_down = loss();
    x[e] = x0;
    // The step actually taken in fp32 (x0 +- h rounds).
    const double numeric = (l_up - l_down) / (static_cast<double>(up) - down);
    EXPECT_LE(std::abs(numeric - analytic[e]), 2e-3 + 2e-2 * std::abs(analytic[e]))
        << what << " element " << e << ": numeric " << numeric << ", analytic " << analytic[e];
    ++checked;
  }
  EXPECT_GE(checked, std::min<std::size_t>(n, 64)) << what;
}

TEST(KernelGradcheckTest, Matmul) {
  const std::int64_t m = 5;
  const std::int64_t n = 4;
  const std::int64_t k = 6;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      std::vector<float> a = random_vector(idx(m * k), 1);
      std::vector<float> b = random_vector(idx(k * n), 2);
      const std::vector<float> w = random_vector(idx(m * n), 3);
      auto loss = [&] {
        std::vector<float> c(idx(m * n));
        matmul(ta, tb, m, n, k, a.data(), b.data(), 0.0F, c.data());
        return weighted_sum(w, c);
      };
      // dop(A) = W op(B)^T (m x k), dop(B) = op(A)^T W (k x n), then back to the stored layout.
      std::vector<float> da_op(idx(m * k));
      std::vector<float> db_op(idx(k * n));
      std::vector<float> b_op(idx(k * n));
      std::vector<float> a_op(idx(m * k));
      for (std::int64_t r = 0; r < k; ++r) {
        for (std::int64_t c = 0; c < n; ++c) {
          b_op[idx(r * n + c)] = tb ? b[idx(c * k + r)] : b[idx(r * n + c)];
        }
      }
      for (std::int64_t r = 0; r < m; ++r) {
        for (std::int64_t c = 0; c < k; ++c) {
          a_op[idx(r * k + c)] = ta ? a[idx(c * m + r)] : a[idx(r * k + c)];
        }
      }
      matmul(false, true, m, k, n, w.data(), b_op.data(), 0.0F, da_op.data());
      matmul(true, false, k, n, m, a_op.data(), w.data(), 0.0F, db_op.data());
      std::vector<float> da(idx(m * k));
      std::vector<float> db(idx(k * n));
      for (std::int64_t r = 0; r < m; ++r) {
        for (std::int64_t c = 0; c < k; ++c) {
          da[idx(ta ? c * m + r : r * k + c)] = da_op[idx(r * k + c)];
        }
      }
      for (std::int64_t r = 0; r < k; ++r) {
        for (std::int64_t c = 0; c < n; ++c) {
          db[idx(tb ? c * k + r : r * n + c)] = db_op[idx(r * n + c)];
        }
      }
      const std::string tag = std::string(ta ? "A^T" : "A") + (tb ? " B^T" : " B");
      check_gradient("matmul dA " + tag, a, da, loss);
      check_gradient("matmul dB " + tag, b, db, loss);
    }
  }
}

TEST(KernelGradcheckTest, Embedding) {
  const std::int64_t vocab = 7;
  const std::int64_t hidden = 5;
  const std::vector<std::int32_t> tokens = {3, 0, 3, 6, 1, 3, 2};  // repeats and unused rows
  std::vector<float> table = random_vector(idx(vocab * hidden), 4);
  const std::vector<float> w = random_vector(tokens.size() * idx(hidden), 5);
  auto loss = [&] {
    std::vector<float> out(tokens.size() * idx(hidden));
    embedding_forward(tokens, hidden, table.data(), out.data());
    return weighted_sum(w, out);
  };
  std::vector<float> dtable(table.size(), 99.0F);  // overwritten, unused rows included
  embedding_backward(tokens, vocab, hidden, w.data(), dtable.data());
  check_gradient("embedding dtable", table, dtable, loss);
}

TEST(KernelGradcheckTest, RmsNorm) {
  const std::int64_t rows = 6;
  const std::int64_t dim = 8;
  std::vector<float> x = random_vector(idx(rows * dim), 6);
  std::vector<float> weight = random_vector(idx(dim), 7, 0.5F, 1.5F);
  const std::vector<float> w = random_vector(x.size(), 8);
  std::vector<float> inv(idx(rows));
  auto loss = [&] {
    std::vector<float> out(x.size());
    std::vector<float> inv_rms(idx(rows));
    rmsnorm_forward(rows, dim, x.data(), weight.data(), kRmsNormEps, inv_rms.data(), out.data());
    return weighted_sum(w, out);
  };
  std::vector<float> out(x.size());
  rmsnorm_forward(rows, dim, x.data(), weight.data(), kRmsNormEps, inv.data(), out.data());
  std::vector<float> dx(x.size());
  std::vector<float> dweight(weight.size(), 99.0F);
  rmsnorm_backward(rows, dim, x.data(), weight.data(), inv.data(), w.data(), dx.data(),
                   dweight.data());
  check_gradient("rmsnorm dx", x, dx, loss);
  check_gradient("rmsnorm dweight", weight, dweight, loss);
}

TEST(KernelGradcheckTest, RmsNormEpsEntersTheNorm) {
  // A zero row normalises to zero and keeps inv_rms = 1/sqrt(eps); a larger eps shrinks a row.
  const std::vector<float> x = {0.0F, 0.0F, 3.0F, 4.0F};
  const std::vector<float> weight = {1.0F, 1.0F};
  std::vector<float> inv(2);
  std::vector<float> out(4);
  rmsnorm_forward(2, 2, x.data(), weight.data(), 0.25F, inv.data(), out.data());
  EXPECT_FLOAT_EQ(inv[0], 2.0F);
  EXPECT_FLOAT_EQ(inv[1], static_cast<float>(1.0 / std::sqrt(12.5 + 0.25)));
  EXPECT_EQ(out[0], 0.0F);
}

TEST(KernelGradcheckTest, Gelu) {
  const std::int64_t n = 40;
  std::vector<float> u = random_vector(idx(n), 9, -3.0F, 3.0F);
  const std::vector<float> w = random_vector(idx(n), 10);
  auto loss = [&] {
    std::vector<float> a(idx(n));
    gelu_forward(n, u.data(), a.data());
    return weighted_sum(w, a);
  };
  std::vector<float> du(idx(n));
  gelu_backward(n, u.data(), w.data(), du.data());
  check_gradient("gelu du", u, du, loss);
}

TEST(KernelGradcheckTest, SwiGlu) {
  const std::int64_t n = 48;
  std::vector<float> gate = random_vector(idx(n), 11, -4.0F, 4.0F);
  std::vector<float> up = random_vector(idx(n), 12, -2.0F, 2.0F);
  const std::vector<float> w = random_vector(idx(n), 13);
  auto loss = [&] {
    std::vector<float> out(idx(n));
    swiglu_forward(n, gate.data(), up.data(), out.data());
    return weighted_sum(w, out);
  };
  std::vector<float> dgate(idx(n));
  std::vector<float> dup(idx(n));
  swiglu_backward(n, gate.data(), up.data(), w.data(), dgate.data(), dup.data());
  check_gradient("swiglu dgate", gate, dgate, loss);
  check_gradient("swiglu dup", up, dup, loss);
  // silu(1) * 2 = 2 / (1 + e^-1).
  const float g1 = 1.0F;
  const float u2 = 2.0F;
  float out = 0.0F;
  swiglu_forward(1, &g1, &u2, &out);
  EXPECT_FLOAT_EQ(out, static_cast<float>(2.0 / (1.0 + std::exp(-1.0))));
}

TEST(KernelGradcheckTest, Bias) {
  const std::int64_t rows = 7;
  const std::int64_t cols = 5;
  std::vector<float> bias = random_vector(idx(cols), 14);
  const std::vector<float> y0 = random_vector(idx(rows * cols), 15);
  const std::vector<float> w = random_vector(y0.size(), 16);
  auto loss = [&] {
    std::vector<float> y = y0;
    add_bias(rows, cols, bias.data(), y.data());
    return weighted_sum(w, y);
  };
  std::vector<float> dbias(idx(cols), 99.0F);
  bias_backward(rows, cols, w.data(), dbias.data());
  check_gradient("bias dbias", bias, dbias, loss);
  std::vector<float> y = y0;
  add_bias(rows, cols, bias.data(), y.data());
  EXPECT_EQ(y[idx(3 * cols + 2)], y0[idx(3 * cols + 2)] + bias[2]);
}

TEST(KernelGradcheckTest, Rope) {
  const std::int64_t seq = 5;
  const std::int64_t rows = 2 * seq;
  const std::int64_t heads = 3;
  const std::int64_t head_dim = 6;
  const double theta = 100.0;  // low, so that every frequency turns noticeably over 5 positions
  std::vector<float> x = random_vector(idx(rows * heads * head_dim), 17);
  const std::vector<float> w = random_vector(x.size(), 18);
  auto loss = [&] {
    std::vector<float> y = x;
    rope_forward(rows, seq, heads, head_dim, theta, y.data());
    return weighted_sum(w, y);
  };
  std::vector<float> dx = w;
  rope_backward(rows, seq, heads, head_dim, theta, dx.data());
  check_gradient("rope dx", x, dx, loss);
}

TEST(KernelGradcheckTest, RopeBackwardInvertsForward) {
  const std::int64_t seq = 7;
  const std::int64_t rows = 3 * seq;
  const std::int64_t heads = 2;
  const std::int64_t head_dim = 8;
  const std::vector<float> x = random_vector(idx(rows * heads * head_dim), 19);
  std::vector<float> y = x;
  rope_forward(rows, seq, heads, head_dim, 10000.0, y.data());
  EXPECT_NE(y, x);
  rope_backward(rows, seq, heads, head_dim, 10000.0, y.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], x[i], 1e-6) << "element " << i;
  }
}

TEST(KernelGradcheckTest, RopeFollowsRotateHalf) {
  // head_dim 4, theta 10000: pair (0, 2) turns by p * 1 and pair (1, 3) by p * 10000^(-1/2).
  const std::int64_t seq = 3;
  std::vector<float> x(idx(seq * 4), 0.0F);
  for (std::int64_t p = 0; p < seq; ++p) {
    x[idx(p * 4 + 0)] = 1.0F;  // (x_0, x_2) = (1, 0)
    x[idx(p * 4 + 1)] = 1.0F;  // (x_1, x_3) = (1, 0)
  }
  rope_forward(seq, seq, 1, 4, 10000.0, x.data());
  for (std::int64_t p = 0; p < seq; ++p) {
    const auto pos = static_cast<double>(p);
    EXPECT_FLOAT_EQ(x[idx(p * 4 + 0)], static_cast<float>(std::cos(pos))) << "position " << p;
    EXPECT_FLOAT_EQ(x[idx(p * 4 + 2)], static_cast<float>(std::sin(pos))) << "position " << p;
    EXPECT_FLOAT_EQ(x[idx(p * 4 + 1)], static_cast<float>(std::cos(pos / 100.0)));
    EXPECT_FLOAT_EQ(x[idx(p * 4 + 3)], static_cast<float>(std::sin(pos / 100.0)));
  }
}

struct AttentionCase {
  std::int64_t batch = 2;
  std::int64_t seq = 5;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 2;
  std::int64_t head_dim = 4;
  std::int64_t rows() const { return batch * seq; }
  std::size_t q_size() const { return idx(rows() * heads * head_dim); }
  std::size_t kv_size() const { return idx(rows() * kv_heads * head_dim); }
};

void attention_gradcheck(const AttentionCase& c) {
  std::vector<float> q = random_vector(c.q_size(), 20, -1.5F, 1.5F);
  std::vector<float> k = random_vector(c.kv_size(), 21, -1.5F, 1.5F);
  std::vector<float> v = random_vector(c.kv_size(), 22);
  const std::vector<float> w = random_vector(c.q_size(), 23);
  auto forward = [&](std::vector<float>& out, std::vector<float>& lse) {
    out.assign(c.q_size(), 0.0F);
    lse.assign(idx(c.rows() * c.heads), 0.0F);
    attention_forward(c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, q.data(), k.data(), v.data(),
                      out.data(), lse.data());
  };
  auto loss = [&] {
    std::vector<float> out;
    std::vector<float> lse;
    forward(out, lse);
    return weighted_sum(w, out);
  };
  std::vector<float> out;
  std::vector<float> lse;
  forward(out, lse);
  std::vector<float> dq(q.size(), 99.0F);
  std::vector<float> dk(k.size(), 99.0F);
  std::vector<float> dv(v.size(), 99.0F);
  attention_backward(c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, q.data(), k.data(), v.data(),
                     out.data(), lse.data(), w.data(), dq.data(), dk.data(), dv.data());
  const std::string tag = " heads " + std::to_string(c.heads) + " kv " + std::to_string(c.kv_heads);
  check_gradient("attention dq" + tag, q, dq, loss);
  check_gradient("attention dk" + tag, k, dk, loss);
  check_gradient("attention dv" + tag, v, dv, loss);

  // Row 0 of each sample sees only key 0: out = v_0 of its kv head and lse = s_00.
  const std::size_t d = idx(c.head_dim);
  const std::int64_t group = c.heads / c.kv_heads;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::size_t row = idx(b * c.seq);
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const std::size_t g = idx(h / group);
      const float* qi = q.data() + (row * idx(c.heads) + idx(h)) * d;
      const float* k0 = k.data() + (row * idx(c.kv_heads) + g) * d;
      const float* v0 = v.data() + (row * idx(c.kv_heads) + g) * d;
      const float* o0 = out.data() + (row * idx(c.heads) + idx(h)) * d;
      double s00 = 0.0;
      for (std::size_t e = 0; e < d; ++e) {
        EXPECT_EQ(o0[e], v0[e]) << "sample " << b << " head " << h << " element " << e;
        s00 += static_cast<double>(qi[e]) * k0[e];
      }
      s00 /= std::sqrt(static_cast<double>(c.head_dim));
      EXPECT_FLOAT_EQ(lse[row * idx(c.heads) + idx(h)], static_cast<float>(s00))
          << "sample " << b << " head " << h;
    }
  }
}

TEST(KernelGradcheckTest, AttentionGroupedQuery) {
  attention_gradcheck(AttentionCase{});
}

TEST(KernelGradcheckTest, AttentionMultiHead) {
  AttentionCase c;
  c.heads = 3;
  c.kv_heads = 3;
  attention_gradcheck(c);
}

TEST(KernelGradcheckTest, AttentionGroupsEqualRepeatedKvHeads) {
  // HF's repeat_kv: GQA equals MHA with kv head g repeated for query heads g*group .. +group-1.
  const AttentionCase c;
  const std::int64_t group = c.heads / c.kv_heads;
  const std::size_t d = idx(c.head_dim);
  const std::vector<float> q = random_vector(c.q_size(), 24);
  const std::vector<float> k = random_vector(c.kv_size(), 25);
  const std::vector<float> v = random_vector(c.kv_size(), 26);
  std::vector<float> k_rep(c.q_size());
  std::vector<float> v_rep(c.q_size());
  for (std::size_t r = 0; r < idx(c.rows()); ++r) {
    for (std::int64_t h = 0; h < c.heads; ++h) {
      for (std::size_t e = 0; e < d; ++e) {
        const std::size_t src = (r * idx(c.kv_heads) + idx(h / group)) * d + e;
        k_rep[(r * idx(c.heads) + idx(h)) * d + e] = k[src];
        v_rep[(r * idx(c.heads) + idx(h)) * d + e] = v[src];
      }
    }
  }
  std::vector<float> out_gqa(c.q_size());
  std::vector<float> out_mha(c.q_size());
  std::vector<float> lse_gqa(idx(c.rows() * c.heads));
  std::vector<float> lse_mha(lse_gqa.size());
  attention_forward(c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, q.data(), k.data(), v.data(),
                    out_gqa.data(), lse_gqa.data());
  attention_forward(c.batch, c.seq, c.heads, c.heads, c.head_dim, q.data(), k_rep.data(),
                    v_rep.data(), out_mha.data(), lse_mha.data());
  EXPECT_EQ(out_gqa, out_mha);
  EXPECT_EQ(lse_gqa, lse_mha);
  // The shared kv head's gradient is the sum of its repeats' gradients.
  const std::vector<float> dout = random_vector(c.q_size(), 27);
  std::vector<float> dq_gqa(c.q_size());
  std::vector<float> dk_gqa(c.kv_size());
  std::vector<float> dv_gqa(c.kv_size());
  std::vector<float> dq_mha(c.q_size());
  std::vector<float> dk_mha(c.q_size());
  std::vector<float> dv_mha(c.q_size());
  attention_backward(c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, q.data(), k.data(), v.data(),
                     out_gqa.data(), lse_gqa.data(), dout.data(), dq_gqa.data(), dk_gqa.data(),
                     dv_gqa.data());
  attention_backward(c.batch, c.seq, c.heads, c.heads, c.head_dim, q.data(), k_rep.data(),
                     v_rep.data(), out_mha.data(), lse_mha.data(), dout.data(), dq_mha.data(),
                     dk_mha.data(), dv_mha.data());
  EXPECT_EQ(dq_gqa, dq_mha);
  for (std::size_t r = 0; r < idx(c.rows()); ++r) {
    for (std::int64_t g = 0; g < c.kv_heads; ++g) {
      for (std::size_t e = 0; e < d; ++e) {
        double sk = 0.0;
        double sv = 0.0;
        for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
          sk += dk_mha[(r * idx(c.heads) + idx(h)) * d + e];
          sv += dv_mha[(r * idx(c.heads) + idx(h)) * d + e];
        }
        const std::size_t at = (r * idx(c.kv_heads) + idx(g)) * d + e;
        EXPECT_NEAR(dk_gqa[at], sk, 1e-6 + 1e-6 * std::abs(sk)) << "row " << r << " kv " << g;
        EXPECT_NEAR(dv_gqa[at], sv, 1e-6 + 1e-6 * std::abs(sv)) << "row " << r << " kv " << g;
      }
    }
  }
}

TEST(KernelGradcheckTest, AttentionIsCausalAndPerSample) {
  // Changing the last token's key and value (sample 0) changes only that row's output, and no
  // row of sample 1; a row of equal scores (q = 0) averages the visible values.
  const AttentionCase c;
  std::vector<float> q = random_vector(c.q_size(), 28);
  std::vector<float> k = random_vector(c.kv_size(), 29);
  std::vector<float> v = random_vector(c.kv_size(), 30);
  const std::size_t d = idx(c.head_dim);
  const std::size_t q_row = idx(c.heads) * d;
  const std::size_t kv_row = idx(c.kv_heads) * d;
  std::fill_n(q.begin() + static_cast<std::ptrdiff_t>(2 * q_row), q_row, 0.0F);  // row 2
  std::vector<float> out(c.q_size());
  std::vector<float> lse(idx(c.rows() * c.heads));
  attention_forward(c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, q.data(), k.data(), v.data(),
                    out.data(), lse.data());
  for (std::int64_t h = 0; h < c.heads; ++h) {
    const std::size_t g = idx(h / (c.heads / c.kv_heads));
    for (std::size_t e = 0; e < d; ++e) {
      const double mean =
          (static_cast<double>(v[g * d + e]) + v[kv_row + g * d + e] + v[2 * kv_row + g * d + e]) /
          3.0;
      EXPECT_NEAR(out[2 * q_row + idx(h) * d + e], mean, 1e-6) << "head " << h;
    }
  }
  const std::size_t last = idx(c.seq - 1);
  for (std::size_t e = 0; e < kv_row; ++e) {
    k[last * kv_row + e] += 0.5F;
    v[last * kv_row + e] -= 0.5F;
  }
  std::vector<float> out2(c.q_size());
  attention_forward(c.batch, c.seq, c.heads, c.kv_heads, c.head_dim, q.data(), k.data(), v.data(),
                    out2.data(), lse.data());
  for (std::size_t r = 0; r < idx(c.rows()); ++r) {
    const bool changed = !std::equal(out.begin() + static_cast<std::ptrdiff_t>(r * q_row),
                                     out.begin() + static_cast<std::ptrdiff_t>((r + 1) * q_row),
                                     out2.begin() + static_cast<std::ptrdiff_t>(r * q_row));
    EXPECT_EQ(changed, r == last) << "row " << r;
  }
}

TEST(KernelGradcheckTest, SoftmaxCrossEntropy) {
  const std::int64_t vocab = 6;
  const std::vector<std::int32_t> targets = {2, 0, 5, 2, 1};
  const std::size_t rows = targets.size();
  std::vector<float> logits = random_vector(rows * idx(vocab), 31, -2.0F, 2.0F);
  // L is the mean row loss: the objective whose gradient the backward returns.
  auto loss = [&] {
    std::vector<float> probs(logits.size());
    std::vector<double> row_loss(rows);
    softmax_cross_entropy(vocab, targets, logits.data(), probs.data(), row_loss.data());
    double sum = 0.0;
    for (const double l : row_loss) {
      sum += l;
    }
    return sum / static_cast<double>(rows);
  };
  std::vector<float> probs(logits.size());
  std::vector<double> row_loss(rows);
  softmax_cross_entropy(vocab, targets, logits.data(), probs.data(), row_loss.data());
  std::vector<float> dlogits(logits.size());
  softmax_cross_entropy_backward(vocab, targets, probs.data(), dlogits.data());
  check_gradient("softmax cross-entropy dlogits", logits, dlogits, loss);
}

}  // namespace
}  // namespace fsdp::backend

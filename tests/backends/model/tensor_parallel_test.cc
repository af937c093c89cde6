// SPDX-License-Identifier: Apache-2.0
// Tensor parallelism in the decoder (docs/design/parallelism.md, "Training it for real"): the
// parameter slices of a Megatron split, the vocabulary-parallel kernels against their whole
// counterparts, and tp decoders (ranks as threads over an in-test group) whose loss and joined
// gradients equal the whole decoder's.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "backends/model/decoder.h"
#include "backends/model/kernels.h"
#include "backends/model/split_comm.h"
#include "core/base/strings.h"
#include "tests/backends/model/decoder_test_util.h"
#include "tests/backends/model/loopback_group.h"

namespace fsdp::backend {
namespace {

// tiny_tp_llama_arch with a vocabulary of 11 (padded to 2 x 6 rows under tp = 2).
DecoderConfig tp_config(std::int64_t tp, std::int64_t tp_rank) {
  DecoderConfig c = decoder_config_of_arch(testing::tiny_tp_llama_arch(), "tp-llama",
                                           /*seq_len=*/5, /*micro_batch_size=*/2, 42)
                        .value();
  c.tp = tp;
  c.tp_rank = tp_rank;
  return c;
}

std::string error_of(const DecoderConfig& c) {
  const Status s = validate(c);
  return s.ok() ? "" : s.error().message();
}

TEST(TensorParallelTest, ValidateNamesWhatTpCannotSplit) {
  EXPECT_EQ(error_of(tp_config(2, 1)), "");
  EXPECT_NE(error_of(tp_config(2, 2)).find("tp_rank must be in [0, 2), got 2"), std::string::npos);
  EXPECT_NE(error_of(tp_config(0, 0)).find("tp must be in [1, "), std::string::npos);
  EXPECT_NE(error_of(tp_config(4, 0)).find("tp=4 must divide kv_heads, got kv_heads = 2"),
            std::string::npos);
  DecoderConfig few_rows = tp_config(2, 0);
  few_rows.vocab = 1;
  EXPECT_NE(error_of(few_rows).find("every tp rank holds real vocabulary rows, got 1"),
            std::string::npos);
  DecoderConfig mlp = testing::tiny_config();
  mlp.tp = 2;
  EXPECT_NE(error_of(mlp).find("tp=2 needs a Llama-family model"), std::string::npos);
}

TEST(TensorParallelTest, SlicesHaveTheLocalShapesAndJoinBackToTheWhole) {
  const ParamValues whole = testing::perturbed_parameters(tp_config(1, 0));
  std::vector<ParamValues> slices;
  for (std::int64_t r = 0; r < 2; ++r) {
    const DecoderConfig c = tp_config(2, r);
    slices.push_back(split_parameters(c, whole));
    const Model local = decoder_model(c).value();
    ASSERT_EQ(slices.back().size(), local.units().size());
    for (std::size_t u = 0; u < local.units().size(); ++u) {
      for (std::size_t p = 0; p < local.units()[u].params().size(); ++p) {
        EXPECT_EQ(static_cast<std::int64_t>(slices.back()[u][p].size()),
                  local.units()[u].params()[p].numel())
            << local.units()[u].params()[p].name();
      }
    }
  }
  EXPECT_EQ(join_parameters(tp_config(2, 0), slices), whole);
  // Column-parallel q_proj: rank 1 holds the second half of the output rows (heads 2, 3);
  // row-parallel o_proj: the second half of each row's input columns; the embedding: vocabulary
  // rows 6..10 and one zero padding row.
  const Model model = decoder_model(tp_config(1, 0)).value();
  const auto& layer = model.units()[1].params();
  std::size_t q = 0;
  std::size_t o = 0;
  for (std::size_t p = 0; p < layer.size(); ++p) {
    q = layer[p].name().ends_with("q_proj.weight") ? p : q;
    o = layer[p].name().ends_with("o_proj.weight") ? p : o;
  }
  const std::vector<float>& wq = whole[1][q];  // [8 rows x 8]
  EXPECT_EQ(slices[1][1][q], std::vector<float>(wq.begin() + 32, wq.end()));
  const std::vector<float>& wo = whole[1][o];  // [8 x 8 columns]
  for (std::size_t row = 0; row < 8; ++row) {
    for (std::size_t col = 0; col < 4; ++col) {
      EXPECT_EQ(slices[1][1][o][row * 4 + col], wo[row * 8 + 4 + col]);
    }
  }
  const std::vector<float>& emb = slices[1][0][0];  // 6 rows x 8
  EXPECT_EQ(std::vector<float>(emb.begin(), emb.begin() + 40),
            std::vector<float>(whole[0][0].begin() + 48, whole[0][0].end()));
  EXPECT_EQ(std::vector<float>(emb.begin() + 40, emb.end()), std::vector<float>(8, 0.0F));
}

TEST(TensorParallelTest, VocabularySlicesReproduceTheWholeCrossEntropyAndEmbedding) {
  constexpr std::int64_t kRows = 3;
  constexpr std::int64_t kVocab = 7;  // slices of 4 rows: [0, 4) and [4, 7) plus one padding
  constexpr std::int64_t kSlice = 4;
  const std::vector<std::int32_t> targets = {1, 5, 6};
  std::vector<float> logits(kRows * kVocab);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    logits[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)) * 3.0);
  }
  std::vector<float> probs(logits.size());
  std::vector<double> loss(kRows);
  softmax_cross_entropy(kVocab, targets, logits.data(), probs.data(), loss.data());
  std::vector<float> dlogits(logits.size());
  softmax_cross_entropy_backward(kVocab, targets, probs.data(), dlogits.data());

  // Each slice's logits (padding column 0), its stats, all gathered member-major.
  std::vector<std::vector<float>> slice_logits(2, std::vector<float>(kRows * kSlice, 0.0F));
  std::vector<float> all_stats(2 * kRows * 3);
  for (std::int64_t r = 0; r < 2; ++r) {
    const std::int64_t valid = std::min(kSlice, kVocab - r * kSlice);
    for (std::int64_t t = 0; t < kRows; ++t) {
      for (std::int64_t j = 0; j < valid; ++j) {
        slice_logits[r][t * kSlice + j] = logits[t * kVocab + r * kSlice + j];
      }
    }
    vocab_parallel_stats(kSlice, valid, r * kSlice, targets, slice_logits[r].data(),
                         all_stats.data() + r * kRows * 3);
  }
  for (std::int64_t r = 0; r < 2; ++r) {
    const std::int64_t valid = std::min(kSlice, kVocab - r * kSlice);
    std::vector<float> p(kRows * kSlice);
    std::vector<double> l(kRows);
    std::vector<float> d(kRows * kSlice);
    vocab_parallel_softmax(kRows, kSlice, valid, 2, all_stats.data(), slice_logits[r].data(),
                           p.data(), l.data());
    vocab_parallel_backward(kSlice, valid, r * kSlice, targets, p.data(), d.data());
    for (std::int64_t t = 0; t < kRows; ++t) {
      EXPECT_NEAR(l[t], loss[t], 1e-6) << "rank " << r << " row " << t;
      for (std::int64_t j = 0; j < kSlice; ++j) {
        const bool real = j < valid;
        EXPECT_NEAR(p[t * kSlice + j], real ? probs[t * kVocab + r * kSlice + j] : 0.0F, 1e-7);
        EXPECT_NEAR(d[t * kSlice + j], real ? dlogits[t * kVocab + r * kSlice + j] : 0.0F, 1e-7);
      }
    }
  }

  // The embedding: the slices' lookups sum to the whole lookup; their backward scatters split
  // the whole one.
  constexpr std::int64_t kHidden = 2;
  std::vector<float> table(kVocab * kHidden);
  for (std::size_t i = 0; i < table.size(); ++i) {
    table[i] = static_cast<float>(i) + 0.5F;
  }
  std::vector<float> whole(kRows * kHidden);
  embedding_forward(targets, kHidden, table.data(), whole.data());
  std::vector<float> sum(kRows * kHidden, 0.0F);
  std::vector<float> dtable(kVocab * kHidden);
  embedding_backward(targets, kVocab, kHidden, whole.data(), dtable.data());
  for (std::int64_t r = 0; r < 2; ++r) {
    const std::int64_t rows = std::min(kSlice, kVocab - r * kSlice);
    std::vector<float> slice_table(kSlice * kHidden, 0.0F);
    std::copy_n(table.begin() + r * kSlice * kHidden, rows * kHidden, slice_table.begin());
    std::vector<float> out(kRows * kHidden);
    embedding_slice_forward(targets, kHidden, r * kSlice, kSlice, slice_table.data(), out.data());
    for (std::size_t i = 0; i < sum.size(); ++i) {
      sum[i] += out[i];
    }
    std::vector<float> dslice(kSlice * kHidden);
    embedding_slice_backward(targets, kHidden, r * kSlice, kSlice, whole.data(), dslice.data());
    for (std::int64_t i = 0; i < rows * kHidden; ++i) {
      EXPECT_EQ(dslice[i], dtable[r * kSlice * kHidden + i]);
    }
  }
  EXPECT_EQ(sum, whole);
}

TEST(TensorParallelTest, SplitDecodersGiveTheWholeLossAndGradients) {
  const DecoderConfig whole_config = tp_config(1, 0);
  const ParamValues whole = testing::perturbed_parameters(whole_config);
  ParamValues whole_grads;
  const double whole_loss = testing::loss_and_grads(whole_config, whole, &whole_grads);

  for (const bool recompute : {false, true}) {
    constexpr std::int64_t kTp = 2;
    testing::LoopbackGroup group(kTp);
    std::vector<testing::LoopbackGroup::Member> members;
    for (std::int64_t r = 0; r < kTp; ++r) {
      members.emplace_back(&group, r);
    }
    std::vector<double> losses(kTp);
    std::vector<ParamValues> grads(kTp);
    std::vector<std::thread> threads;
    for (std::int64_t r = 0; r < kTp; ++r) {
      threads.emplace_back([&, r] {
        const DecoderConfig c = tp_config(kTp, r);
        auto decoder = HostDecoder::make(c, 1, 0, 1).value();
        decoder->set_split_comm(&members[static_cast<std::size_t>(r)]);
        const ParamValues params = split_parameters(c, whole);
        for (std::int32_t u = 0; u < static_cast<std::int32_t>(params.size()); ++u) {
          decoder->set_recompute(u, recompute);
        }
        decoder->begin_step(0);
        if (!recompute) {
          testing::run_microbatch(*decoder, params, 0, &grads[static_cast<std::size_t>(r)]);
        } else {  // forward, then per unit in reverse: recompute and backward
          for (std::int32_t u = 0; u < static_cast<std::int32_t>(params.size()); ++u) {
            decoder->forward(u, 0, testing::const_ptrs(params[static_cast<std::size_t>(u)]));
          }
          grads[static_cast<std::size_t>(r)] = params;
          for (auto u = static_cast<std::int32_t>(params.size()); u-- > 0;) {
            const auto i = static_cast<std::size_t>(u);
            decoder->recompute(u, 0, testing::const_ptrs(params[i]));
            decoder->backward(u, 0, testing::const_ptrs(params[i]),
                              testing::mutable_ptrs(grads[static_cast<std::size_t>(r)][i]));
          }
        }
        losses[static_cast<std::size_t>(r)] = decoder->step_loss();
        EXPECT_TRUE(decoder->status().ok());
      });
    }
    for (std::thread& t : threads) {
      t.join();
    }
    for (std::int64_t r = 0; r < kTp; ++r) {
      EXPECT_NEAR(losses[static_cast<std::size_t>(r)], whole_loss, 1e-6 * whole_loss);
    }
    // Whole tensors (norms, o_proj and down_proj biases) get the same gradient on both ranks.
    const ParamValues joined = join_parameters(tp_config(kTp, 0), grads);
    testing::expect_params_near(joined, whole_grads, 1e-5);
    if (HasFatalFailure()) {
      return;
    }
    // The sites the IR lists, in its order: per layer attention.out, mlp.out forward and
    // mlp.in_grad, attention.in_grad backward; recomputation repeats every unit's forward ones.
    const std::vector<std::string>& sites = members[0].sites;
    const std::int64_t forward_sites = 1 + 2 * whole_config.layers + 1;
    const std::int64_t backward_sites = 2 * whole_config.layers + 1;
    EXPECT_EQ(static_cast<std::int64_t>(sites.size()),
              forward_sites * (recompute ? 2 : 1) + backward_sites);
    EXPECT_EQ(sites.front(), "all-reduce embedding.out");
    EXPECT_EQ(sites[1], "all-reduce attention.out");
    EXPECT_EQ(sites[2], "all-reduce mlp.out");
    EXPECT_EQ(sites[forward_sites - 1], "all-gather head.loss_stats");
    // The embedding's recompute comes last: only its all-reduce repeats.
    EXPECT_EQ(sites.back(),
              recompute ? "all-reduce embedding.out" : "all-reduce attention.in_grad");
  }
}

TEST(TensorParallelTest, ASplitDecoderWithoutItsGroupFailsWithAClearError) {
  const DecoderConfig c = tp_config(2, 0);
  auto decoder = HostDecoder::make(c, 1, 0, 1).value();
  const ParamValues params = split_parameters(c, initial_parameters(c));
  decoder->begin_step(0);
  decoder->forward(0, 0, testing::const_ptrs(params[0]));
  ASSERT_FALSE(decoder->status().ok());
  EXPECT_NE(decoder->status().error().message().find(
                "tp=2 needs its group's communicator (set_split_comm) for embedding.out"),
            std::string::npos);
}

}  // namespace
}  // namespace fsdp::backend

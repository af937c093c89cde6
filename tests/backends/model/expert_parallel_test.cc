// SPDX-License-Identifier: Apache-2.0
// Mixture of experts in the decoder (docs/design/parallelism.md, "Experts for real"): the
// router's top-k with capacity slots on a hand-made case, the expert slices of an ep split (the
// MoE layer's gradients against finite differences and its activation bytes are among
// host_decoder_test.cc's families), and ep decoders (ranks as threads over an
// in-test group, each on its own data) whose losses and joined gradients equal the whole
// decoder's on the same samples.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "backends/model/decoder.h"
#include "backends/model/moe_kernels.h"
#include "tests/backends/model/decoder_test_util.h"
#include "tests/backends/model/loopback_group.h"

namespace fsdp::backend {
namespace {

// tiny_moe_arch as 2 samples of 5 tokens: 10 tokens, 2 of 4 experts each, 5 slots per expert.
DecoderConfig moe_config(std::int64_t ep, std::int64_t ep_rank, std::int64_t experts = 4,
                         std::int64_t top_k = 2) {
  DecoderConfig c =
      decoder_config_of_arch(testing::tiny_moe_arch(experts, top_k), "moe", /*seq_len=*/5,
                             /*micro_batch_size=*/2, 42)
          .value();
  c.ep = ep;
  c.ep_rank = ep_rank;
  EXPECT_TRUE(validate(c).ok()) << validate(c).error().message();
  return c;
}

TEST(ExpertParallelTest, TheRouterTakesTheTopKAndDropsCopiesBeyondTheCapacity) {
  // 3 tokens, 3 experts, top 2, 1 slot per expert. Token 0 picks 2 then 0; token 1 picks 2 (full:
  // dropped) then 1; token 2 ties experts 0 and 1 (the lower first, full: dropped) then 1 (full).
  const std::vector<float> probs = {0.3F, 0.1F, 0.6F, 0.2F, 0.3F, 0.5F, 0.4F, 0.4F, 0.2F};
  std::vector<std::int32_t> expert(6);
  std::vector<float> weight(6);
  std::vector<std::int32_t> slot(6);
  std::vector<std::int32_t> slot_token(3);
  moe_route(3, 3, 2, 1, probs.data(), expert.data(), weight.data(), slot.data(), slot_token.data());
  EXPECT_EQ(expert, (std::vector<std::int32_t>{2, 0, 2, 1, 0, 1}));
  EXPECT_EQ(slot, (std::vector<std::int32_t>{2, 0, -1, 1, -1, -1}));
  EXPECT_EQ(slot_token, (std::vector<std::int32_t>{0, 1, 0}));
  EXPECT_NEAR(weight[0], 0.6 / 0.9, 1e-6);
  EXPECT_NEAR(weight[3], 0.3 / 0.8, 1e-6);
  EXPECT_NEAR(weight[4], 0.5, 1e-6);
  // The combine adds the kept copies only; its backward gives dropped copies no weight gradient.
  const std::vector<float> y = {1.0F, 10.0F, 100.0F};  // hidden 1: slot s holds y[s]
  std::vector<float> out(3, 0.0F);
  moe_combine(3, 2, 1, slot.data(), weight.data(), y.data(), out.data());
  EXPECT_NEAR(out[0], weight[0] * 100.0 + weight[1] * 1.0, 1e-4);
  EXPECT_NEAR(out[1], weight[3] * 10.0, 1e-5);
  EXPECT_EQ(out[2], 0.0F);
  const std::vector<float> dout = {1.0F, 2.0F, 3.0F};
  std::vector<float> dweight(6);
  std::vector<float> dy(3);
  moe_combine_backward(3, 2, 1, 3, slot.data(), weight.data(), y.data(), dout.data(),
                       dweight.data(), dy.data());
  EXPECT_EQ(dweight, (std::vector<float>{100.0F, 1.0F, 0.0F, 20.0F, 0.0F, 0.0F}));
  EXPECT_NEAR(dy[2], weight[0], 1e-6);
  EXPECT_NEAR(dy[1], 2.0 * weight[3], 1e-6);
}

TEST(ExpertParallelTest, AnEpSliceHoldsItsRanksExperts) {
  const DecoderConfig whole = moe_config(1, 0);
  const ParamValues values = initial_parameters(whole);
  const Model whole_model = decoder_model(whole).value();
  const Model local = decoder_model(moe_config(2, 1)).value();
  const ParamValues slice = split_parameters(moe_config(2, 1), values);
  const auto find = [](const Model& m, const std::string& name) {
    const auto& ps = m.units()[1].params();
    for (std::size_t p = 0; p < ps.size(); ++p) {
      if (ps[p].name() == name) {
        return p;
      }
    }
    ADD_FAILURE() << name;
    return std::size_t{0};
  };
  // Local expert 0 of ep rank 1 is global expert 2; the router is whole.
  const std::string e = "model.layers.0.block_sparse_moe.experts.";
  EXPECT_EQ(slice[1][find(local, e + "0.w2.weight")],
            values[1][find(whole_model, e + "2.w2.weight")]);
  const std::string r = "model.layers.0.block_sparse_moe.gate.weight";
  EXPECT_EQ(slice[1][find(local, r)], values[1][find(whole_model, r)]);
  // join(split) is the identity.
  const ParamValues joined =
      join_parameters(moe_config(2, 0), {split_parameters(moe_config(2, 0), values), slice});
  EXPECT_EQ(joined, values);
}

TEST(ExpertParallelTest, EpDecodersGiveTheWholeLossesAndGradients) {
  constexpr std::int64_t kEp = 2;
  // The reference: the whole decoder on each rank's samples; gradients summed over the ranks
  // (what FSDP's reduction forms before its scale).
  const DecoderConfig whole_config = moe_config(1, 0);
  const ParamValues whole = testing::perturbed_parameters(whole_config);
  std::vector<double> whole_losses(kEp);
  ParamValues whole_sum;
  for (std::int64_t r = 0; r < kEp; ++r) {
    auto d = HostDecoder::make(whole_config, 1, r, kEp).value();
    d->begin_step(0);
    ParamValues g;
    testing::run_microbatch(*d, whole, 0, &g);
    whole_losses[static_cast<std::size_t>(r)] = d->step_loss();
    if (r == 0) {
      whole_sum = g;
    } else {
      for (std::size_t u = 0; u < g.size(); ++u) {
        for (std::size_t p = 0; p < g[u].size(); ++p) {
          for (std::size_t e = 0; e < g[u][p].size(); ++e) {
            whole_sum[u][p][e] += g[u][p][e];
          }
        }
      }
    }
  }
  for (const bool recompute : {false, true}) {
    testing::LoopbackGroup group(kEp);
    std::vector<testing::LoopbackGroup::Member> members;
    for (std::int64_t r = 0; r < kEp; ++r) {
      members.emplace_back(&group, r);
    }
    std::vector<double> losses(kEp);
    std::vector<ParamValues> grads(kEp);
    std::vector<std::thread> threads;
    for (std::int64_t r = 0; r < kEp; ++r) {
      threads.emplace_back([&, r] {
        const DecoderConfig c = moe_config(kEp, r);
        auto decoder = HostDecoder::make(c, 1, r, kEp).value();
        decoder->set_split_comm(&members[static_cast<std::size_t>(r)]);
        const ParamValues params = split_parameters(c, whole);
        ParamValues& g = grads[static_cast<std::size_t>(r)];
        decoder->begin_step(0);
        if (!recompute) {
          testing::run_microbatch(*decoder, params, 0, &g);
        } else {
          for (std::int32_t u = 0; u < static_cast<std::int32_t>(params.size()); ++u) {
            decoder->set_recompute(u, true);
            decoder->forward(u, 0, testing::const_ptrs(params[static_cast<std::size_t>(u)]));
          }
          g = params;
          for (auto u = static_cast<std::int32_t>(params.size()); u-- > 0;) {
            const auto i = static_cast<std::size_t>(u);
            decoder->recompute(u, 0, testing::const_ptrs(params[i]));
            decoder->backward(u, 0, testing::const_ptrs(params[i]), testing::mutable_ptrs(g[i]));
          }
        }
        losses[static_cast<std::size_t>(r)] = decoder->step_loss();
        EXPECT_TRUE(decoder->status().ok()) << decoder->status().error().message();
      });
    }
    for (std::thread& t : threads) {
      t.join();
    }
    for (std::int64_t r = 0; r < kEp; ++r) {
      const auto i = static_cast<std::size_t>(r);
      EXPECT_NEAR(losses[i], whole_losses[i], 1e-6 * whole_losses[i]) << "rank " << r;
    }
    // Dense gradients are per rank (FSDP sums them); an expert's already holds both ranks'
    // tokens, so rank 0's dense part plus rank 1's dense part, and each rank's experts.
    const Model local = decoder_model(moe_config(kEp, 0)).value();
    std::vector<ParamValues> summed = grads;
    for (std::size_t u = 0; u < local.units().size(); ++u) {
      for (std::size_t p = 0; p < local.units()[u].params().size(); ++p) {
        if (local.units()[u].params()[p].expert()) {
          continue;
        }
        for (std::size_t e = 0; e < summed[0][u][p].size(); ++e) {
          summed[0][u][p][e] += grads[1][u][p][e];
        }
      }
    }
    const ParamValues joined = join_parameters(moe_config(kEp, 0), summed);
    testing::expect_params_near(joined, whole_sum, 1e-5);
    if (HasFatalFailure()) {
      return;
    }
    // Per layer: dispatch and combine forward (again in a recompute), combine_grad and
    // dispatch_grad backward, as the IR lists them.
    const std::vector<std::string>& sites = members[0].sites;
    const std::int64_t per_layer = recompute ? 6 : 4;
    ASSERT_EQ(static_cast<std::int64_t>(sites.size()), per_layer * whole_config.layers);
    EXPECT_EQ(sites[0], "all-to-all moe.dispatch");
    EXPECT_EQ(sites[1], "all-to-all moe.combine");
    EXPECT_EQ(sites.back(), "all-to-all moe.dispatch_grad");
  }
}

TEST(ExpertParallelTest, ImpossibleSplitsAreOneLineErrors) {
  DecoderConfig c = moe_config(1, 0);
  c.ep = 3;
  EXPECT_NE(validate(c).error().message().find("ep=3 must divide experts, got experts = 4"),
            std::string::npos);
  c = moe_config(1, 0);
  c.ep = 2;
  c.tp = 2;
  EXPECT_NE(validate(c).error().message().find("together are not trained"), std::string::npos);
  c = moe_config(1, 0);
  c.capacity_factor = 1.1;  // 2 x 1.1 x 10 / 4 = 5.5 slots
  EXPECT_NE(validate(c).error().message().find("slots per expert) must be a whole number"),
            std::string::npos);
  DecoderConfig dense = testing::tiny_llama_config();
  dense.ep = 2;
  EXPECT_NE(validate(dense).error().message().find("ep=2 needs a mixture-of-experts model"),
            std::string::npos);
}

}  // namespace
}  // namespace fsdp::backend

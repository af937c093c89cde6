// SPDX-License-Identifier: Apache-2.0
// The decoder's description: config validation, the Model it declares, the seeded initial
// weights and the synthetic token data.
#include "backends/model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/base/strings.h"
#include "tests/backends/model/decoder_test_util.h"

#include <gtest/gtest.h>

namespace fsdp::backend {
namespace {

using testing::tiny_config;

std::string error_of(const DecoderConfig& config) {
  const Status status = validate(config);
  return status.ok() ? std::string("ok") : status.error().message();
}

TEST(DecoderConfigTest, DefaultsAreValid) {
  EXPECT_TRUE(validate(DecoderConfig{}).ok());
}

TEST(DecoderConfigTest, RejectsSizesBelowOne) {
  const std::pair<std::int64_t DecoderConfig::*, const char*> fields[] = {
      {&DecoderConfig::vocab, "vocab"},     {&DecoderConfig::hidden, "hidden"},
      {&DecoderConfig::ffn, "ffn"},         {&DecoderConfig::layers, "layers"},
      {&DecoderConfig::seq_len, "seq_len"}, {&DecoderConfig::micro_batch_size, "micro_batch_size"}};
  DecoderConfig c;
  for (const auto& [field, name] : fields) {
    for (const std::int64_t bad : {0, -3}) {
      c = {};
      c.*field = bad;
      EXPECT_EQ(error_of(c), str_cat("decoder config: ", name, " must be >= 1, got ", bad));
    }
  }
  const Expected<Model> model = decoder_model(c);
  ASSERT_FALSE(model.has_value());
  EXPECT_EQ(model.error().code(), ErrorCode::kInvalidArgument);
}

TEST(DecoderConfigTest, RejectsSizesBeyondBlasIntegers) {
  DecoderConfig c;
  c.vocab = std::int64_t{1} << 31;
  EXPECT_EQ(error_of(c), "decoder config: vocab must be <= 2147483647, got 2147483648");
  c = {};
  c.seq_len = 1 << 20;
  c.micro_batch_size = 1 << 12;
  EXPECT_EQ(error_of(c),
            "decoder config: tokens per microbatch (micro_batch_size x seq_len) must be <= "
            "2147483647, got 4294967296");
}

TEST(DecoderConfigTest, RejectsProductsBeyondInt64) {
  DecoderConfig c;
  c.hidden = std::numeric_limits<std::int32_t>::max();
  c.ffn = std::numeric_limits<std::int32_t>::max();
  const Status status = validate(c);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code(), ErrorCode::kOutOfRange);
  EXPECT_NE(status.error().message().find("overflows int64"), std::string::npos)
      << status.error().message();
  c = {};
  c.hidden = 1 << 20;
  c.ffn = 1 << 20;
  c.layers = 1 << 21;  // 2^21 layers of 2^43 bytes each
  const Status layers = validate(c);
  ASSERT_FALSE(layers.ok());
  EXPECT_NE(layers.error().message().find("all layer bytes"), std::string::npos)
      << layers.error().message();
}

TEST(DecoderModelTest, UnitsParamsAndShapes) {
  const DecoderConfig c = tiny_config();
  const Model model = decoder_model(c).value();
  ASSERT_EQ(model.num_units(), c.layers + 2);
  EXPECT_EQ(model.units().front().name(), "embedding");
  EXPECT_EQ(model.units()[1].name(), "layers.0");
  EXPECT_EQ(model.units()[2].name(), "layers.1");
  EXPECT_EQ(model.units().back().name(), "head");
  const std::vector<std::vector<std::pair<std::string, std::vector<std::int64_t>>>> expected = {
      {{"embedding.weight", {c.vocab, c.hidden}}},
      {{"layers.0.norm.weight", {c.hidden}},
       {"layers.0.w1.weight", {c.ffn, c.hidden}},
       {"layers.0.w2.weight", {c.hidden, c.ffn}}},
      {{"layers.1.norm.weight", {c.hidden}},
       {"layers.1.w1.weight", {c.ffn, c.hidden}},
       {"layers.1.w2.weight", {c.hidden, c.ffn}}},
      {{"head.norm.weight", {c.hidden}}, {"head.out.weight", {c.vocab, c.hidden}}}};
  std::int64_t documented = 0;
  for (std::size_t u = 0; u < expected.size(); ++u) {
    const Unit& unit = model.units()[u];
    EXPECT_EQ(unit.parent(), Unit::kNoParent);
    ASSERT_EQ(unit.params().size(), expected[u].size()) << unit.name();
    for (std::size_t p = 0; p < expected[u].size(); ++p) {
      const Param& param = unit.params()[p];
      EXPECT_EQ(param.name(), expected[u][p].first);
      const std::vector<std::int64_t> dims(param.shape().dims().begin(),
                                           param.shape().dims().end());
      EXPECT_EQ(dims, expected[u][p].second) << param.name();
      EXPECT_EQ(param.dtype(), DType::kFp32);
      EXPECT_TRUE(param.requires_grad());
      std::int64_t numel = 1;
      for (const std::int64_t d : expected[u][p].second) {
        numel *= d;
      }
      documented += numel;
    }
  }
  EXPECT_EQ(model.num_parameters(), documented);
  EXPECT_EQ(model.num_parameters(),
            2 * c.vocab * c.hidden + c.layers * (c.hidden + 2 * c.ffn * c.hidden) + c.hidden);
  EXPECT_EQ(model.param_bytes(), 4 * documented);
}

TEST(DecoderModelTest, FlopsCountTheMatmuls) {
  const DecoderConfig c = tiny_config();
  const Model model = decoder_model(c).value();
  EXPECT_EQ(model.units()[0].flops().matmul, 0);  // a lookup
  EXPECT_EQ(model.units()[1].flops().matmul, 2 * c.hidden * c.ffn + 2 * c.ffn * c.hidden);
  EXPECT_EQ(model.units().back().flops().matmul, 2 * c.hidden * c.vocab);
  EXPECT_EQ(model.forward_flops_per_token(c.seq_len).value(),
            c.layers * 4 * c.hidden * c.ffn + 2 * c.hidden * c.vocab);
}

TEST(DecoderInitTest, ShapesNormsAndScale) {
  const DecoderConfig c = tiny_config();
  const Model model = decoder_model(c).value();
  const ParamValues params = initial_parameters(c);
  ASSERT_EQ(params.size(), model.units().size());
  for (std::size_t u = 0; u < params.size(); ++u) {
    ASSERT_EQ(params[u].size(), model.units()[u].params().size());
    for (std::size_t p = 0; p < params[u].size(); ++p) {
      const Param& param = model.units()[u].params()[p];
      ASSERT_EQ(static_cast<std::int64_t>(params[u][p].size()), param.numel()) << param.name();
      if (param.shape().ndim() == 1) {
        for (const float w : params[u][p]) {
          EXPECT_EQ(w, 1.0F) << param.name();
        }
        continue;
      }
      const double fan_in = param.name().ends_with("w2.weight") ? static_cast<double>(c.ffn)
                                                                : static_cast<double>(c.hidden);
      const double bound = u == 0 ? 1.0 : 1.0 / std::sqrt(fan_in);
      std::set<float> distinct;
      for (const float w : params[u][p]) {
        EXPECT_LE(std::fabs(w), bound) << param.name();
        distinct.insert(w);
      }
      EXPECT_GT(distinct.size(), params[u][p].size() / 2) << param.name();
    }
  }
}

TEST(DecoderInitTest, DeterministicFromTheSeed) {
  DecoderConfig c = tiny_config();
  EXPECT_EQ(initial_parameters(c), initial_parameters(c));
  const ParamValues first = initial_parameters(c);
  c.seed += 1;
  EXPECT_NE(initial_parameters(c), first);
}

TEST(DecoderDataTest, GlobalSampleIndicesAreDistinctAndDense) {
  const DecoderConfig c = tiny_config();
  constexpr std::int64_t kMb = 3;
  constexpr std::int64_t kWorld = 2;
  std::set<std::int64_t> seen;
  for (std::int64_t step = 0; step < 2; ++step) {
    for (std::int64_t r = 0; r < kWorld; ++r) {
      for (std::int64_t mb = 0; mb < kMb; ++mb) {
        for (std::int64_t i = 0; i < c.micro_batch_size; ++i) {
          seen.insert(global_sample_index(c, kMb, kWorld, step, mb, r, i));
        }
      }
    }
  }
  const std::int64_t count = 2 * kWorld * kMb * c.micro_batch_size;
  EXPECT_EQ(static_cast<std::int64_t>(seen.size()), count);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), count - 1);
}

TEST(DecoderDataTest, TokensAreInRangeDeterministicAndMostlyPredictable) {
  DecoderConfig c;
  c.vocab = 50;
  c.seq_len = 64;
  // The successor of a token is a fixed function of it, except for the noise: count how often a
  // token's successor agrees with the most frequent successor of that token.
  std::vector<std::vector<std::int64_t>> counts(50, std::vector<std::int64_t>(50, 0));
  std::int64_t pairs = 0;
  for (std::int64_t s = 0; s < 200; ++s) {
    const std::vector<std::int32_t> tokens = sample_tokens(c, s);
    ASSERT_EQ(static_cast<std::int64_t>(tokens.size()), c.seq_len + 1);
    EXPECT_EQ(tokens, sample_tokens(c, s));
    for (std::size_t j = 0; j < tokens.size(); ++j) {
      ASSERT_GE(tokens[j], 0);
      ASSERT_LT(tokens[j], c.vocab);
      if (j > 0) {
        ++counts[static_cast<std::size_t>(tokens[j - 1])][static_cast<std::size_t>(tokens[j])];
        ++pairs;
      }
    }
  }
  std::int64_t predictable = 0;
  for (const auto& row : counts) {
    predictable += *std::max_element(row.begin(), row.end());
  }
  const double fraction = static_cast<double>(predictable) / static_cast<double>(pairs);
  EXPECT_GT(fraction, 0.8);   // 7 in 8 follow the table (plus noise that hits it by chance)
  EXPECT_LT(fraction, 0.97);  // but not all: there is noise
  EXPECT_NE(sample_tokens(c, 0), sample_tokens(c, 1));
  DecoderConfig other = c;
  other.seed = 2;
  EXPECT_NE(sample_tokens(c, 0), sample_tokens(other, 0));
}

}  // namespace
}  // namespace fsdp::backend

// SPDX-License-Identifier: Apache-2.0
// End-to-end tests of `fsdpsim sweep` through the command function, on a two-layer model so that
// every configuration simulates quickly; plus the --prefetch item parser. The engine's own tests
// (enumeration, pool, front) are in tests/sweep.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "cli/subcommands.h"
#include "cli/sweep_format.h"
#include "core/base/strings.h"
#include "core/policy/framework_profile.h"
#include "tests/cli/cli_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fsdp::cli {
namespace {

using testing::Result;

std::string write_temp(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << contents;
  return path;
}

// Two layers of hidden size 256: every configuration simulates in milliseconds.
std::string tiny_model() { return FSDP_SOURCE_DIR "/tests/cli/testdata/tiny_llama.json"; }

Result run_sweep(std::vector<std::string> args) {
  return testing::run_command(&run_sweep_command, std::move(args));
}

// 4 ranks: zero3 (dp=4, padded and unpadded) and hsdp (dp_outer=2,dp_inner=2, padded only),
// 2 microbatch counts, 2 prefetch depths, both stream modes: 24 configurations. `overrides`
// replace or add options ({"--ranks", "1"}); an empty value drops the option.
std::vector<std::string> small_sweep(std::vector<std::pair<std::string, std::string>> overrides = {},
                                     std::vector<std::string> flags = {}) {
  std::vector<std::pair<std::string, std::string>> options = {
      {"--model", tiny_model()}, {"--ranks", "4"},      {"--strategies", "zero3,hsdp"},
      {"--microbatches", "1,2"}, {"--prefetch", "0,1"}, {"--seq-len", "256"}};
  for (const auto& [key, value] : overrides) {
    auto it = std::find_if(options.begin(), options.end(),
                           [&](const auto& kv) { return kv.first == key; });
    if (it == options.end()) {
      options.emplace_back(key, value);
    } else {
      it->second = value;
    }
  }
  std::vector<std::string> args;
  for (const auto& [key, value] : options) {
    if (!value.empty()) {
      args.push_back(key);
      args.push_back(value);
    }
  }
  args.insert(args.end(), flags.begin(), flags.end());
  return args;
}

nlohmann::json sweep_json(std::vector<std::pair<std::string, std::string>> overrides = {}) {
  overrides.emplace_back("--format", "json");
  const Result r = run_sweep(small_sweep(std::move(overrides)));
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

// a dominates b: at least as fast per microbatch and as small, strictly better in one.
// a has at least b's tokens/s (tokens per step over step time, cross-multiplied) and at most its
// peak reserved memory, and is strictly better in one.
bool dominates(const nlohmann::json& a, const nlohmann::json& b) {
  const auto ta = static_cast<__int128>(a["tokens_per_step"].get<std::int64_t>()) *
                  b["step_time_ps"].get<std::int64_t>();
  const auto tb = static_cast<__int128>(b["tokens_per_step"].get<std::int64_t>()) *
                  a["step_time_ps"].get<std::int64_t>();
  const auto ma = a["peak_reserved_bytes"].get<std::int64_t>();
  const auto mb = b["peak_reserved_bytes"].get<std::int64_t>();
  return ta >= tb && ma <= mb && (ta > tb || ma < mb);
}

TEST(SweepCommandTest, PrefetchItemsAreDepthsOrPolicies) {
  EXPECT_EQ(*parse_sweep_prefetch("0"), PrefetchPolicy::none());
  EXPECT_EQ(*parse_sweep_prefetch("2"), PrefetchPolicy::next_units(2).value());
  EXPECT_EQ(*parse_sweep_prefetch(" next(3) "), PrefetchPolicy::next_units(3).value());
  EXPECT_EQ(*parse_sweep_prefetch("budget(1000)"), PrefetchPolicy::element_budget(1000).value());
  EXPECT_FALSE(parse_sweep_prefetch("-1").has_value());
  EXPECT_FALSE(parse_sweep_prefetch("9999999999").has_value());
}

TEST(SweepCommandTest, TextTableMarksTheFrontAndSummarises) {
  const Result r = run_sweep(small_sweep());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;  // no progress bar when stderr is not a terminal
  EXPECT_NE(r.out.find("sweep: "), std::string::npos);
  EXPECT_NE(r.out.find("dp_outer=2,dp_inner=2"), std::string::npos);
  EXPECT_NE(r.out.find("unpadded"), std::string::npos);
  EXPECT_NE(r.out.find("24 configurations: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  * "), std::string::npos);
  const Result front = run_sweep(small_sweep({}, {"--front-only"}));
  ASSERT_EQ(front.code, 0) << front.err;
  EXPECT_LT(front.out.size(), r.out.size());
  // Table rows start with the right-aligned index; with --front-only each one is marked.
  int rows = 0;
  std::istringstream lines(front.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > 7 && std::isdigit(static_cast<unsigned char>(line[4])) != 0 &&
        line.substr(5, 2) == "  ") {
      ++rows;
      EXPECT_EQ(line[7], '*') << line;
    }
  }
  EXPECT_GE(rows, 1);
}

// --recompute LIST is a dimension of the space: every configuration once per mode, the mode in
// the text table and the JSON; the bare flag is full.
TEST(SweepCommandTest, RecomputeIsADimension) {
  // zero3 on dp=4 with one microbatch count, prefetch depth and stream mode; both layouts unless
  // `extra` says otherwise.
  const auto zero3 = [](std::vector<std::pair<std::string, std::string>> extra,
                        std::vector<std::string> flags = {}) {
    std::vector<std::pair<std::string, std::string>> options = {{"--strategies", "zero3"},
                                                                {"--microbatches", "1"},
                                                                {"--prefetch", "1"},
                                                                {"--streams", "separate"}};
    options.insert(options.end(), extra.begin(), extra.end());
    const Result r = run_sweep(small_sweep(options, std::move(flags)));
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  };
  const nlohmann::json j = nlohmann::json::parse(
      zero3({{"--recompute", "none,full,selective-op"}, {"--format", "json"}}));
  const auto& configs = j["configurations"];
  ASSERT_EQ(configs.size(), 2u * 3u);  // padded, unpadded x three modes
  std::vector<std::string> modes;
  for (const auto& c : configs) {
    modes.push_back(c["recompute"].get<std::string>());
  }
  EXPECT_EQ(modes, (std::vector<std::string>{"none", "full", "selective-op", "none", "full",
                                             "selective-op"}));
  // Less kept, more recomputed: memory falls and time grows from none to full.
  EXPECT_GT(configs[0]["peak_bytes"].get<std::int64_t>(),
            configs[2]["peak_bytes"].get<std::int64_t>());
  EXPECT_GT(configs[2]["peak_bytes"].get<std::int64_t>(),
            configs[1]["peak_bytes"].get<std::int64_t>());
  EXPECT_LT(configs[0]["step_time_ps"].get<std::int64_t>(),
            configs[1]["step_time_ps"].get<std::int64_t>());
  const std::string text =
      zero3({{"--layouts", "padded"}, {"--recompute", "selective-layer:2,core-attention"}});
  EXPECT_NE(text.find(" recompute "), std::string::npos) << text;
  EXPECT_NE(text.find(" selective-layer:2 "), std::string::npos) << text;
  EXPECT_NE(text.find(" core-attention "), std::string::npos) << text;
  EXPECT_NE(text.find("2 configurations: "), std::string::npos) << text;
  // Without --recompute every configuration is none; a bare --recompute is full.
  const auto first_mode = [&](std::vector<std::string> flags) {
    return nlohmann::json::parse(zero3({{"--layouts", "padded"}, {"--format", "json"}},
                                       std::move(flags)))["configurations"][0]["recompute"];
  };
  EXPECT_EQ(first_mode({}), "none");
  EXPECT_EQ(first_mode({"--recompute"}), "full");
  const Result bad = run_sweep(small_sweep({{"--recompute", "none,sometimes"}}));
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err,
            "fsdpsim: error: --recompute: 'sometimes': expected none, full, selective-op, "
            "selective-layer:K or core-attention\n");
}

TEST(SweepCommandTest, JsonParetoFrontIsExactlyTheUndominatedFittingSet) {
  const nlohmann::json j = sweep_json();
  const auto& configs = j["configurations"];
  ASSERT_EQ(configs.size(), 24u);
  EXPECT_EQ(j["summary"]["configurations"], 24);
  std::size_t on_front = 0;
  for (const auto& c : configs) {
    ASSERT_FALSE(c.contains("error")) << c.dump();
    ASSERT_TRUE(c["fits"].get<bool>());
    bool dominated = false;
    for (const auto& other : configs) {
      dominated = dominated || dominates(other, c);
    }
    EXPECT_EQ(c["pareto"].get<bool>(), !dominated) << c.dump();
    on_front += c["pareto"].get<bool>() ? 1 : 0;
  }
  EXPECT_GE(on_front, 1u);
  EXPECT_EQ(j["pareto_front"].size(), on_front);
  EXPECT_EQ(j["summary"]["pareto"], on_front);
}

TEST(SweepCommandTest, ConfigurationsThatDoNotFitAreNeverOnTheFront) {
  const nlohmann::json roomy = sweep_json();
  std::int64_t least_reserved = INT64_MAX;
  std::int64_t most_reserved = 0;
  for (const auto& c : roomy["configurations"]) {
    least_reserved = std::min(least_reserved, c["peak_reserved_bytes"].get<std::int64_t>());
    most_reserved = std::max(most_reserved, c["peak_reserved_bytes"].get<std::int64_t>());
  }
  // A device that holds the smallest reservation but not the largest: some configurations fit,
  // some do not.
  ASSERT_LT(least_reserved, most_reserved);
  const std::int64_t capacity = least_reserved;
  // The device also holds the runtime's CUDA context and NCCL buffers, outside the allocator.
  const std::int64_t runtime = FrameworkProfile().runtime_memory().outside_allocator_bytes;
  const std::string hardware = write_temp(
      "fsdpsim_sweep_small_device.json",
      str_cat(R"({"name": "small", "devices_per_node": 4, "memory_bytes": )", capacity + runtime,
              R"(, "peak_bf16_flops": 989000000000000, "peak_fp32_flops": 67000000000000,
              "hbm_bytes_per_s": 3350000000000, "intra_node_bytes_per_s": 450000000000,
              "intra_node_latency_ns": 3000, "inter_node_bytes_per_s": 50000000000,
              "inter_node_latency_ns": 10000})"));
  const nlohmann::json tight = sweep_json({{"--hardware", hardware}});
  std::int64_t no_fit = 0;
  std::int64_t front = 0;
  for (const auto& c : tight["configurations"]) {
    const bool fits = c["fits"].get<bool>();
    // The one verdict: the reservation (which holds every allocated byte; on a tight device the
    // allocator releases cached segments before it gives up) within the capacity.
    EXPECT_EQ(fits, c["peak_reserved_bytes"].get<std::int64_t>() <= capacity) << c.dump();
    if (c["peak_bytes"].get<std::int64_t>() > capacity) {
      EXPECT_FALSE(fits) << c.dump();
    }
    EXPECT_EQ(c["headroom_bytes"].get<std::int64_t>(),
              capacity - c["peak_reserved_bytes"].get<std::int64_t>())
        << c.dump();
    no_fit += fits ? 0 : 1;
    if (c["pareto"].get<bool>()) {
      ++front;
      EXPECT_TRUE(fits) << c.dump();
    } else if (fits) {
      bool dominated = false;
      for (const auto& other : tight["configurations"]) {
        dominated = dominated || (other["fits"].get<bool>() && dominates(other, c));
      }
      EXPECT_TRUE(dominated) << c.dump();
    }
  }
  EXPECT_GT(no_fit, 0);
  EXPECT_GT(front, 0);
  EXPECT_EQ(tight["summary"]["do_not_fit"], no_fit);
  const Result text = run_sweep(small_sweep({{"--hardware", hardware}}));
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find(" NO\n"), std::string::npos);
  EXPECT_NE(text.out.find(str_cat(no_fit, " do not fit")), std::string::npos);
}

TEST(SweepCommandTest, SameOutputWithOneOrTwoJobs) {
  const Result one = run_sweep(small_sweep({{"--jobs", "1"}, {"--format", "json"}}));
  const Result two = run_sweep(small_sweep({{"--jobs", "2"}, {"--format", "json"}}));
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_EQ(one.out, two.out);
  const Result text_one = run_sweep(small_sweep({{"-j", "1"}, {"--sort", "memory"}}));
  const Result text_two = run_sweep(small_sweep({{"-j", "2"}, {"--sort", "memory"}}));
  ASSERT_EQ(text_one.code, 0) << text_one.err;
  EXPECT_EQ(text_one.out, text_two.out);
}

TEST(SweepCommandTest, BadInputsAreOneLineErrors) {
  using Overrides = std::vector<std::pair<std::string, std::string>>;
  const std::vector<std::pair<Overrides, std::string>> cases = {
      {{{"--microbatches", "0"}}, "--microbatches"},
      {{{"--microbatches", "1,,2"}}, "empty item"},
      {{{"--strategies", "zero9"}}, "--strategies"},
      {{{"--prefetch", "-1"}}, "--prefetch"},
      {{{"--layouts", "diagonal"}}, "--layouts"},
      {{{"--streams", "both"}}, "--streams"},
      {{{"--dp-inner", "3"}}, "does not divide"},
      {{{"--hardware", "tpu"}}, "--hardware"},
      {{{"--model", "/nonexistent/model.json"}}, "--model"},
      {{{"--ranks", "1"}, {"--strategies", "hsdp"}}, "no configuration"},
      {{{"--seq-len", "0"}}, "--seq-len"},
      // The options every configuration shares are checked once, before any simulation.
      {{{"--optimizer", "lion"}}, "--optimizer"},
      {{{"--main-params", "fp8"}}, "--main-params"},
      {{{"--max-inflight-all-gathers", "-1"}}, "--max-inflight-all-gathers"},
  };
  for (const auto& [overrides, needle] : cases) {
    const Result r = run_sweep(small_sweep(overrides));
    EXPECT_EQ(r.code, 1) << needle << ": " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  for (const std::vector<std::string>& usage :
       {std::vector<std::string>{"--format", "xml"}, {"--sort", "speed"}, {"--jobs", "-2"},
        {"--nodes", "0"}, {"--bogus"}}) {
    const Result r = run_sweep(small_sweep({}, usage));
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}


// --framework (and the precision flags) apply to every point of the sweep.
TEST(SweepCommandTest, FrameworkAppliesToEveryConfiguration) {
  const nlohmann::json megatron = sweep_json();
  const nlohmann::json fsdp2 =
      sweep_json({{"--framework", "fsdp2"}, {"--reduce-dtype", "fp32"}});
  ASSERT_EQ(megatron["configurations"].size(), fsdp2["configurations"].size());
  std::size_t moved = 0;
  for (std::size_t i = 0; i < fsdp2["configurations"].size(); ++i) {
    const auto& a = megatron["configurations"][i];
    const auto& b = fsdp2["configurations"][i];
    EXPECT_FALSE(b.contains("error")) << b.dump();
    moved += a["peak_reserved_bytes"] != b["peak_reserved_bytes"] ? 1 : 0;
  }
  // fp32 partial grads, transient fp32 main grads and no weight shard: most peaks move (a few
  // keep their reserved segments).
  EXPECT_GT(2 * moved, fsdp2["configurations"].size());
  const Result bad = run_sweep(small_sweep({{"--framework", "zero"}}));
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--framework is 'zero'"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace fsdp::cli

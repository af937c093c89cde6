// SPDX-License-Identifier: Apache-2.0
// torchtitan job configs into run options (planner/torchtitan_config.h), profiles
// (planner/run_profile.h) and their layering under the command line: torchtitan's own llama3 8B
// and 70B files (tests/cli/testdata/torchtitan/), older releases' field names, and the errors.
#include "planner/torchtitan_config.h"

#include <set>
#include <string>
#include <vector>

#include "core/model/model_presets.h"
#include "planner/run_profile.h"

#include <gtest/gtest.h>

namespace fsdp::planner {
namespace {

std::string testdata(const std::string& name) {
  return std::string(FSDP_SOURCE_DIR) + "/tests/cli/testdata/torchtitan/" + name;
}

// The preset a flavor should map to: the Llama 3.1 one when this build has it.
std::string preset_for(const std::string& v31, const std::string& v3) {
  return find_model_preset(v31) != nullptr ? v31 : v3;
}

auto given_set(std::set<std::string> names) {
  return
      [names = std::move(names)](std::string_view n) { return names.count(std::string(n)) != 0; };
}

bool one_line(const std::string& s) {
  return !s.empty() && s.find('\n') == std::string::npos;
}

TEST(TorchtitanConfigTest, Llama3_8bMapsEveryField) {
  auto c = read_torchtitan_config(testdata("llama3_8b.toml"));
  ASSERT_TRUE(c.has_value()) << c.error().message();
  const RunOptionsPatch& o = c->options;
  EXPECT_EQ(o.model, preset_for("llama-3.1-8b", "llama-3-8b"));
  EXPECT_EQ(o.framework, "fsdp2");
  EXPECT_EQ(o.seq_len, 8192);
  EXPECT_EQ(o.micro_batch_size, 1);
  EXPECT_EQ(c->local_batch_size, 1);
  EXPECT_EQ(c->global_batch_size, -1);
  EXPECT_EQ(o.recompute, "selective-op");  // mode selective, selective_ac_option op
  EXPECT_EQ(o.compile, false);
  EXPECT_EQ(o.compute_dtype, "bf16");  // converters commented out
  EXPECT_EQ(o.fp8_all_gather, false);
  EXPECT_EQ(o.param_dtype, "bf16");   // torchtitan's default mixed_precision_param
  EXPECT_EQ(o.reduce_dtype, "fp32");  // and mixed_precision_reduce
  EXPECT_EQ(o.optimizer, "adam");
  EXPECT_EQ(o.strategy, "zero3");
  EXPECT_EQ(o.reshard_after_forward, "all-but-last");
  EXPECT_EQ(o.sequence_parallel, false);
  EXPECT_FALSE(o.mesh.has_value());  // data_parallel_shard_degree = -1
  EXPECT_FALSE(o.microbatches.has_value());
  EXPECT_EQ(c->dp_replicate, 1);
  EXPECT_EQ(c->dp_shard, -1);
  EXPECT_EQ(c->tp, 1);
  EXPECT_TRUE(c->model_error.empty());
  EXPECT_FALSE(config_gpus(*c).has_value());
  EXPECT_FALSE(config_global_batch(*c).has_value());
  const std::vector<std::string> ignored = {
      "job.dump_folder",
      "job.description",
      "profiling.enable_profiling",
      "profiling.save_traces_folder",
      "profiling.profile_freq",
      "metrics.log_freq",
      "metrics.enable_tensorboard",
      "metrics.save_tb_folder",
      "model.hf_assets_path",
      "optimizer.lr",
      "optimizer.eps",
      "lr_scheduler.warmup_steps",
      "training.max_norm",
      "training.steps",
      "training.dataset",
      "checkpoint.enable",
      "checkpoint.folder",
      "checkpoint.interval",
      "checkpoint.last_save_model_only",
      "checkpoint.export_dtype",
      "checkpoint.async_mode",
      "quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp",
      "quantize.linear.float8.filter_fqns",
      "validation.enable",
      "validation.dataset",
      "validation.freq",
      "validation.steps"};
  EXPECT_EQ(c->ignored_fields, ignored);
}

TEST(TorchtitanConfigTest, Llama3_70bMapsEveryField) {
  auto c = read_torchtitan_config(testdata("llama3_70b.toml"));
  ASSERT_TRUE(c.has_value()) << c.error().message();
  const RunOptionsPatch& o = c->options;
  EXPECT_EQ(o.model, preset_for("llama-3.1-70b", "llama-3-70b"));
  EXPECT_EQ(o.seq_len, 8192);
  EXPECT_EQ(o.micro_batch_size, 8);
  // torchtitan's full wraps every transformer block: fsdpsim's full (not full-all-units).
  EXPECT_EQ(o.recompute, "full");
  EXPECT_EQ(c->tp, 8);
  EXPECT_EQ(o.sequence_parallel, true);
  EXPECT_FALSE(o.mesh.has_value());
  EXPECT_EQ(o.strategy, "zero3");
  EXPECT_EQ(o.reshard_after_forward, "all-but-last");
  const auto& ig = c->ignored_fields;
  for (const char* used : {"model.name", "model.flavor", "training.seq_len",
                           "training.local_batch_size", "parallelism.tensor_parallel_degree",
                           "activation_checkpoint.mode", "compile.enable", "compile.components"}) {
    EXPECT_EQ(std::count(ig.begin(), ig.end(), used), 0) << used;
  }
  for (const char* unused : {"optimizer.lr", "training.steps", "model.hf_assets_path"}) {
    EXPECT_EQ(std::count(ig.begin(), ig.end(), unused), 1) << unused;
  }
}

TEST(TorchtitanConfigTest, ShardDegreeGivesMeshJobSizeAndMicrobatches) {
  auto c = parse_torchtitan_config(R"(
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 2
global_batch_size = 128
seq_len = 4096
[parallelism]
data_parallel_shard_degree = 16
)",
                                   "job.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_EQ(c->options.mesh, "dp=16");
  EXPECT_EQ(config_gpus(*c), 16);
  EXPECT_EQ(config_global_batch(*c), 128);
  RunOptions options;
  ASSERT_TRUE(layer_run_options({}, &*c, {}, &options).has_value());
  EXPECT_EQ(options.mesh, "dp=16");
  EXPECT_EQ(options.microbatches, 4);  // 128 / (2 x 16)
  EXPECT_EQ(options.seq_len, 4096);
  // A --mesh on the command line changes the data-parallel degree the batch divides by.
  RunOptions wider;
  wider.mesh = "dp=32";
  ASSERT_TRUE(layer_run_options({}, &*c, given_set({"mesh"}), &wider).has_value());
  EXPECT_EQ(wider.mesh, "dp=32");
  EXPECT_EQ(wider.microbatches, 2);
  // 128 / (2 x 48) does not divide: the error names both fields and the degree.
  RunOptions odd;
  odd.mesh = "dp=48";
  auto s = layer_run_options({}, &*c, given_set({"mesh"}), &odd);
  ASSERT_FALSE(s.has_value());
  EXPECT_TRUE(one_line(s.error().message()));
  EXPECT_NE(s.error().message().find("job.toml"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("training.global_batch_size 128"), std::string::npos);
  EXPECT_NE(s.error().message().find("training.local_batch_size"), std::string::npos);
  EXPECT_NE(s.error().message().find("48"), std::string::npos);
}

TEST(TorchtitanConfigTest, HsdpReplicateAndTensorParallelMesh) {
  auto c = parse_torchtitan_config(R"(
[model]
name = "llama3"
flavor = "70B"
[parallelism]
data_parallel_replicate_degree = 2
data_parallel_shard_degree = 8
tensor_parallel_degree = 4
enable_async_tensor_parallel = true
fsdp_reshard_after_forward = "never"
)",
                                   "hsdp.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_EQ(c->options.mesh, "dp_outer=2,dp_inner=8,tp=4");
  EXPECT_EQ(c->options.strategy, "hsdp");
  EXPECT_EQ(c->options.reshard_after_forward, "none");
  EXPECT_EQ(config_gpus(*c), 64);
  EXPECT_EQ(config_global_batch(*c), 8 * 2 * 8);         // torchtitan's default local_batch_size 8
  EXPECT_EQ(c->options.seq_len, 2048);                   // and seq_len
  EXPECT_EQ(c->options.recompute, "selective-layer:2");  // and selective_ac_option "2"
  EXPECT_EQ(c->ignored_fields,
            std::vector<std::string>{"parallelism.enable_async_tensor_parallel"});
}

TEST(TorchtitanConfigTest, ExpertParallelBorrowsFromTheShardDegree) {
  auto c = parse_torchtitan_config(
      "[parallelism]\ndata_parallel_shard_degree = 64\nexpert_parallel_degree = 8\n", "moe.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_EQ(c->options.mesh, "dp=8,ep=8");
  EXPECT_EQ(config_gpus(*c), 64);
  auto uneven = parse_torchtitan_config(
      "[parallelism]\ndata_parallel_shard_degree = 12\nexpert_parallel_degree = 8\n", "moe.toml");
  ASSERT_FALSE(uneven.has_value());
  EXPECT_NE(uneven.error().message().find("moe.toml:3: parallelism.expert_parallel_degree: 8 does "
                                          "not divide data_parallel_shard_degree 12"),
            std::string::npos)
      << uneven.error().message();
  auto hybrid = parse_torchtitan_config(
      "[parallelism]\ndata_parallel_replicate_degree = 2\nexpert_parallel_degree = 8\n",
      "moe.toml");
  ASSERT_FALSE(hybrid.has_value());
  EXPECT_TRUE(one_line(hybrid.error().message()));
}

TEST(TorchtitanConfigTest, OlderReleasesFieldNames) {
  // Before 2025: degrees, batch_size and compile under [training], pp/cp and async TP under
  // [experimental], float8 switched on by float8.enable_float8_linear.
  auto c = parse_torchtitan_config(R"(
[model]
name = "llama3"
flavor = "405B"
[training]
batch_size = 2
compile = true
data_parallel_shard_degree = 8
tensor_parallel_degree = 2
fsdp_reshard_after_forward = "always"
[experimental]
pipeline_parallel_degree = 1
enable_async_tensor_parallel = true
[float8]
enable_float8_linear = true
enable_fsdp_float8_all_gather = true
[activation_checkpoint]
mode = "selective"
selective_ac_option = "3"
)",
                                   "old.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  const RunOptionsPatch& o = c->options;
  EXPECT_EQ(o.model, "llama-3.1-405b");
  EXPECT_EQ(o.micro_batch_size, 2);
  EXPECT_EQ(o.compile, true);
  EXPECT_EQ(o.compute_dtype, "fp8");
  EXPECT_EQ(o.fp8_all_gather, true);
  EXPECT_EQ(o.mesh, "dp=8,tp=2");
  EXPECT_EQ(o.reshard_after_forward, "all");
  EXPECT_EQ(o.recompute, "selective-layer:3");
  EXPECT_EQ(c->ignored_fields,
            std::vector<std::string>{"experimental.enable_async_tensor_parallel"});
}

TEST(TorchtitanConfigTest, ConvertersAndCompileComponents) {
  auto c = parse_torchtitan_config(R"(
[model]
name = "llama3"
flavor = "8B"
converters = ["quantize.linear.float8"]
[compile]
enable = true
components = ["loss"]
[quantize.linear.float8]
enable_fsdp_float8_all_gather = true
)",
                                   "fp8.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_EQ(c->options.compute_dtype, "fp8");
  EXPECT_EQ(c->options.fp8_all_gather, true);
  EXPECT_EQ(c->options.compile, false);  // the loss only: the model runs eager
  // The float8 all-gather without a float8 converter does nothing in torchtitan.
  auto off = parse_torchtitan_config("[float8]\nenable_fsdp_float8_all_gather = true\n", "x.toml");
  ASSERT_TRUE(off.has_value()) << off.error().message();
  EXPECT_EQ(off->options.compute_dtype, "bf16");
  EXPECT_EQ(off->options.fp8_all_gather, false);
}

TEST(TorchtitanConfigTest, ErrorsAreOneLineNamingFileLineAndField) {
  struct Case {
    const char* text;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"[parallelism]\npipeline_parallel_degree = 2\n",
       {"bad.toml:2: parallelism.pipeline_parallel_degree", "not modelled"}},
      {"[experimental]\ncontext_parallel_degree = 4\n",
       {"bad.toml:2: experimental.context_parallel_degree", "not modelled"}},
      {"[training]\nseq_len = \"long\"\n",
       {"bad.toml:2: training.seq_len", "expected a positive integer", "got 'long'"}},
      {"[training]\n\nmixed_precision_param = \"float16\"\n",
       {"bad.toml:3: training.mixed_precision_param", "expected 'bfloat16' or 'float32'",
        "got 'float16'"}},
      {"[parallelism]\nfsdp_reshard_after_forward = \"sometimes\"\n",
       {"bad.toml:2: parallelism.fsdp_reshard_after_forward", "got 'sometimes'"}},
      {"[activation_checkpoint]\nmode = \"memory_budget\"\n",
       {"bad.toml:2: activation_checkpoint.mode", "not modelled"}},
      {"[activation_checkpoint]\nselective_ac_option = \"every\"\n",
       {"bad.toml:2: activation_checkpoint.selective_ac_option", "got 'every'"}},
      {"[model]\nconverters = [\"mx\"]\n", {"bad.toml:2: model.converters", "'mx'"}},
      {"[optimizer]\nname = \"Lion\"\n", {"bad.toml:2: optimizer.name", "got 'Lion'"}},
      {"[training]\nseq_len = 8192\nseq_len = 4096\n", {"bad.toml:3:", "TOML syntax error"}},
      {"[training\n", {"bad.toml:1:", "TOML syntax error"}},
  };
  for (const Case& k : cases) {
    auto c = parse_torchtitan_config(k.text, "bad.toml");
    ASSERT_FALSE(c.has_value()) << k.text;
    const std::string& m = c.error().message();
    EXPECT_TRUE(one_line(m)) << m;
    for (const std::string& part : k.parts) {
      EXPECT_NE(m.find(part), std::string::npos) << "'" << part << "' not in: " << m;
    }
  }
  auto missing = read_torchtitan_config(testdata("no_such.toml"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_TRUE(one_line(missing.error().message()));
  EXPECT_NE(missing.error().message().find("no_such.toml"), std::string::npos);
}

TEST(TorchtitanConfigTest, UnmappedModelNeedsAModelOptionOnlyWhenNoneIsGiven) {
  auto c = parse_torchtitan_config(
      "[model]\nname = \"llama3\"\nflavor = \"debugmodel\"\n"
      "[parallelism]\ndata_parallel_shard_degree = 8\n",
      "debug.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_FALSE(c->options.model.has_value());
  RunOptions options;
  auto refused = layer_run_options({}, &*c, {}, &options);
  ASSERT_FALSE(refused.has_value());
  EXPECT_TRUE(one_line(refused.error().message()));
  EXPECT_NE(refused.error().message().find("debug.toml:3: model.name 'llama3' with model.flavor "
                                           "'debugmodel'"),
            std::string::npos)
      << refused.error().message();
  options.model = "llama-3-8b";
  EXPECT_TRUE(layer_run_options({}, &*c, given_set({"model"}), &options).has_value());
  EXPECT_EQ(options.model, "llama-3-8b");
}

TEST(TorchtitanConfigTest, JobSizeLeftToTheGpusNeedsAMesh) {
  auto c = read_torchtitan_config(testdata("llama3_70b.toml"));
  ASSERT_TRUE(c.has_value()) << c.error().message();
  RunOptions options;
  auto refused = layer_run_options({}, &*c, {}, &options);
  ASSERT_FALSE(refused.has_value());
  EXPECT_TRUE(one_line(refused.error().message()));
  EXPECT_NE(refused.error().message().find(
                "llama3_70b.toml:41: parallelism.data_parallel_shard_degree is -1"),
            std::string::npos)
      << refused.error().message();
  EXPECT_NE(refused.error().message().find("give --mesh, e.g. dp=64,tp=8"), std::string::npos)
      << refused.error().message();
}

TEST(TorchtitanConfigTest, CommandLineOverridesTheFileAndTheFileTheProfile) {
  auto c = read_torchtitan_config(testdata("llama3_8b.toml"));
  ASSERT_TRUE(c.has_value()) << c.error().message();
  auto megatron = profile_defaults("megatron-fsdp");
  ASSERT_TRUE(megatron.has_value());
  RunOptions options;
  options.mesh = "dp=64";
  options.seq_len = 2048;
  options.recompute = "none";
  ASSERT_TRUE(
      layer_run_options(*megatron, &*c, given_set({"mesh", "seq-len", "recompute"}), &options)
          .has_value());
  EXPECT_EQ(options.seq_len, 2048);      // command line over the file's 8192
  EXPECT_EQ(options.recompute, "none");  // and over its selective-op
  EXPECT_EQ(options.mesh, "dp=64");
  EXPECT_EQ(options.micro_batch_size, 1);  // the file's
  EXPECT_EQ(options.microbatches, 1);      // no global_batch_size: no accumulation
  EXPECT_EQ(options.framework, "fsdp2");   // the file over the profile's megatron-fsdp
  EXPECT_EQ(options.reshard_after_forward, "all-but-last");  // the file over the profile's all
  EXPECT_EQ(options.kernels, "te");                          // the file says nothing: the profile's
}

TEST(RunProfileTest, ProfilesSetTheirFrameworksDefaults) {
  auto titan = profile_defaults("torchtitan");
  ASSERT_TRUE(titan.has_value());
  RunOptions options;
  options.kernels = "auto";
  ASSERT_TRUE(layer_run_options(*titan, nullptr, given_set({"kernels"}), &options).has_value());
  EXPECT_EQ(options.framework, "fsdp2");
  EXPECT_EQ(options.reshard_after_forward, "all-but-last");
  EXPECT_EQ(options.reduce_dtype, "fp32");
  EXPECT_EQ(options.param_dtype, "bf16");
  EXPECT_EQ(options.kernels, "auto");  // given on the command line
  auto megatron = profile_defaults("megatron-fsdp");
  ASSERT_TRUE(megatron.has_value());
  RunOptions m;
  m.reshard_after_forward = "none";
  ASSERT_TRUE(layer_run_options(*megatron, nullptr, {}, &m).has_value());
  EXPECT_EQ(m.framework, "megatron-fsdp");
  EXPECT_EQ(m.kernels, "te");
  EXPECT_EQ(m.reshard_after_forward, "all");
  EXPECT_EQ(m.reduce_dtype, "fp32");
  // Every profile parses into options plan_run accepts.
  for (std::string_view name : profile_names()) {
    auto p = profile_defaults(name);
    ASSERT_TRUE(p.has_value()) << name;
    RunOptions r;
    ASSERT_TRUE(layer_run_options(*p, nullptr, {}, &r).has_value());
    EXPECT_TRUE(parse_config_options(r).has_value()) << name;
  }
  auto unknown = profile_defaults("deepspeed");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().message(),
            "--profile is 'deepspeed'; expected torchtitan or megatron-fsdp");
}

TEST(RunOptionsPatchTest, LayerAndPatchedOptions) {
  RunOptionsPatch base;
  base.seq_len = 1024;
  base.framework = "fsdp1";
  RunOptionsPatch top;
  top.framework = "fsdp2";
  top.compile = true;
  const RunOptionsPatch both = layer(base, top);
  EXPECT_EQ(both.seq_len, 1024);
  EXPECT_EQ(both.framework, "fsdp2");
  EXPECT_EQ(both.compile, true);
  EXPECT_EQ(patched_options(both), (std::vector<std::string>{"seq-len", "compile", "framework"}));
}

}  // namespace
}  // namespace fsdp::planner

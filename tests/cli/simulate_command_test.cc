// SPDX-License-Identifier: Apache-2.0
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/subcommands.h"
#include "tests/cli/cli_test_util.h"

namespace fsdp::cli {
namespace {

using testing::run_command;

// Layout size minus the sum of numels for one unit's shapes, read from `fsdpsim layout`.
std::int64_t layout_padding(const std::string& shapes, const std::string& dp) {
  const auto r = run_command(run_layout_command, {"--shapes", shapes, "--dp", dp,
                                                  "--format", "json"});
  EXPECT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::int64_t numel = 0;
  for (const auto& t : j.at("tensors")) {
    numel += t.at("numel").get<std::int64_t>();
  }
  return j.at("size").get<std::int64_t>() - numel;
}

TEST(SimulateCommandTest, DefaultRunIsARealSimulation) {
  const auto r = run_command(run_simulate_command, {});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("model llama-3-8b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step time"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("padding: "), std::string::npos) << r.out;
}

TEST(SimulateCommandTest, JsonCarriesStepTimeAndPadding) {
  const auto r = run_command(run_simulate_command, {"--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j.at("step_time_ps").get<std::int64_t>(), 0) << r.out.substr(0, 400);
  const auto& p = j.at("padding");
  const auto flat = p.at("flat_elements").get<std::int64_t>();
  const auto data = p.at("data_elements").get<std::int64_t>();
  EXPECT_EQ(data, 8030261248);  // Llama 3 8B's parameter count: every parameter is laid out
  EXPECT_EQ(p.at("padding_elements").get<std::int64_t>(), flat - data);
  EXPECT_GE(flat, data);
}

// The padding the simulator reports is what the layouts themselves say, unit by unit.
TEST(SimulateCommandTest, PaddingEqualsTheLayoutsOwnPadding) {
  const std::string model = std::string(FSDP_SOURCE_DIR) + "/tests/cli/testdata/padding.json";
  const auto r = run_command(run_simulate_command,
                             {"--model", model, "--mesh", "dp=3", "--format", "json",
                              "--seq-len", "4", "--microbatches", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto p = nlohmann::json::parse(r.out).at("padding");
  const std::int64_t expected = layout_padding("7x5,3", "3") + layout_padding("2x9", "3");
  EXPECT_GT(expected, 0);
  EXPECT_EQ(p.at("padding_elements").get<std::int64_t>(), expected);
  EXPECT_EQ(p.at("data_elements").get<std::int64_t>(), 7 * 5 + 3 + 2 * 9);
  // bf16 compute: two bytes per padding element in every full gather.
  EXPECT_EQ(p.at("gathered_padding_bytes").get<std::int64_t>(), 2 * expected);
}

// Each checkpointing mode of Llama 3 8B at seq 8192 says what it keeps in one line, and keeps
// less than no checkpointing at a cost in time (docs/models.md, "Worked example").
TEST(SimulateCommandTest, RecomputeModesNameThemselvesAndTradeMemoryForTime) {
  const auto simulate = [](const std::string& mode) {
    std::vector<std::string> args = {"--model", "llama-3-8b", "--seq-len",      "8192",
                                     "--mesh",  "dp=8",       "--microbatches", "1"};
    if (mode == "bare") {
      args.emplace_back("--recompute");
    } else if (!mode.empty()) {
      args.insert(args.end(), {"--recompute", mode});
    }
    const auto r = run_command(run_simulate_command, args);
    EXPECT_EQ(r.code, 0) << mode << ": " << r.err;
    return r.out;
  };
  const auto json_of = [](const std::string& mode) {
    const auto r = run_command(run_simulate_command,
                               {"--model", "llama-3-8b", "--seq-len", "8192", "--mesh", "dp=8",
                                "--microbatches", "1", "--recompute", mode, "--format", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const std::string none = simulate("");
  EXPECT_NE(none.find("\nrecompute none: 38.07 GiB of activations kept per microbatch, 0 of 34 "
                      "units recomputed"),
            std::string::npos)
      << none;
  EXPECT_EQ(simulate("bare"), simulate("full"));  // a bare --recompute stays full
  const std::string op = simulate("selective-op");
  // 32 x 63,616 B + embedding 8 + head 529,408 B per token, x 8192 tokens.
  EXPECT_NE(op.find("recompute selective-op: 19.57 GiB of activations kept per microbatch, 32 of "
                    "34 units recomputed (0.70 GiB re-materialised at most, "),
            std::string::npos)
      << op;
  EXPECT_NE(simulate("selective-layer:2").find("16 of 34 units recomputed"), std::string::npos);
  const auto peak = [](const nlohmann::json& j) {
    return j.at("classes").at(0).at("memory").at("peak_bytes").get<std::int64_t>();
  };
  const auto step = [](const nlohmann::json& j) {
    return j.at("step_time_ps").get<std::int64_t>();
  };
  const nlohmann::json j_none = json_of("none");
  const nlohmann::json j_full = json_of("full");
  const nlohmann::json j_op = json_of("selective-op");
  const nlohmann::json j_layer = json_of("selective-layer:2");
  EXPECT_LT(peak(j_full), peak(j_op));
  EXPECT_LT(peak(j_op), peak(j_none));
  EXPECT_LT(peak(j_layer), peak(j_none));
  EXPECT_LT(step(j_none), step(j_op));
  EXPECT_LT(step(j_op), step(j_full));
  EXPECT_LT(step(j_op), step(j_layer));
}

// --compile with selective-op: torch.compile's partitioner saves only what backward reads, so
// each Llama 3 8B block leaves out down_proj's output (8,192 B per token, docs/models.md): 32 x
// 8,192 x 8,192 tokens = 2 GiB less kept, and the peak falls by as much; eager keeps it.
TEST(SimulateCommandTest, CompiledSelectiveOpKeepsNoUnreadOutputs) {
  const auto run = [](bool compile, const std::string& mode, const std::string& format) {
    std::vector<std::string> args = {"--model",        "llama-3-8b", "--seq-len",   "8192",
                                     "--mesh",         "dp=8",       "--recompute", mode,
                                     "--microbatches", "1",          "--format",    format};
    if (compile) {
      args.emplace_back("--compile");
    }
    const auto r = run_command(run_simulate_command, args);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  };
  const std::string compiled = run(true, "selective-op", "text");
  EXPECT_NE(compiled.find("recompute selective-op: 17.57 GiB of activations kept per microbatch"),
            std::string::npos)
      << compiled;
  EXPECT_NE(compiled.find("; compiled, 2.00 GiB of saved outputs no backward reads not kept\n"),
            std::string::npos)
      << compiled;
  EXPECT_EQ(run(false, "selective-op", "text").find("; compiled, "), std::string::npos);
  // Full recomputation keeps each block's input only: nothing to leave out.
  EXPECT_EQ(run(true, "full", "text").find("; compiled, "), std::string::npos);
  const auto peak = [&](bool compile) {
    return nlohmann::json::parse(run(compile, "selective-op", "json"))
        .at("classes")
        .at(0)
        .at("memory")
        .at("peak_bytes")
        .get<std::int64_t>();
  };
  EXPECT_EQ(peak(false) - peak(true), 32LL * 8192 * 8192);
  // The JSON says the same: kept bytes per microbatch, and what compiling left out.
  const nlohmann::json r = nlohmann::json::parse(run(true, "selective-op", "json")).at("recompute");
  EXPECT_EQ(r.at("mode"), "selective-op");
  EXPECT_EQ(r.at("compiled_unread_bytes_not_kept").get<std::int64_t>(), 32LL * 8192 * 8192);
  const nlohmann::json eager =
      nlohmann::json::parse(run(false, "selective-op", "json")).at("recompute");
  EXPECT_EQ(eager.at("compiled_unread_bytes_not_kept").get<std::int64_t>(), 0);
  EXPECT_EQ(eager.at("kept_bytes_per_microbatch").get<std::int64_t>() -
                r.at("kept_bytes_per_microbatch").get<std::int64_t>(),
            32LL * 8192 * 8192);
  // 32 x 63,616 B + embedding 8 + head 529,408 B per token, x 8192 tokens (the text's 19.57 GiB).
  EXPECT_EQ(eager.at("kept_bytes_per_microbatch").get<std::int64_t>(),
            (32LL * 63'616 + 8 + 529'408) * 8192);
  EXPECT_EQ(eager.at("units").get<std::int64_t>(), 34);
  EXPECT_EQ(eager.at("units_recomputed").get<std::int64_t>(), 32);
}

TEST(SimulateCommandTest, BadInputsAreOneLineErrors) {
  const std::vector<std::vector<std::string>> cases = {
      {"--microbatches", "0"},
      {"--model", "no-such-model"},
      {"--mesh", "dp=0"},
      {"--hardware", "no-such-gpu"},
      {"--straggler", "rank=x"},
      {"--recompute", "selective-layer:0"},
      {"--recompute", "partial"},
      {"--mesh", "pp=8,dp=8"},
      {"--optimizer", "sgd_momentum"},
  };
  for (const auto& args : cases) {
    const auto r = run_command(run_simulate_command, args);
    EXPECT_NE(r.code, 0) << args[0] << " " << args[1];
    EXPECT_TRUE(r.out.empty()) << r.out;
    ASSERT_FALSE(r.err.empty()) << args[0];
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
  EXPECT_EQ(run_command(run_simulate_command, {"--format", "xml"}).code, 2);
}

// Issue 19: tensor- and expert-parallel meshes; the report names the time their collectives
// take per axis (docs/design/parallelism.md).
TEST(SimulateCommandTest, ParallelAxesReportTheirCommunication) {
  const auto tp = run_command(run_simulate_command, {"--model", "llama-3-8b", "--layers", "2",
                                                     "--mesh", "dp=2,tp=8", "--microbatches", "2"});
  ASSERT_EQ(tp.code, 0) << tp.err;
  // Per microbatch: 1 + 2 x 4 + 1 all-reduces and the cross entropy's all-gather.
  EXPECT_NE(tp.out.find("compute stream, axis tp: 22 collectives"), std::string::npos) << tp.out;
  EXPECT_NE(tp.out.find("all-reduce on tp: 20 calls"), std::string::npos) << tp.out;
  EXPECT_NE(tp.out.find("all-gather on tp: 2 calls"), std::string::npos) << tp.out;
  const auto ep = run_command(run_simulate_command,
                              {"--model", "mixtral-8x7b", "--layers", "2", "--mesh", "dp=2,ep=8",
                               "--microbatches", "1", "--capacity-factor", "1.25"});
  ASSERT_EQ(ep.code, 0) << ep.err;
  EXPECT_NE(ep.out.find("all-to-all on ep: 8 calls"), std::string::npos) << ep.out;
  const std::vector<std::pair<std::vector<std::string>, std::string>> errors = {
      {{"--mesh", "dp=16", "--sequence-parallel"},
       "--sequence-parallel needs a tp axis of more than one rank, got mesh dp=16"},
      {{"--mesh", "dp=2,tp=16"},
       "llama-3-8b: tp=16 must divide num_key_value_heads = 8: expected a tp size that "
       "divides it"},
      {{"--mesh", "dp=2,ep=8"},
       "llama-3-8b: ep=8 needs a mixture-of-experts model: expected experts to divide over the "
       "ep axis, got a model without experts"},
      {{"--mesh", "tp=2,ep=2"},
       "--mesh: tp=2 with ep=2 is not implemented: expected a tp axis or an ep axis, not both "
       "(expert tensor parallelism is not modelled)"},
      {{"--mesh", "dp=2,ep=8", "--model", "mixtral-8x7b", "--capacity-factor", "0"},
       "--capacity-factor: capacity factor is 0; expected a value in [1, 64]"},
  };
  for (const auto& [args, message] : errors) {
    const auto r = run_command(run_simulate_command, args);
    EXPECT_NE(r.code, 0) << args[1];
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
}

// Issue 15: the per-op compute model and the flags that change what its kernels cost. Each is
// visible in one line of the text summary and in the JSON's compute_model.
double step_ms(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--seq-len",      "8192", "--mesh",   "dp=8",
                                   "--microbatches", "1",    "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_command(run_simulate_command, args);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out).at("step_time_ms").get<double>();
}

TEST(SimulateCommandTest, PerOpComputeLineNamesTheKernels) {
  const auto r = run_command(run_simulate_command,
                             {"--seq-len", "8192", "--mesh", "dp=8", "--microbatches", "1",
                              "--compile", "--compute-dtype", "fp8", "--kernels", "torch"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("per-op compute (torch compiled, fp8 matmuls), rank 0: GEMM "),
            std::string::npos)
      << r.out;
  const auto j = nlohmann::json::parse(
      run_command(run_simulate_command, {"--format", "json", "--kernels", "torch"}).out);
  const auto& cm = j.at("compute_model");
  EXPECT_EQ(cm.at("model"), "per-op");
  EXPECT_EQ(cm.at("kernels"), "torch");
  EXPECT_GT(cm.at("rank0_ms").at("gemm").get<double>(),
            cm.at("rank0_ms").at("attention").get<double>());
  EXPECT_EQ(cm.at("rank0_ms").at("fp8_casts").get<double>(), 0.0);
}

TEST(SimulateCommandTest, EachKernelFlagMovesTheStep) {
  const double eager = step_ms({"--kernels", "torch"});
  // Fused elementwise kernels are faster; fp8 matmuls are faster still on an H100; Transformer
  // Engine's fused kernels and cuDNN attention beat eager PyTorch.
  EXPECT_LT(step_ms({"--kernels", "torch", "--compile"}), eager);
  EXPECT_LT(step_ms({"--kernels", "torch", "--compute-dtype", "fp8"}), eager);
  EXPECT_LT(step_ms({"--kernels", "te"}), eager);
  // The FLOP model ignores all of them.
  EXPECT_EQ(step_ms({"--compute-model", "flops", "--compile"}),
            step_ms({"--compute-model", "flops"}));
  EXPECT_EQ(step_ms({"--matmul-efficiency", "0.5"}), step_ms({"--compute-model", "flops"}));
}

TEST(SimulateCommandTest, KernelFlagErrorsAreOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--compute-dtype", "fp4"}, "--compute-dtype is 'fp4'; expected bf16 or fp8"},
      {{"--kernels", "xla"}, "--kernels is 'xla'; expected torch, te or auto"},
      {{"--compute-model", "roofline"}, "--compute-model is 'roofline'; expected per-op or flops"},
      {{"--compute-model", "per-op", "--matmul-efficiency", "0.4"},
       "--matmul-efficiency applies to --compute-model flops"},
      {{"--hardware", "a100", "--compute-dtype", "fp8"},
       "fp8 matmuls: hardware 'a100' has no fp8 tensor cores"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_command(run_simulate_command, args);
    EXPECT_NE(r.code, 0) << args[0];
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
}


// Issue 15 items 2-4: the framework and precision flags. Each moves what it should, prints its
// effect in one line and names itself in the JSON; bad values are one-line errors.
nlohmann::json sim_json(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--seq-len",      "2048", "--mesh",   "dp=8",
                                   "--microbatches", "1",    "--format", "json",
                                   "--micro-batch-size", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_command(run_simulate_command, args);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

std::int64_t reserved(const nlohmann::json& j) {
  return j.at("classes").at(0).at("memory").at("peak_reserved_bytes").get<std::int64_t>();
}

TEST(SimulateCommandTest, FrameworkFlagsMoveMemoryAndKernels) {
  const auto megatron = sim_json({});
  const auto fsdp2 = sim_json({"--framework", "fsdp2"});
  EXPECT_EQ(megatron.at("framework").at("framework"), "megatron-fsdp");
  EXPECT_EQ(megatron.at("compute_model").at("kernels"), "te");
  EXPECT_EQ(fsdp2.at("compute_model").at("kernels"), "torch");  // --kernels auto follows
  EXPECT_EQ(sim_json({"--framework", "fsdp2", "--kernels", "te"}).at("compute_model").at("kernels"),
            "te");
  EXPECT_EQ(megatron.at("framework").at("loss_backward_bytes"), 0);
  EXPECT_EQ(fsdp2.at("framework").at("loss_backward_bytes").get<std::int64_t>(),
            std::int64_t{8} * 128256 * 4096);
  EXPECT_GT(fsdp2.at("framework").at("optimizer_scratch_bytes").get<std::int64_t>(), 0);
  EXPECT_GT(fsdp2.at("framework").at("copy_out_bytes").get<std::int64_t>(), 0);
  EXPECT_EQ(sim_json({"--framework", "fsdp1"}).at("framework").at("copy_out_bytes"), 0);
  // fp32 loss logits, the foreach scratch and the root kept gathered outweigh the bf16 shard
  // and resident grads PyTorch does not keep.
  EXPECT_GT(reserved(fsdp2), reserved(megatron));
  // The units kept gathered from forward to backward: none by default; the root's two under
  // PyTorch; the last block too with all-but-last.
  EXPECT_EQ(megatron.at("framework").at("units_kept_gathered"), 0);
  EXPECT_EQ(fsdp2.at("framework").at("units_kept_gathered"), 2);
  const auto abl = sim_json({"--framework", "fsdp2", "--reshard-after-forward", "all-but-last"});
  EXPECT_EQ(abl.at("framework").at("units_kept_gathered"), 3);
  // Holding the last block gathered adds to what is live, never takes from it (here the peak is
  // the head's backward, where the last block is gathered anyway).
  EXPECT_GE(reserved(abl), reserved(fsdp2));
  // The runtime's memory outside the allocator comes off the capacity.
  const auto& mem = megatron.at("classes").at(0).at("memory");
  EXPECT_EQ(mem.at("capacity_bytes").get<std::int64_t>() +
                mem.at("runtime_outside_allocator_bytes").get<std::int64_t>(),
            std::int64_t{80} << 30);
  EXPECT_EQ(mem.at("runtime_allocator_bytes"), 32 << 20);
}

TEST(SimulateCommandTest, PrecisionFlagsMoveCollectiveBytes) {
  const auto bytes = [](const nlohmann::json& j, const std::string& kind) {
    double b = 0;
    for (const auto& c : j.at("collectives")) {
      if (c.at("kind") == kind) {
        b += c.at("bus_bytes").get<double>();
      }
    }
    return b;
  };
  const auto base = sim_json({});
  const auto fp32_reduce = sim_json({"--reduce-dtype", "fp32"});
  EXPECT_DOUBLE_EQ(bytes(fp32_reduce, "reduce-scatter"), 2 * bytes(base, "reduce-scatter"));
  EXPECT_EQ(fp32_reduce.at("framework").at("reduce_dtype"), "fp32");
  EXPECT_DOUBLE_EQ(bytes(sim_json({"--param-dtype", "fp32"}), "all-gather"),
                   2 * bytes(base, "all-gather"));
  // The layers gather in fp8, the embedding and the output head in bf16: less than the bf16
  // bytes, more than half of them.
  const auto fp8 = sim_json({"--compute-dtype", "fp8", "--fp8-all-gather"});
  EXPECT_LT(bytes(fp8, "all-gather"), bytes(base, "all-gather"));
  EXPECT_GT(2 * bytes(fp8, "all-gather"), bytes(base, "all-gather"));
  EXPECT_EQ(fp8.at("framework").at("gather_dtype"), "fp8");
  EXPECT_EQ(fp8.at("framework").at("groups_gathered_in_other_dtype"), 2);
  EXPECT_EQ(sim_json({"--param-dtype", "bf16"}).at("step_time_ps"), base.at("step_time_ps"));
}

TEST(SimulateCommandTest, FrameworkLineNamesEveryEffect) {
  const auto r = run_command(run_simulate_command,
                             {"--mesh", "dp=8", "--microbatches", "1", "--framework", "fsdp2",
                              "--reshard-after-forward", "all-but-last", "--reduce-dtype", "fp32"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("framework fsdp2, reshard after forward all-but-last: weights gathered in "
                       "bf16, gradients reduced in fp32; 3 units keep gathered weights"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("of CUDA context and NCCL"), std::string::npos) << r.out;
}

TEST(SimulateCommandTest, FrameworkAndPrecisionErrorsAreOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--framework", "ddp"}, "--framework is 'ddp'; expected megatron-fsdp, fsdp2 or fsdp1"},
      {{"--reshard-after-forward", "half"},
       "--reshard-after-forward is 'half'; expected all, all-but-last or none"},
      {{"--param-dtype", "fp16"}, "--param-dtype is 'fp16'; expected bf16 or fp32"},
      {{"--reduce-dtype", "fp8"}, "--reduce-dtype is 'fp8'; expected fp32 or bf16"},
      {{"--fp8-all-gather"},
       "--fp8-all-gather needs --compute-dtype fp8, got --compute-dtype 'bf16'"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_command(run_simulate_command, args);
    EXPECT_NE(r.code, 0) << args[0];
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
}

}  // namespace
}  // namespace fsdp::cli

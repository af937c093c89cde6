// SPDX-License-Identifier: Apache-2.0
// The presets with a file_name are copies of shared/data/models/*.json, byte for byte (each ends
// in a newline); ModelPresetsTest.PresetsEqualSharedFiles checks them against the files. The others
// carry the published config.json fields of their Hugging Face repository (ModelPreset::source).
#include "core/model/model_presets.h"

#include <array>
#include <vector>

#include "core/base/strings.h"
#include "core/model/hub_config.h"

namespace fsdp {
namespace {

constexpr std::string_view kLlama38bJson = R"json({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 8192, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16"}
)json";
constexpr std::string_view kLlama370bJson = R"json({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80, "vocab_size": 128256, "max_position_embeddings": 8192, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16"}
)json";
constexpr std::string_view kLlama31405bJson = R"json({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16384, "intermediate_size": 53248, "num_attention_heads": 128, "num_key_value_heads": 8, "num_hidden_layers": 126, "vocab_size": 128256, "max_position_embeddings": 131072, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false, "attention_bias": false, "torch_dtype": "bfloat16"}
)json";
constexpr std::string_view kMixtral8x7bJson = R"json({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2, "max_position_embeddings": 32768, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16"}
)json";
constexpr std::string_view kQwen257bJson = R"json({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28, "vocab_size": 152064, "max_position_embeddings": 131072, "hidden_act": "silu", "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16"}
)json";
constexpr std::string_view kDeepseekV3Json = R"json({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61, "first_k_dense_replace": 3, "moe_layer_freq": 1, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4, "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280, "max_position_embeddings": 163840, "num_nextn_predict_layers": 1, "hidden_act": "silu", "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "torch_dtype": "bfloat16"}
)json";
constexpr std::string_view kGpt3175bJson = R"json({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 12288, "n_layer": 96, "n_head": 96, "n_positions": 2048, "vocab_size": 50257, "n_inner": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16"}
)json";
// Presets beyond shared/data/models: the published config.json of each model's Hugging Face
// repository (ModelPreset::source), with the fields the importer reads and no tokenizer or
// generation fields (docs/models.md, "Presets").
constexpr std::string_view kLlama318bJson = R"json({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 131072, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "tie_word_embeddings": false, "attention_bias": false, "mlp_bias": false, "torch_dtype": "bfloat16"})json";
constexpr std::string_view kLlama3170bJson = R"json({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80, "vocab_size": 128256, "max_position_embeddings": 131072, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "tie_word_embeddings": false, "attention_bias": false, "mlp_bias": false, "torch_dtype": "bfloat16"})json";
constexpr std::string_view kLlama321bJson = R"json({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "num_hidden_layers": 16, "vocab_size": 128256, "max_position_embeddings": 131072, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "tie_word_embeddings": true, "attention_bias": false, "mlp_bias": false, "torch_dtype": "bfloat16"})json";
constexpr std::string_view kLlama323bJson = R"json({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 3072, "intermediate_size": 8192, "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 28, "vocab_size": 128256, "max_position_embeddings": 131072, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "tie_word_embeddings": true, "attention_bias": false, "mlp_bias": false, "torch_dtype": "bfloat16"})json";
constexpr std::string_view kQwen2514bJson = R"json({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 5120, "intermediate_size": 13824, "num_attention_heads": 40, "num_key_value_heads": 8, "num_hidden_layers": 48, "vocab_size": 152064, "max_position_embeddings": 131072, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16"})json";
constexpr std::string_view kQwen2532bJson = R"json({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 5120, "intermediate_size": 27648, "num_attention_heads": 40, "num_key_value_heads": 8, "num_hidden_layers": 64, "vocab_size": 152064, "max_position_embeddings": 131072, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16"})json";
constexpr std::string_view kQwen2572bJson = R"json({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 8192, "intermediate_size": 29568, "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80, "vocab_size": 152064, "max_position_embeddings": 32768, "hidden_act": "silu", "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16"})json";
constexpr std::string_view kMistral7bJson = R"json({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 32000, "max_position_embeddings": 32768, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false, "torch_dtype": "bfloat16"})json";
constexpr std::array kPresets = {
    ModelPreset{"llama-3-8b", "llama-3-8b.json", "Llama 3 8B", kLlama38bJson,
                "shared/data/models/llama-3-8b.json"},
    ModelPreset{"llama-3-70b", "llama-3-70b.json", "Llama 3 70B", kLlama370bJson,
                "shared/data/models/llama-3-70b.json"},
    ModelPreset{"llama-3.1-405b", "llama-3.1-405b.json", "Llama 3.1 405B", kLlama31405bJson,
                "shared/data/models/llama-3.1-405b.json"},
    ModelPreset{"mixtral-8x7b", "mixtral-8x7b.json", "Mixtral 8x7B", kMixtral8x7bJson,
                "shared/data/models/mixtral-8x7b.json"},
    ModelPreset{"qwen2.5-7b", "qwen2.5-7b.json", "Qwen2.5 7B", kQwen257bJson,
                "shared/data/models/qwen2.5-7b.json"},
    ModelPreset{"deepseek-v3", "deepseek-v3.json", "DeepSeek-V3 (no MTP layer)", kDeepseekV3Json,
                "shared/data/models/deepseek-v3.json"},
    ModelPreset{"gpt3-175b", "gpt3-175b.json", "GPT-3 175B shape", kGpt3175bJson,
                "shared/data/models/gpt3-175b.json"},
    ModelPreset{"llama-3.1-8b", "", "Llama 3.1 8B", kLlama318bJson, "meta-llama/Llama-3.1-8B"},
    ModelPreset{"llama-3.1-70b", "", "Llama 3.1 70B", kLlama3170bJson, "meta-llama/Llama-3.1-70B"},
    ModelPreset{"llama-3.2-1b", "", "Llama 3.2 1B (tied embeddings)", kLlama321bJson,
                "meta-llama/Llama-3.2-1B"},
    ModelPreset{"llama-3.2-3b", "", "Llama 3.2 3B (tied embeddings)", kLlama323bJson,
                "meta-llama/Llama-3.2-3B"},
    ModelPreset{"qwen2.5-14b", "", "Qwen2.5 14B", kQwen2514bJson, "Qwen/Qwen2.5-14B"},
    ModelPreset{"qwen2.5-32b", "", "Qwen2.5 32B", kQwen2532bJson, "Qwen/Qwen2.5-32B"},
    ModelPreset{"qwen2.5-72b", "", "Qwen2.5 72B", kQwen2572bJson, "Qwen/Qwen2.5-72B-Instruct"},
    ModelPreset{"mistral-7b", "", "Mistral 7B v0.1", kMistral7bJson, "mistralai/Mistral-7B-v0.1"},
};

}  // namespace

std::span<const ModelPreset> model_presets() { return kPresets; }

const ModelPreset* find_model_preset(std::string_view name) {
  for (const ModelPreset& p : kPresets) {
    if (p.name == name) {
      return &p;
    }
  }
  return nullptr;
}

Expected<Model> load_model_preset(std::string_view name) {
  const ModelPreset* preset = find_model_preset(name);
  if (preset == nullptr) {
    std::vector<std::string_view> names;
    for (const ModelPreset& p : kPresets) {
      names.push_back(p.name);
    }
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("model preset: expected one of ", join(names, ", "), ", got '", name, "'"));
  }
  return import_hub_config(preset->config_json, str_cat("preset ", preset->name),
                           std::string(preset->name));
}

}  // namespace fsdp

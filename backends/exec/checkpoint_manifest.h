// SPDX-License-Identifier: Apache-2.0
// CheckpointManifest: the manifest.json of one checkpoint step directory (docs/design/backends.md,
// "Checkpoints"): format version, the model's units and parameters (names and shapes, Model
// order), the configuration that saved it, the optimizer, the step and data position, and every
// shard file with its size, CRC-32 and the tensor slices it holds. Built from JSON only through
// parse_checkpoint_manifest, which checks every field; to_json writes what it reads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/exec/executor_state.h"
#include "core/base/expected.h"

#include <nlohmann/json.hpp>

namespace fsdp::exec {

inline constexpr std::string_view kCheckpointFormat = "fsdpsim-checkpoint";
inline constexpr std::int64_t kCheckpointVersion = 1;

struct ManifestParam {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t numel() const;
  friend bool operator==(const ManifestParam&, const ManifestParam&) = default;
};

struct ManifestUnit {
  std::string name;
  std::vector<ManifestParam> params;
  friend bool operator==(const ManifestUnit&, const ManifestUnit&) = default;
};

// How the checkpoint was made (informational except where the loader says otherwise).
struct SavedConfig {
  std::int64_t world_size = 1;
  std::string mesh;          // "dp=4", "outer=2,inner=2"
  std::string strategy;      // "zero3", ...
  std::string shard_layout;  // "padded" / "unpadded"
  std::int64_t block_size = 1;
  bool tensor_atomic = false;
  std::int64_t microbatches = 1;
  double grad_scale = 1.0;
  friend bool operator==(const SavedConfig&, const SavedConfig&) = default;
};

struct SavedOptimizer {
  std::string kind;  // "sgd", "sgd-momentum", "adam" (read: also "sgd_momentum", written before)
  std::int64_t num_states = 0;
  double lr = 0.0;
  double momentum = 0.0;
  double beta1 = 0.0;
  double beta2 = 0.0;
  double eps = 0.0;
  friend bool operator==(const SavedOptimizer&, const SavedOptimizer&) = default;
};

// Where the data stream stands: the training samples are a pure function of (seed, global sample
// index) (backends/model/decoder.h, global_sample_index and sample_tokens), so step `next_step`
// continues at sample next_step * samples_per_step.
struct DataPosition {
  std::uint64_t seed = 1;
  std::int64_t next_step = 0;
  std::int64_t samples_per_step = 0;  // world x microbatches x micro_batch_size
  friend bool operator==(const DataPosition&, const DataPosition&) = default;
};

struct ManifestShard {
  std::string file;  // relative to the step directory: "rank-3.bin"
  std::int64_t rank = 0;
  std::int64_t bytes = 0;
  std::uint32_t crc32 = 0;           // of the whole file
  std::vector<TensorSlice> records;  // in file order
  friend bool operator==(const ManifestShard&, const ManifestShard&) = default;
};

struct CheckpointManifest {
  std::int64_t version = kCheckpointVersion;
  std::int64_t step = 0;  // optimizer steps completed
  std::string model_name;
  std::vector<ManifestUnit> units;
  SavedConfig config;
  SavedOptimizer optimizer;
  DataPosition data;
  std::vector<ManifestShard> shards;
  friend bool operator==(const CheckpointManifest&, const CheckpointManifest&) = default;
};

nlohmann::json to_json(const CheckpointManifest& manifest);

// Errors (kInvalidArgument, "<source>: field '<path>': expected ..., got ..."): invalid JSON, a
// different format or version, any missing or ill-typed field, a record naming a unit or
// parameter the manifest lacks or a range outside the tensor, a shard file name that is not a
// plain file name.
Expected<CheckpointManifest> parse_checkpoint_manifest(std::string_view text,
                                                       std::string_view source);

// The manifest as readable text for `fsdpsim checkpoint inspect` (several lines, each "key:
// value", the tensors as a table, each shard with its record count).
std::string describe_manifest(const CheckpointManifest& manifest);

// "[64, 32]".
std::string to_string_dims(const std::vector<std::int64_t>& dims);

// The name of tensor (unit, param) for messages: the parameter's name, or "unit U parameter P"
// when the manifest has no such tensor.
std::string tensor_name(const CheckpointManifest& manifest, std::int32_t unit, std::int32_t param);

}  // namespace fsdp::exec

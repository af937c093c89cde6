// SPDX-License-Identifier: Apache-2.0
// The binary shard file of one saving rank, `rank-<r>.bin` of a checkpoint step directory
// (docs/design/backends.md, "Checkpoints"): a header (magic, version, rank, steps done, record
// count), a record index (tensor, element range, state count, payload offset and CRC-32 per
// record) closed by the CRC-32 of everything before it, then the payloads (the range's fp32 main
// weights, then its optimizer states, state-major). Every byte is under a checksum, so a flipped
// byte is an error, never a silent wrong load. Host byte order (little-endian machines).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/exec/executor_state.h"
#include "core/base/expected.h"

namespace fsdp::exec {

inline constexpr std::string_view kShardMagic = "FSDPSHRD";
inline constexpr std::uint32_t kShardVersion = 1;

struct ShardRecordIndex {
  TensorSlice slice;
  std::int64_t num_states = 0;  // optimizer values per weight in this record
  std::int64_t offset = 0;      // of the payload in the file
  std::uint32_t crc32 = 0;      // of the payload
  std::int64_t payload_bytes() const { return (1 + num_states) * slice.range.numel * 4; }
};

struct ShardIndex {
  std::int64_t rank = 0;
  std::int64_t steps_done = 0;
  std::vector<ShardRecordIndex> records;
};

// CRC-32 (the zlib/PNG polynomial) of `bytes`.
std::uint32_t crc32_of(std::string_view bytes);

// The file's bytes for `state` as rank `rank` exported it. FSDP_CHECKs that each shard's value
// counts match its range (export_state's contract).
std::string encode_shard_file(std::int64_t rank, const ExecutorState& state);

// Reads and checks the header and index of the shard file at `path`, which is `file_bytes` long
// (what the manifest lists). Errors (one line naming the path): a read error, a size other than
// `file_bytes` (truncated or replaced), a bad magic or version, an index failing its checksum or
// pointing outside the file.
Expected<ShardIndex> read_shard_index(const std::string& path, std::int64_t file_bytes);

// Reads one record's payload and checks its CRC. `tensor` names it in errors ("<path>: the
// record of tensor 'x' elements [a, b) fails its checksum ...").
Expected<TensorShard> read_shard_record(const std::string& path, const ShardRecordIndex& record,
                                        std::string_view tensor);

// The CRC-32 and size of a whole file, read in bounded chunks. Errors name the path.
struct FileDigest {
  std::int64_t bytes = 0;
  std::uint32_t crc32 = 0;
};
Expected<FileDigest> digest_file(const std::string& path);

}  // namespace fsdp::exec

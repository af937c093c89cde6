// SPDX-License-Identifier: Apache-2.0
#include "backends/exec/checkpoint_shard.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <type_traits>

#include "core/base/check.h"
#include "core/base/file_io.h"
#include "core/base/strings.h"

#include <boost/crc.hpp>

namespace fsdp::exec {
namespace {

// Header: magic (8), version (u32), reserved (u32), rank, steps_done, num_records (i64 each).
constexpr std::int64_t kHeaderBytes = 8 + 4 + 4 + 8 * 3;
// Index entry: unit, param (i32), start, numel, num_states, offset (i64), crc, reserved (u32).
constexpr std::int64_t kEntryBytes = 4 + 4 + 8 * 4 + 4 + 4;
// After the index: its CRC and a reserved word, so payloads start 8-aligned.
constexpr std::int64_t kIndexTrailerBytes = 8;
constexpr std::int64_t kDigestChunk = std::int64_t{16} << 20;

template <class T>
void put(std::string& out, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

template <class T>
T get(std::string_view in, std::int64_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  return v;
}

std::string_view float_bytes(const std::vector<float>& v) {
  return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

Error shard_error(const std::string& path, std::string_view what) {
  return Error(ErrorCode::kInvalidArgument, str_cat(path, ": ", what));
}

std::string hex32(std::uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

}  // namespace

std::uint32_t crc32_of(std::string_view bytes) {
  boost::crc_32_type c;
  c.process_bytes(bytes.data(), bytes.size());
  return c.checksum();
}

std::string encode_shard_file(std::int64_t rank, const ExecutorState& state) {
  const auto n = static_cast<std::int64_t>(state.shards.size());
  std::string head;
  head.append(kShardMagic.data(), kShardMagic.size());
  put<std::uint32_t>(head, kShardVersion);
  put<std::uint32_t>(head, 0);
  put<std::int64_t>(head, rank);
  put<std::int64_t>(head, state.steps_done);
  put<std::int64_t>(head, n);
  std::string payloads;
  std::int64_t offset = kHeaderBytes + n * kEntryBytes + kIndexTrailerBytes;
  for (const TensorShard& s : state.shards) {
    const std::int64_t numel = s.slice.range.numel;
    FSDP_CHECK(
        static_cast<std::int64_t>(s.weights.size()) == numel &&
        (numel > 0 ? s.states.size() % static_cast<std::size_t>(numel) == 0 : s.states.empty()))
        << "shard of unit " << s.slice.unit << " parameter " << s.slice.param << " holds "
        << s.weights.size() << " weights and " << s.states.size() << " states for " << numel;
    const std::int64_t states = numel == 0 ? 0 : static_cast<std::int64_t>(s.states.size()) / numel;
    boost::crc_32_type payload_crc;
    for (const std::vector<float>* part : {&s.weights, &s.states}) {
      const std::string_view b = float_bytes(*part);
      payload_crc.process_bytes(b.data(), b.size());
    }
    const std::uint32_t crc = payload_crc.checksum();
    put<std::int32_t>(head, s.slice.unit);
    put<std::int32_t>(head, s.slice.param);
    put<std::int64_t>(head, s.slice.range.start);
    put<std::int64_t>(head, numel);
    put<std::int64_t>(head, states);
    put<std::int64_t>(head, offset);
    put<std::uint32_t>(head, crc);
    put<std::uint32_t>(head, 0);
    payloads.append(float_bytes(s.weights));
    payloads.append(float_bytes(s.states));
    offset += (1 + states) * numel * 4;
  }
  put<std::uint32_t>(head, crc32_of(head));
  put<std::uint32_t>(head, 0);
  return head + payloads;
}

Expected<ShardIndex> read_shard_index(const std::string& path, std::int64_t file_bytes) {
  FSDP_TRY(const std::int64_t size, regular_file_size(path));
  if (size != file_bytes) {
    return shard_error(path, str_cat("the file is ", size, " bytes; the manifest lists ",
                                     file_bytes, (size < file_bytes ? ": truncated" : "")));
  }
  if (size < kHeaderBytes + kIndexTrailerBytes) {
    return shard_error(path, str_cat("the file is ", size, " bytes, shorter than a header"));
  }
  FSDP_TRY(const std::string header, read_file_range(path, 0, kHeaderBytes));
  if (std::string_view(header).substr(0, kShardMagic.size()) != kShardMagic) {
    return shard_error(path, "not a checkpoint shard file (bad magic)");
  }
  const auto version = get<std::uint32_t>(header, 8);
  if (version != kShardVersion) {
    return shard_error(path,
                       str_cat("shard format version ", version, "; expected ", kShardVersion));
  }
  ShardIndex index;
  index.rank = get<std::int64_t>(header, 16);
  index.steps_done = get<std::int64_t>(header, 24);
  const auto n = get<std::int64_t>(header, 32);
  if (n < 0 || n > (size - kHeaderBytes - kIndexTrailerBytes) / kEntryBytes) {
    return shard_error(path, str_cat("the header lists ", n, " records; a file of ", size,
                                     " bytes cannot hold them"));
  }
  const std::int64_t index_end = kHeaderBytes + n * kEntryBytes;
  FSDP_TRY(const std::string head, read_file_range(path, 0, index_end + kIndexTrailerBytes));
  const auto stored = get<std::uint32_t>(head, index_end);
  const std::uint32_t actual =
      crc32_of(std::string_view(head).substr(0, static_cast<std::size_t>(index_end)));
  if (stored != actual) {
    return shard_error(path, str_cat("the header and record index fail their checksum (crc32 ",
                                     hex32(actual), ", stored ", hex32(stored), ")"));
  }
  std::int64_t expected_offset = index_end + kIndexTrailerBytes;
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t at = kHeaderBytes + k * kEntryBytes;
    ShardRecordIndex r;
    r.slice.unit = get<std::int32_t>(head, at);
    r.slice.param = get<std::int32_t>(head, at + 4);
    r.slice.range.start = get<std::int64_t>(head, at + 8);
    r.slice.range.numel = get<std::int64_t>(head, at + 16);
    r.num_states = get<std::int64_t>(head, at + 24);
    r.offset = get<std::int64_t>(head, at + 32);
    r.crc32 = get<std::uint32_t>(head, at + 40);
    const std::int64_t room = size - expected_offset;
    if (r.slice.range.start < 0 || r.slice.range.numel < 0 || r.num_states < 0 ||
        r.num_states > 8 || r.offset != expected_offset ||
        r.slice.range.numel > room / 4 / (1 + r.num_states)) {
      return shard_error(path, str_cat("record ", k, " of the index does not fit the file"));
    }
    expected_offset += r.payload_bytes();
    index.records.push_back(r);
  }
  if (expected_offset != size) {
    return shard_error(path, str_cat("the records end at byte ", expected_offset, "; the file is ",
                                     size, " bytes"));
  }
  return index;
}

Expected<TensorShard> read_shard_record(const std::string& path, const ShardRecordIndex& r,
                                        std::string_view tensor) {
  const std::string what = str_cat("the record of tensor '", tensor, "' elements [",
                                   r.slice.range.start, ", ", r.slice.range.end(), ")");
  Expected<std::string> bytes = read_file_range(path, r.offset, r.payload_bytes(),
                                                /*max_bytes=*/r.payload_bytes());
  if (!bytes) {
    return bytes.error().with_context(str_cat("reading ", what));
  }
  const std::uint32_t actual = crc32_of(*bytes);
  if (actual != r.crc32) {
    return shard_error(path, str_cat(what, " fails its checksum (crc32 ", hex32(actual),
                                     ", stored ", hex32(r.crc32), ")"));
  }
  TensorShard shard;
  shard.slice = r.slice;
  const auto numel = static_cast<std::size_t>(r.slice.range.numel);
  shard.weights.resize(numel);
  shard.states.resize(numel * static_cast<std::size_t>(r.num_states));
  // memcpy of zero bytes from or to an empty vector's null data() is still undefined.
  if (numel > 0) {
    std::memcpy(shard.weights.data(), bytes->data(), numel * sizeof(float));
  }
  if (!shard.states.empty()) {
    std::memcpy(shard.states.data(), bytes->data() + numel * sizeof(float),
                shard.states.size() * sizeof(float));
  }
  return shard;
}

Expected<FileDigest> digest_file(const std::string& path) {
  FSDP_TRY(const std::int64_t size, regular_file_size(path));
  boost::crc_32_type crc;
  for (std::int64_t at = 0; at < size; at += kDigestChunk) {
    FSDP_TRY(const std::string chunk,
             read_file_range(path, at, std::min(kDigestChunk, size - at), kDigestChunk));
    crc.process_bytes(chunk.data(), chunk.size());
  }
  return FileDigest{size, crc.checksum()};
}

}  // namespace fsdp::exec

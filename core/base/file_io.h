// SPDX-License-Identifier: Apache-2.0
// The one way fsdpsim reads an input file and writes an output file (docs/cli.md, "Input and
// output files"): inputs are regular files up to a size limit, read whole; outputs are written to
// a temporary file in the target's folder and renamed over the target, so a failed write leaves
// any previous file intact. Errors are one line naming the path and the reason.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/base/expected.h"

namespace fsdp {

// The largest input file fsdpsim reads (model, hardware, layout, calibration and trace files).
inline constexpr std::int64_t kMaxInputFileBytes = std::int64_t{64} << 20;  // 64 MiB

// Reads the regular file at `path` whole. A FIFO, device, directory or socket is refused without
// being opened for blocking reads (the error says what it is), as is a file over `max_bytes`.
Expected<std::string> read_input_file(const std::string& path,
                                      std::int64_t max_bytes = kMaxInputFileBytes);

// Reads `length` bytes at `offset` of the regular file at `path` (binary data such as checkpoint
// shards, which may exceed kMaxInputFileBytes in total; each read is bounded by `max_bytes`).
// Errors name the path: not a regular file, length over `max_bytes`, a range past the end of the
// file ("the file is N bytes; expected at least M: truncated").
Expected<std::string> read_file_range(const std::string& path, std::int64_t offset,
                                      std::int64_t length,
                                      std::int64_t max_bytes = kMaxInputFileBytes);

// The size in bytes of the regular file at `path`. Errors name the path.
Expected<std::int64_t> regular_file_size(const std::string& path);

// Writes `contents` to `path`: a new file in the same folder, flushed, closed and then renamed
// over `path` (which may be a symbolic link: its target is replaced). On any failure the temporary
// file is removed and `path` is unchanged. A `path` that exists and is not a regular file is
// written in place when it is a character device (/dev/null, /dev/stdout) or a FIFO with a reader,
// and refused otherwise.
Status write_output_file(const std::string& path, std::string_view contents);

// The same for contents that `fill` produces: it gets the temporary file, open for writing as fd
// and by name (for a program that writes it), and returns its error, which is passed on.
// `in_place` (optional) writes a character device or FIFO that `path` already is.
Status write_output_file_with(
    const std::string& path, const std::function<Status(int fd, const std::string& tmp_path)>& fill,
    const std::function<Status()>& in_place = {});

// True when both paths name the same existing file (std::filesystem::equivalent, no throw).
bool same_file(const std::string& a, const std::string& b);

// What a non-regular file is, for messages: "a directory", "a FIFO (named pipe)", ...
std::string describe_file_type(std::uint32_t st_mode);

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
#include "core/base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <system_error>

#include "core/base/strings.h"

namespace fsdp {
namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

Error file_error(const std::string& path, std::string_view what) {
  return Error(ErrorCode::kInvalidArgument, str_cat(path, ": ", what));
}

// Closes fd on every path out of a scope (move-only: one owner closes it once).
struct FdCloser {
  explicit FdCloser(int f) : fd(f) {}
  FdCloser(FdCloser&& other) noexcept : fd(other.fd) { other.fd = -1; }
  FdCloser& operator=(FdCloser&&) = delete;
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  int fd;
};

// Writes all of `data` to fd, retrying short writes and EINTR; returns 0 or an errno value.
int write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

Status write_in_place(const std::string& path, std::string_view contents) {
  // O_NONBLOCK: a FIFO without a reader fails with ENXIO instead of blocking forever.
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return file_error(path,
                      str_cat("cannot write the file: ",
                              err == ENXIO ? "it is a FIFO with no reader" : errno_text(err)));
  }
  FdCloser closer{fd};
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) {
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  if (const int err = write_all(fd, contents); err != 0) {
    return file_error(path, str_cat("cannot write the file: ", errno_text(err)));
  }
  return ok_status();
}

}  // namespace

std::string describe_file_type(std::uint32_t st_mode) {
  const auto mode = static_cast<mode_t>(st_mode);
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISREG(mode))
    return "a regular file";
  return "not a regular file";
}

namespace {

// A regular file opened for reading, with its size; closed with the value.
struct OpenFile {
  FdCloser closer;
  std::int64_t size = 0;
};

Expected<OpenFile> open_regular_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked before any read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return file_error(path, str_cat("cannot open the file: ", errno_text(errno)));
  }
  OpenFile file{FdCloser{fd}, 0};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return file_error(path, str_cat("cannot open the file: ", errno_text(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return file_error(path,
                      str_cat("is ", describe_file_type(st.st_mode), "; expected a regular file"));
  }
  file.size = static_cast<std::int64_t>(st.st_size);
  return file;
}

}  // namespace

Expected<std::string> read_input_file(const std::string& path, std::int64_t max_bytes) {
  FSDP_TRY(const OpenFile file, open_regular_file(path));
  const int fd = file.closer.fd;
  const std::int64_t size = file.size;
  if (size > max_bytes) {
    return file_error(path, str_cat("the file is ", size, " bytes; the limit for an input file is ",
                                    max_bytes, " bytes"));
  }
  std::string text;
  text.resize(static_cast<std::size_t>(size));
  std::int64_t have = 0;
  for (;;) {
    if (have == static_cast<std::int64_t>(text.size())) {
      if (have > max_bytes) {  // the file grew while it was read
        return file_error(
            path, str_cat("the file is over the limit for an input file of ", max_bytes, " bytes"));
      }
      text.resize(static_cast<std::size_t>(have) + 4096);
    }
    const ssize_t n = ::read(fd, text.data() + have, text.size() - static_cast<std::size_t>(have));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) {
        continue;
      }
      return file_error(path, str_cat("cannot read the file: ", errno_text(errno)));
    }
    if (n == 0) {
      break;
    }
    have += n;
  }
  text.resize(static_cast<std::size_t>(have));
  return text;
}

Expected<std::int64_t> regular_file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return file_error(path, str_cat("cannot open the file: ", errno_text(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return file_error(path,
                      str_cat("is ", describe_file_type(st.st_mode), "; expected a regular file"));
  }
  return static_cast<std::int64_t>(st.st_size);
}

Expected<std::string> read_file_range(const std::string& path, std::int64_t offset,
                                      std::int64_t length, std::int64_t max_bytes) {
  if (offset < 0 || length < 0 || length > max_bytes) {
    return file_error(path, str_cat("cannot read ", length, " bytes at offset ", offset,
                                    "; a read is at most ", max_bytes, " bytes"));
  }
  FSDP_TRY(const OpenFile file, open_regular_file(path));
  const int fd = file.closer.fd;
  const std::int64_t size = file.size;
  if (offset > size - length) {
    return file_error(path, str_cat("the file is ", size, " bytes; expected at least ",
                                    offset + length, ": truncated"));
  }
  std::string bytes(static_cast<std::size_t>(length), '\0');
  std::int64_t have = 0;
  while (have < length) {
    const ssize_t n = ::pread(fd, bytes.data() + have, static_cast<std::size_t>(length - have),
                              static_cast<off_t>(offset + have));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) {
        continue;
      }
      return file_error(path, str_cat("cannot read the file: ", errno_text(errno)));
    }
    if (n == 0) {
      return file_error(path, str_cat("the file ended at byte ", offset + have, "; expected ",
                                      offset + length, ": truncated"));
    }
    have += n;
  }
  return bytes;
}

Status write_output_file(const std::string& path, std::string_view contents) {
  return write_output_file_with(
      path,
      [&](int fd, const std::string& /*tmp_path*/) -> Status {
        if (const int err = write_all(fd, contents); err != 0) {
          return file_error(path, str_cat("cannot write the file: ", errno_text(err)));
        }
        return ok_status();
      },
      [&]() { return write_in_place(path, contents); });
}

Status write_output_file_with(
    const std::string& path, const std::function<Status(int fd, const std::string& tmp_path)>& fill,
    const std::function<Status()>& in_place) {
  namespace fs = std::filesystem;
  if (path.empty()) {
    return Error(ErrorCode::kInvalidArgument, "an output file name is empty");
  }
  std::error_code ec;
  fs::path target(path);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      if ((S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) && in_place) {
        return in_place();
      }
      return file_error(path,
                        str_cat("cannot write the file: it is ", describe_file_type(st.st_mode)));
    }
    // Replace a symbolic link's target, not the link.
    fs::path resolved = fs::canonical(target, ec);
    if (!ec) {
      target = std::move(resolved);
    }
  }
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    return file_error(path, str_cat("cannot write the file: ", errno_text(errno)));
  }
  const std::string tmp = tmpl;
  bool keep = false;
  struct Cleanup {
    const std::string& file;
    const bool& keep;
    ~Cleanup() {
      if (!keep) {
        ::unlink(file.c_str());
      }
    }
  } cleanup{tmp, keep};
  // mkstemp creates 0600; an output file gets the old file's mode, or 0666 less the umask.
  mode_t mode = 0;
  if (::stat(target.c_str(), &st) == 0) {
    mode = st.st_mode & 07777;
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  ::fchmod(fd, mode);
  Status filled = fill(fd, tmp);
  if (!filled) {
    ::close(fd);
    return filled;
  }
  int err = 0;
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    err = errno;
  }
  if (::close(fd) != 0 && err == 0) {
    err = errno;
  }
  if (err == 0 && ::rename(tmp.c_str(), target.c_str()) != 0) {
    err = errno;
  }
  if (err != 0) {
    return file_error(path, str_cat("cannot write the file: ", errno_text(err)));
  }
  keep = true;
  return ok_status();
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  const bool same = std::filesystem::equivalent(a, b, ec);
  return !ec && same;
}

}  // namespace fsdp

// SPDX-License-Identifier: Apache-2.0
// FileStore. Publishing with link(2) rather than rename(2) keeps keys write-once without a race
// between the existence check and the publish (rename would silently replace a stale value).
#include "backends/store/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "core/base/strings.h"

namespace fsdp::store {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kTempPrefix = ".fsdp-tmp-";
constexpr auto kPoll = std::chrono::milliseconds(5);

bool plain_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

std::string encode_key(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : key) {
    if (plain_char(c)) {
      out += c;
    } else {
      const auto u = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// This host's name with only plain characters (for temporary file names).
std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) {
    return "host";
  }
  std::string out;
  for (const char* p = buf; *p != '\0'; ++p) {
    out += plain_char(*p) ? *p : '_';
  }
  return out;
}

bool is_key_file(std::string_view name) {
  for (char c : name) {
    if (!plain_char(c) && c != '%') {
      return false;
    }
  }
  return !name.empty();
}

Status write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return Error(ErrorCode::kUnavailable, std::strerror(errno));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return ok_status();
}

// The whole file; an empty string and *missing = true when it does not exist (yet).
Expected<std::string> read_file(const std::string& path, bool* missing) {
  *missing = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      *missing = true;
      return std::string();
    }
    return Error(ErrorCode::kUnavailable,
                 str_cat("cannot open '", path, "': ", std::strerror(errno)));
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) {
      break;
    }
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      const int e = errno;
      ::close(fd);
      return Error(ErrorCode::kUnavailable,
                   str_cat("cannot read '", path, "': ", std::strerror(e)));
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace

FileStore::FileStore(std::string dir) : dir_(std::move(dir)), name_(str_cat("file:", dir_)) {}

Expected<std::unique_ptr<FileStore>> FileStore::make(std::string dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("store file:", dir, ": cannot use the directory (",
                         ec ? ec.message() : std::string("not a directory"), ")"));
  }
  return std::unique_ptr<FileStore>(new FileStore(std::move(dir)));
}

std::string FileStore::path_of(std::string_view key) const {
  return str_cat(dir_, "/", encode_key(key));
}

Status FileStore::set(std::string_view key, std::string_view value) {
  FSDP_RETURN_IF_ERROR(check_store_key(key, name_));
  static std::atomic<std::uint64_t> counter{0};
  const std::string final_path = path_of(key);
  // Unique across hosts sharing the directory, processes and threads (O_EXCL below checks it).
  const std::string temp_path = str_cat(dir_, "/", kTempPrefix, host_name(), "-", ::getpid(), "-",
                                        counter.fetch_add(1), "-", encode_key(key));
  auto fail = [&](std::string_view what, int err) {
    return Error(ErrorCode::kUnavailable, str_cat("store ", name_, ": cannot set key '", key, "' (",
                                                  what, ": ", std::strerror(err), ")"));
  };
  const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return fail(str_cat("create ", temp_path), errno);
  }
  Status written = write_all(fd, value);
  if (written.ok() && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    written = Error(ErrorCode::kUnavailable, std::strerror(errno));
  }
  ::close(fd);
  if (!written.ok()) {
    ::unlink(temp_path.c_str());
    return Error(ErrorCode::kUnavailable,
                 str_cat("store ", name_, ": cannot set key '", key, "' (write ", temp_path, ": ",
                         written.error().message(), ")"));
  }
  int err = 0;
  if (::link(temp_path.c_str(), final_path.c_str()) != 0) {
    err = errno;
    if (err == EPERM || err == ENOTSUP || err == EOPNOTSUPP || err == EXDEV || err == EMLINK) {
      // No hard links here: check, then rename (a race between two setters of one key is a bug
      // of the caller anyway: every key has one writer).
      struct stat st {};
      if (::stat(final_path.c_str(), &st) == 0) {
        err = EEXIST;
      } else if (::rename(temp_path.c_str(), final_path.c_str()) == 0) {
        return ok_status();
      } else {
        err = errno;
      }
    }
  }
  ::unlink(temp_path.c_str());
  if (err == EEXIST) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("store ", name_, ": key '", key,
                         "' is already set (left by an earlier run? use an empty directory)"));
  }
  if (err != 0) {
    return fail(str_cat("publish ", final_path), err);
  }
  return ok_status();
}

Expected<std::string> FileStore::get(std::string_view key, std::chrono::milliseconds timeout) {
  FSDP_RETURN_IF_ERROR(check_store_key(key, name_));
  const std::string path = path_of(key);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool missing = false;
    Expected<std::string> value = read_file(path, &missing);
    if (!value) {
      return Error(ErrorCode::kUnavailable,
                   str_cat("store ", name_, ": key '", key, "': ", value.error().message()));
    }
    if (!missing) {
      return value;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Error(ErrorCode::kUnavailable,
                   str_cat("store ", name_, ": key '", key, "' not set within ",
                           format_seconds(timeout), " s"));
    }
    std::this_thread::sleep_for(kPoll);
  }
}

Status FileStore::clear() {
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_key_file(name) || name.starts_with(kTempPrefix)) {
      fs::remove(it->path(), ec);
      if (ec) {
        break;
      }
    }
  }
  if (ec) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("store ", name_, ": cannot clear (", ec.message(), ")"));
  }
  return ok_status();
}

}  // namespace fsdp::store

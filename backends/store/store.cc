// SPDX-License-Identifier: Apache-2.0
// Store addresses and the factory.
#include "backends/store/store.h"

#include <charconv>
#include <iomanip>
#include <sstream>

#include "backends/store/file_store.h"
#include "backends/store/tcp_store.h"
#include "core/base/strings.h"

namespace fsdp::store {

Expected<StoreSpec> parse_store_spec(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Error(
        ErrorCode::kInvalidArgument,
        str_cat("store '", text, "': ", why, "; expected file:<directory> or tcp:<host>:<port>"));
  };
  StoreSpec spec;
  if (text.starts_with("file:")) {
    spec.kind = StoreSpec::Kind::kFile;
    spec.path = std::string(text.substr(5));
    if (spec.path.empty()) {
      return bad("empty directory");
    }
    return spec;
  }
  if (text.starts_with("tcp:")) {
    spec.kind = StoreSpec::Kind::kTcp;
    const std::string_view rest = text.substr(4);
    const std::size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) {
      return bad("no port");
    }
    spec.host = std::string(rest.substr(0, colon));
    if (spec.host.empty()) {
      return bad("empty host");
    }
    const std::string_view port = rest.substr(colon + 1);
    int value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 1 ||
        value > 65535) {
      return bad(str_cat("port '", port, "' is not an integer in 1..65535"));
    }
    spec.port = value;
    return spec;
  }
  return bad("unknown kind");
}

Status check_store_key(std::string_view key, const std::string& store_name) {
  if (key.empty() || key.size() > 200) {
    return Error(ErrorCode::kInvalidArgument, str_cat("store ", store_name, ": key of ", key.size(),
                                                      " characters; expected 1..200"));
  }
  for (char c : key) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Error(ErrorCode::kInvalidArgument,
                   str_cat("store ", store_name, ": key has a control character"));
    }
  }
  return ok_status();
}

Expected<std::unique_ptr<Store>> make_store(const StoreSpec& spec, int rank, int world,
                                            std::chrono::milliseconds timeout) {
  if (world < 1 || rank < 0 || rank >= world) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("store: rank ", rank, " outside [0, ", world, ")"));
  }
  if (spec.kind == StoreSpec::Kind::kFile) {
    FSDP_TRY(std::unique_ptr<FileStore> s, FileStore::make(spec.path));
    return std::unique_ptr<Store>(std::move(s));
  }
  if (rank == 0) {
    FSDP_TRY(std::unique_ptr<TcpStore> s, TcpStore::serve(spec.host, spec.port));
    return std::unique_ptr<Store>(std::move(s));
  }
  FSDP_TRY(std::unique_ptr<TcpStore> s, TcpStore::connect(spec.host, spec.port, timeout));
  return std::unique_ptr<Store>(std::move(s));
}

std::string format_seconds(std::chrono::milliseconds t) {
  std::ostringstream os;
  const auto ms = t.count();
  os << ms / 1000;
  if (ms % 1000 != 0) {
    os << '.' << std::setw(3) << std::setfill('0') << ms % 1000;
    std::string s = os.str();
    while (s.back() == '0') {
      s.pop_back();
    }
    return s;
  }
  return os.str();
}

}  // namespace fsdp::store

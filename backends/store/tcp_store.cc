// SPDX-License-Identifier: Apache-2.0
// TcpStore. Wire format (big-endian): request = op (1 byte: 'S' set, 'G' get, 'C' clear),
// key length (u32), key, payload length (u64), payload (set: the value; get: the wait in ms as a
// u64); reply = status (1 byte: 0 ok, 1 missing / already set), length (u64), bytes. One thread
// per connection on the server: a few members connect once each, so this stays small.
#include "backends/store/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "core/base/strings.h"

namespace fsdp::store {
namespace {

constexpr std::uint64_t kMaxValueBytes = 64ULL << 20;
constexpr auto kGetSlice = std::chrono::milliseconds(50);
constexpr auto kConnectRetry = std::chrono::milliseconds(20);
constexpr std::uint8_t kOk = 0;
constexpr std::uint8_t kMissing = 1;

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 7; i >= 0; --i) {
    out += static_cast<char>((v >> (8 * i)) & 0xff);
  }
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 3; i >= 0; --i) {
    out += static_cast<char>((v >> (8 * i)) & 0xff);
  }
}

std::uint64_t get_be(const char* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) {
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  }
  return v;
}

// false on EOF or error (errno set; 0 on EOF).
bool recv_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r == 0) {
      errno = 0;
      return false;
    }
    if (r < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t r = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) {
        continue;
      }
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(r));
  }
  return true;
}

std::string errno_text() { return errno == 0 ? "connection closed" : std::strerror(errno); }

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { ::freeaddrinfo(a); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

Expected<AddrInfoPtr> resolve(const std::string& host, int port, bool passive,
                              const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* out = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &out);
  if (rc != 0 || out == nullptr) {
    return Error(ErrorCode::kUnavailable, str_cat("store ", name, ": cannot resolve host '", host,
                                                  "' (", ::gai_strerror(rc), ")"));
  }
  return AddrInfoPtr(out);
}

}  // namespace

// --- server --------------------------------------------------------------------------------------
struct TcpStore::Server {
  std::mutex mu;
  std::condition_variable changed;
  std::map<std::string, std::string, std::less<>> table;
  bool stopping = false;
  int listen_fd = -1;
  std::set<int> connections;          // guarded by mu
  std::vector<std::thread> handlers;  // guarded by mu
  std::thread acceptor;

  // Returns kMissing when the key exists (set) or did not appear within `wait` (get).
  std::uint8_t set(const std::string& key, std::string value) {
    std::lock_guard<std::mutex> lock(mu);
    if (!table.emplace(key, std::move(value)).second) {
      return kMissing;
    }
    changed.notify_all();
    return kOk;
  }
  std::uint8_t get(const std::string& key, std::chrono::milliseconds wait, std::string* value) {
    std::unique_lock<std::mutex> lock(mu);
    auto found = [&] { return stopping || table.find(key) != table.end(); };
    changed.wait_for(lock, wait, found);
    auto it = table.find(key);
    if (it == table.end()) {
      return kMissing;
    }
    *value = it->second;
    return kOk;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu);
    table.clear();
  }

  void serve_connection(int fd) {
    for (;;) {
      char head[5];
      if (!recv_all(fd, head, sizeof(head))) {
        break;
      }
      const char op = head[0];
      const std::uint64_t key_len = get_be(head + 1, 4);
      if (key_len > 4096) {
        break;
      }
      std::string key(key_len, '\0');
      char len[8];
      if (!recv_all(fd, key.data(), key.size()) || !recv_all(fd, len, sizeof(len))) {
        break;
      }
      const std::uint64_t payload_len = get_be(len, 8);
      if (payload_len > kMaxValueBytes) {
        break;
      }
      std::string payload(payload_len, '\0');
      if (!recv_all(fd, payload.data(), payload.size())) {
        break;
      }
      std::uint8_t status = kOk;
      std::string value;
      if (op == 'S') {
        status = set(key, std::move(payload));
      } else if (op == 'G' && payload.size() == 8) {
        const auto wait = std::chrono::milliseconds(
            std::min<std::uint64_t>(get_be(payload.data(), 8), kGetSlice.count()));
        status = get(key, wait, &value);
      } else if (op == 'C') {
        clear();
      } else {
        break;  // a malformed request: drop the connection
      }
      std::string reply(1, static_cast<char>(status));
      put_u64(reply, value.size());
      reply += value;
      if (!send_all(fd, reply)) {
        break;
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    if (connections.erase(fd) > 0) {
      ::close(fd);
    }
  }

  void accept_loop() {
    for (;;) {
      const int fd = ::accept(listen_fd, nullptr, nullptr);
      std::lock_guard<std::mutex> lock(mu);
      if (stopping) {
        if (fd >= 0) {
          ::close(fd);
        }
        return;
      }
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
          continue;
        }
        return;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      connections.insert(fd);
      handlers.emplace_back([this, fd] { serve_connection(fd); });
    }
  }

  ~Server() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
      ::shutdown(listen_fd, SHUT_RDWR);  // wakes accept()
      for (int fd : connections) {
        ::shutdown(fd, SHUT_RDWR);  // wakes recv(); the handler closes it
      }
      changed.notify_all();
    }
    if (acceptor.joinable()) {
      acceptor.join();
    }
    // No new handlers after the acceptor stopped; join outside the lock (handlers take it).
    std::vector<std::thread> done;
    {
      std::lock_guard<std::mutex> lock(mu);
      done.swap(handlers);
    }
    for (std::thread& t : done) {
      t.join();
    }
    ::close(listen_fd);
  }
};

// --- client --------------------------------------------------------------------------------------
struct TcpStore::Client {
  std::mutex mu;  // one request at a time on the connection
  int fd = -1;
  ~Client() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  // Sends one request and reads the reply; errors name the store.
  Expected<std::pair<std::uint8_t, std::string>> request(char op, std::string_view key,
                                                         std::string_view payload,
                                                         const std::string& name) {
    std::string msg(1, op);
    put_u32(msg, static_cast<std::uint32_t>(key.size()));
    msg += key;
    put_u64(msg, payload.size());
    msg += payload;
    std::lock_guard<std::mutex> lock(mu);
    char head[9];
    if (!send_all(fd, msg) || !recv_all(fd, head, sizeof(head))) {
      return Error(ErrorCode::kUnavailable,
                   str_cat("store ", name, ": lost the server (", errno_text(), ")"));
    }
    const std::uint64_t len = get_be(head + 1, 8);
    if (len > kMaxValueBytes) {
      return Error(ErrorCode::kUnavailable, str_cat("store ", name, ": malformed reply"));
    }
    std::string value(len, '\0');
    if (!recv_all(fd, value.data(), value.size())) {
      return Error(ErrorCode::kUnavailable,
                   str_cat("store ", name, ": lost the server (", errno_text(), ")"));
    }
    return std::make_pair(static_cast<std::uint8_t>(head[0]), std::move(value));
  }
};

Expected<std::unique_ptr<TcpStore>> TcpStore::serve(const std::string& host, int port) {
  const std::string name = str_cat("tcp:", host, ":", port);
  FSDP_TRY(AddrInfoPtr addrs, resolve(host, port, /*passive=*/true, name));
  int fd = -1;
  int err = 0;
  for (addrinfo* a = addrs.get(); a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      break;
    }
    err = errno;
    ::close(fd);
    fd = -1;
  }
  if (fd < 0) {
    return Error(ErrorCode::kUnavailable,
                 str_cat("store ", name, ": cannot listen (", std::strerror(err), ")"));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  int actual = port;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
    actual = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  std::unique_ptr<TcpStore> s(new TcpStore());
  s->server_ = std::make_unique<Server>();
  s->server_->listen_fd = fd;
  s->port_ = actual;
  s->name_ = str_cat("tcp:", host, ":", actual);
  Server* server = s->server_.get();
  server->acceptor = std::thread([server] { server->accept_loop(); });
  return s;
}

Expected<std::unique_ptr<TcpStore>> TcpStore::connect(const std::string& host, int port,
                                                      std::chrono::milliseconds timeout) {
  const std::string name = str_cat("tcp:", host, ":", port);
  FSDP_TRY(AddrInfoPtr addrs, resolve(host, port, /*passive=*/false, name));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int err = 0;
  for (;;) {
    for (addrinfo* a = addrs.get(); a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        err = errno;
        continue;
      }
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        std::unique_ptr<TcpStore> s(new TcpStore());
        s->client_ = std::make_unique<Client>();
        s->client_->fd = fd;
        s->port_ = port;
        s->name_ = name;
        return s;
      }
      err = errno;
      ::close(fd);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Error(ErrorCode::kUnavailable,
                   str_cat("store ", name, ": cannot connect within ", format_seconds(timeout),
                           " s (", std::strerror(err), ")"));
    }
    std::this_thread::sleep_for(kConnectRetry);
  }
}

TcpStore::~TcpStore() = default;

Status TcpStore::set(std::string_view key, std::string_view value) {
  FSDP_RETURN_IF_ERROR(check_store_key(key, name_));
  if (value.size() > kMaxValueBytes) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("store ", name_, ": value of key '", key, "' has ", value.size(),
                         " bytes; at most ", kMaxValueBytes));
  }
  std::uint8_t status = kOk;
  if (server_) {
    status = server_->set(std::string(key), std::string(value));
  } else {
    FSDP_TRY(auto reply, client_->request('S', key, value, name_));
    status = reply.first;
  }
  if (status != kOk) {
    return Error(ErrorCode::kFailedPrecondition,
                 str_cat("store ", name_, ": key '", key, "' is already set"));
  }
  return ok_status();
}

Expected<std::string> TcpStore::get(std::string_view key, std::chrono::milliseconds timeout) {
  FSDP_RETURN_IF_ERROR(check_store_key(key, name_));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string k(key);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    const auto slice = std::max(std::chrono::milliseconds(0), std::min(left, kGetSlice));
    std::string value;
    std::uint8_t status = kMissing;
    if (server_) {
      status = server_->get(k, slice, &value);
    } else {
      std::string wait;
      put_u64(wait, static_cast<std::uint64_t>(slice.count()));
      FSDP_TRY(auto reply, client_->request('G', key, wait, name_));
      status = reply.first;
      value = std::move(reply.second);
    }
    if (status == kOk) {
      return value;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Error(ErrorCode::kUnavailable,
                   str_cat("store ", name_, ": key '", key, "' not set within ",
                           format_seconds(timeout), " s"));
    }
  }
}

Status TcpStore::clear() {
  if (server_) {
    server_->clear();
    return ok_status();
  }
  FSDP_TRY(auto reply, client_->request('C', "", "", name_));
  (void)reply;
  return ok_status();
}

}  // namespace fsdp::store

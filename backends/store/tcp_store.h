// SPDX-License-Identifier: Apache-2.0
// TcpStore: a Store served by one member over TCP (POSIX sockets, no other dependency). The
// serving member keeps the table in memory and uses it directly; the others connect to host:port
// and send one request at a time (set, get with a short server-side wait, clear), big-endian
// framed. get() polls in slices of at most 50 ms, so one thread's wait never blocks another
// thread's set on the same client. The server lives as long as the serving TcpStore object: it
// must outlive every other member's use (rendezvous.h: finish_rendezvous waits for that).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "backends/store/store.h"
#include "core/base/expected.h"

namespace fsdp::store {

class TcpStore final : public Store {
 public:
  // Listens on host:port (port 0: an ephemeral port; see port()). Errors (kUnavailable): the
  // host does not resolve, the port cannot be bound (in use, no permission).
  static Expected<std::unique_ptr<TcpStore>> serve(const std::string& host, int port);
  // Connects to the member serving on host:port, retrying every 20 ms until `timeout` (the
  // server may start later). Errors (kUnavailable): the host does not resolve; no server within
  // the timeout ("store tcp:h:p: cannot connect within 5 s (Connection refused)").
  static Expected<std::unique_ptr<TcpStore>> connect(const std::string& host, int port,
                                                     std::chrono::milliseconds timeout);
  // The server stops accepting, closes its connections and joins its threads.
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  Status set(std::string_view key, std::string_view value) override;
  Expected<std::string> get(std::string_view key, std::chrono::milliseconds timeout) override;
  Status clear() override;
  const std::string& name() const override { return name_; }

  // The port served or connected to (the bound one for serve(host, 0)).
  int port() const { return port_; }

 private:
  TcpStore() = default;
  struct Server;
  struct Client;
  std::unique_ptr<Server> server_;  // exactly one of server_ and client_ is set
  std::unique_ptr<Client> client_;
  std::string name_;
  int port_ = 0;
};

}  // namespace fsdp::store

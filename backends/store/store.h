// SPDX-License-Identifier: Apache-2.0
// Store: a small key-value rendezvous for processes started without mpirun (the NCCL unique ids
// and barriers of `fsdpsim train --backend cuda --store ...`). Keys are write-once: a second set
// of a key fails, so a directory left by an earlier run is reported instead of silently reused.
// get() waits for a key with a timeout. Nothing here is CUDA-specific. Implementations:
// FileStore (a shared directory, file_store.h) and TcpStore (rank 0 serves, tcp_store.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/base/expected.h"

namespace fsdp::store {

class Store {
 public:
  virtual ~Store() = default;
  // Publishes `value` (any bytes) under `key` (non-empty, at most 200 characters). Errors: a
  // malformed key (kInvalidArgument); the key is already set (kFailedPrecondition, naming the
  // key and the store); the medium's failure (kUnavailable). Thread-safe.
  virtual Status set(std::string_view key, std::string_view value) = 0;
  // The value of `key`, waiting up to `timeout` for some member to set it. Errors: a malformed
  // key (kInvalidArgument); "store <name>: key '<key>' not set within <t> s" (kUnavailable);
  // the medium's failure (kUnavailable). Thread-safe.
  virtual Expected<std::string> get(std::string_view key, std::chrono::milliseconds timeout) = 0;
  // Removes every key (after a finished run, so the same store can serve the next one). Only one
  // member calls it, once no member reads any more (rendezvous.h: finish_rendezvous).
  virtual Status clear() = 0;
  // "file:<dir>" or "tcp:<host>:<port>", for messages.
  virtual const std::string& name() const = 0;
};

// A parsed store address: "file:<dir>" (a directory every member can reach, created when
// missing) or "tcp:<host>:<port>" (member 0 listens on host:port, port 1..65535).
struct StoreSpec {
  enum class Kind : std::uint8_t { kFile, kTcp };
  Kind kind = Kind::kFile;
  std::string path;  // kFile
  std::string host;  // kTcp
  int port = 0;      // kTcp
};

// Parses a store address. Errors (kInvalidArgument, one line naming the text): no "file:" or
// "tcp:" prefix, an empty directory, a missing host, a port that is not an integer in 1..65535.
Expected<StoreSpec> parse_store_spec(std::string_view text);

// Checks a key: non-empty, at most 200 characters, no control characters.
Status check_store_key(std::string_view key, const std::string& store_name);

// The store for member `rank` of `world`: a FileStore on the directory, or a TcpStore that serves
// on rank 0 and connects (retrying until `timeout`) elsewhere. Errors: the implementation's.
Expected<std::unique_ptr<Store>> make_store(const StoreSpec& spec, int rank, int world,
                                            std::chrono::milliseconds timeout);

// "12.5" for 12500 ms: the seconds in timeout messages.
std::string format_seconds(std::chrono::milliseconds t);

}  // namespace fsdp::store

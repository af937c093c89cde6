// SPDX-License-Identifier: Apache-2.0
// Reads the missing-rank list of an in-process collective timeout error, for tests.
#pragma once

#include <string>
#include <vector>

namespace fsdp::test {

// The ranks an in-process timeout error lists as missing ("rank(s) 1, 3 did not join"): a slow
// but present rank may be listed too on a loaded machine, so tests check membership.
inline std::vector<std::string> missing_ranks(const std::string& message) {
  const std::string head = "rank(s) ";
  const std::size_t a = message.find(head);
  const std::size_t b = message.find(" did not join");
  std::vector<std::string> out;
  if (a == std::string::npos || b == std::string::npos || b < a) {
    return out;
  }
  std::string list = message.substr(a + head.size(), b - a - head.size());
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = list.find(", ", start);
    out.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) {
      break;
    }
    start = comma + 2;
  }
  return out;
}


}  // namespace fsdp::test
